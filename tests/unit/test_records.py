"""storm_queue.records: the value classes that stand in for dataclasses."""

from __future__ import annotations

import pytest

from storm_queue.records import FrozenInstanceError, dataclass, field, fields, replace


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


def test_init_is_compiled_at_the_first_instance_and_then_is_the_compiled_one() -> None:
    @dataclass(frozen=True)
    class Late:
        a: int
        b: list = field(default_factory=list)

    class Plain(Late):  # not a record itself: it inherits Late's __init__
        pass

    assert "b" not in Late.__dict__  # the factory is not a class attribute
    stub = Late.__init__
    with pytest.raises(TypeError, match=r"__init__\(\) missing 1 required positional argument: 'a'"):
        Late()  # type: ignore[call-arg]
    assert Late.__init__ is not stub  # compiled even by a call that failed, once
    compiled = Late.__init__
    first, second = Plain(1), Late(2)
    assert (first.a, first.b, second.a) == (1, [], 2) and first.b is not second.b
    assert Late.__init__ is compiled and "__init__" not in Plain.__dict__
