"""storm_queue.core.records: the value classes that stand in for dataclasses."""

from __future__ import annotations

import pytest

from storm_queue.core import records
from storm_queue.core.records import FrozenInstanceError, dataclass, field, fields, replace


@dataclass(frozen=True)
class Point:
    x: int
    y: int = 0
    tags: list = field(default_factory=list)


@dataclass(frozen=True)
class Pair:
    a: int
    b: str


@dataclass
class Box:
    size: int
    items: list = field(default_factory=list)


def test_init_defaults_and_fresh_factories() -> None:
    p, q = Point(1), Point(1)
    assert (p.x, p.y, p.tags) == (1, 0, [])
    assert p.tags is not q.tags
    assert Point(1, 2, ["a"]).tags == ["a"]
    assert Point(x=3, y=4) == Point(3, 4)
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Point(1, z=2)  # type: ignore[call-arg]


def test_frozen_refuses_assignment_and_hashes_by_fields() -> None:
    p = Point(1, 2)
    with pytest.raises(FrozenInstanceError):
        p.x = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del p.y
    assert hash(Pair(1, "b")) == hash(Pair(1, "b"))
    assert {Pair(1, "b"): "x"}[Pair(1, "b")] == "x"
    with pytest.raises(TypeError):  # as with dataclasses: a list field is unhashable
        hash(p)


def test_equality_needs_the_same_class() -> None:
    assert Point(1, 2) != Point(1, 3)
    assert Point(1) != (1, 0, [])
    assert Box(1) == Box(1)
    assert Box(1) != Point(1)


def test_mutable_records_change_and_are_unhashable() -> None:
    b = Box(1)
    b.size = 2
    b.items.append("x")
    assert b == Box(2, ["x"])
    with pytest.raises(TypeError):
        hash(b)


def test_repr_fields_replace() -> None:
    assert repr(Point(1, 2)) == "Point(x=1, y=2, tags=[])"
    assert fields(Point) == ("x", "y", "tags") == fields(Point(1))
    p = Point(1, 2, ["t"])
    assert replace(p, y=5) == Point(1, 5, ["t"])
    assert p.y == 2
    with pytest.raises(TypeError):
        replace(p, z=1)


def test_a_field_without_default_after_one_with_is_refused() -> None:
    with pytest.raises(TypeError):
        @dataclass
        class Bad:
            a: int = 1
            b: int


@pytest.mark.parametrize("frozen", [True, False])
def test_init_binds_as_the_compiled_one_would_then_compiles(frozen: bool) -> None:
    @dataclass(frozen=frozen)
    class Late:
        a: int
        b: int = 7
        c: list = field(default_factory=list)

    class Plain(Late):  # not a record itself: it inherits Late's __init__
        pass

    assert "c" not in Late.__dict__  # the factory is not a class attribute
    stub = Late.__init__
    calls = [((1,), {}), ((1, 2), {}), ((1, 2, [3]), {}), ((), {"a": 1}), ((1,), {"c": [4], "b": 5}),
             ((), {"c": [], "a": 0, "b": 1})]
    bound = [Late(*args, **kwargs) for args, kwargs in calls]
    assert Late.__init__ is stub  # a few instances: bound one field at a time, nothing compiled
    assert [(x.a, x.b, x.c) for x in bound] == [(1, 7, []), (1, 2, []), (1, 2, [3]), (1, 7, []), (1, 5, [4]), (0, 1, [])]
    assert bound[0].c is not bound[3].c  # a fresh list each
    assert Plain(1).a == 1 and "__init__" not in Plain.__dict__

    refused = [((), {}), ((1, 2, 3, 4), {}), ((1,), {"a": 1}), ((1,), {"z": 2}), ((), {"b": 1})]
    words = []
    for args, kwargs in refused:  # refused as the compiled one refuses (it is compiled to say why)
        with pytest.raises(TypeError) as caught:
            Late(*args, **kwargs)
        words.append(str(caught.value))
    assert Late.__init__ is not stub
    assert words == ["__init__() missing 1 required positional argument: 'a'",
                     "__init__() takes from 2 to 4 positional arguments but 5 were given",
                     "__init__() got multiple values for argument 'a'",
                     "__init__() got an unexpected keyword argument 'z'",
                     "__init__() missing 1 required positional argument: 'a'"]
    assert [(x.a, x.b, x.c) for x in (Late(*args, **kwargs) for args, kwargs in calls)] == \
        [(x.a, x.b, x.c) for x in bound]


def test_a_much_used_record_compiles_its_init() -> None:
    @dataclass(frozen=True)
    class Many:
        n: int

    stub = Many.__init__
    made = [Many(k) for k in range(records.COMPILE_AFTER)]
    assert Many.__init__ is stub
    made.append(Many(n=records.COMPILE_AFTER))
    assert Many.__init__ is not stub and Many.__init__.__name__ == "__init__"
    assert [m.n for m in made] == list(range(records.COMPILE_AFTER + 1))
    with pytest.raises(FrozenInstanceError):
        made[0].n = 5  # type: ignore[misc]
