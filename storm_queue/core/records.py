"""Value classes for the library, at a fraction of the start-up cost of the
standard ``dataclasses`` module.

``dataclasses`` imports ``inspect`` (and with it ``ast``, ``dis``,
``tokenize``, ``enum``...), which alone costs more than everything ``next``
does on a small storm. This module offers the small part of its interface
that storm-queue uses, under the same names, so a module switches by its
import line: ``dataclass`` (with ``frozen``), ``field(default_factory=...)``,
``replace`` and ``fields`` (which returns the field names).

Every annotation in the class body (not in its bases) is a field, in order;
a class attribute of the same name is its default. Instances compare equal
when their classes are the same and their fields are equal; frozen ones
refuse assignment and hash by their fields (computed once); mutable ones
are unhashable. A class's ``__init__`` is compiled for its fields (as
``dataclasses`` does) only once it has made ``COMPILE_AFTER`` instances:
compiling costs a command more than making the few instances most commands
make, one field at a time.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

_FIELDS = "__record_fields__"
_HASH = "__record_hash__"


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a frozen record."""


class field:  # noqa: N801 -- named like dataclasses.field, which it stands for
    """A default made fresh for every instance: ``field(default_factory=list)``."""

    def __init__(self, default_factory: Callable[[], Any]):
        self.default_factory = default_factory


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r} of frozen {type(self).__name__}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r} of frozen {type(self).__name__}")


def _make_init(names: tuple[str, ...], defaults: dict[str, Any], frozen: bool) -> Any:
    """An ``__init__`` compiled for these fields (``defaults`` holds a default
    or a ``field`` for some of them), as fast as a hand-written one."""
    scope: dict[str, Any] = {"_setattr": object.__setattr__}
    params, body = [], []
    for name in names:
        if name not in defaults:
            params.append(name)
        elif isinstance(defaults[name], field):
            scope[f"_factory_{name}"] = defaults[name].default_factory
            params.append(f"{name}=_FRESH")
            body.append(f"  if {name} is _FRESH: {name} = _factory_{name}()")
        else:
            scope[f"_default_{name}"] = defaults[name]
            params.append(f"{name}=_default_{name}")
        body.append(f"  _setattr(self, {name!r}, {name})" if frozen else f"  self.{name} = {name}")
    scope["_FRESH"] = scope  # a sentinel no caller can pass by accident
    src = f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(body) or "  pass") + "\n"
    exec(src, scope)  # noqa: S102 -- the source is built from identifiers only
    return scope["__init__"]


#: instances a record class makes by binding its arguments one by one before
#: it compiles its own ``__init__``: compiling one costs as much as a few
#: hundred such instances, and a command makes only a few of most classes
COMPILE_AFTER = 100


def _bind(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any], names: tuple[str, ...],
          defaults: dict[str, Any], setter: Callable[[Any, str, Any], None]) -> bool:
    """Set the fields of ``self`` from a call's arguments exactly as the
    compiled ``__init__`` would; False when that one would refuse the call
    (it then says why)."""
    if len(args) > len(names):
        return False
    taken = 0
    for at, name in enumerate(names):
        if at < len(args):
            if name in kwargs:
                return False
            value = args[at]
        elif name in kwargs:
            value, taken = kwargs[name], taken + 1
        elif name in defaults:
            value = defaults[name]
            if isinstance(value, field):
                value = value.default_factory()
        else:
            return False
        setter(self, name, value)
    return taken == len(kwargs)


def dataclass(cls: type | None = None, *, frozen: bool = False) -> Any:
    """Make ``cls`` a record: ``__init__``, ``__repr__``, ``__eq__`` (and
    ``__hash__`` and assignment refusal when ``frozen``) from its fields."""

    def wrap(cls: type) -> type:
        names = tuple(cls.__dict__.get("__annotations__", {}))
        seen_default = False
        for name in names:
            has_default = name in cls.__dict__
            if seen_default and not has_default:
                raise TypeError(f"{cls.__name__}: field {name!r} without a default follows one with a default")
            seen_default = seen_default or has_default
        defaults = {name: cls.__dict__[name] for name in names if name in cls.__dict__}

        setter = object.__setattr__ if frozen else setattr
        made = 0

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # compiled once the class is used much
            nonlocal made
            made += 1
            if made <= COMPILE_AFTER and _bind(self, args, kwargs, names, defaults, setter):
                return
            cls.__init__ = _make_init(names, defaults, frozen)  # type: ignore[misc]
            cls.__init__(self, *args, **kwargs)

        cls.__init__ = __init__  # type: ignore[misc]
        for name, default in defaults.items():
            if isinstance(default, field):
                delattr(cls, name)
        setattr(cls, _FIELDS, names)

        def __repr__(self: Any) -> str:
            return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

        def __eq__(self: Any, other: Any) -> Any:
            if other.__class__ is not self.__class__:
                return NotImplemented
            return all(getattr(self, n) == getattr(other, n) for n in names)

        cls.__repr__ = __repr__  # type: ignore[method-assign]
        cls.__eq__ = __eq__  # type: ignore[method-assign]
        if frozen:
            def __hash__(self: Any) -> int:  # computed once: a record's fields never change
                try:
                    return self.__dict__[_HASH]
                except KeyError:
                    h = hash(tuple(getattr(self, n) for n in names))
                    object.__setattr__(self, _HASH, h)
                    return h

            cls.__hash__ = __hash__  # type: ignore[method-assign]
            cls.__setattr__ = _frozen_setattr  # type: ignore[method-assign]
            cls.__delattr__ = _frozen_delattr  # type: ignore[method-assign]
        else:
            cls.__hash__ = None  # type: ignore[assignment]
        return cls

    return wrap if cls is None else wrap(cls)


def fields(record: Any) -> tuple[str, ...]:
    """The field names of a record (class or instance), in order."""
    return getattr(record, _FIELDS)


def replace(record: Any, **changes: Any) -> Any:
    """A new record like ``record`` with ``changes`` applied."""
    unknown = set(changes) - set(fields(record))
    if unknown:
        raise TypeError(f"{type(record).__name__} has no field {sorted(unknown)[0]!r}")
    return type(record)(**{n: changes.get(n, getattr(record, n)) for n in fields(record)})


def is_record(value: Any) -> bool:
    """True when ``value`` is an instance of a record class."""
    return hasattr(type(value), _FIELDS)
