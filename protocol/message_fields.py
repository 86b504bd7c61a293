"""The dataclass face of the generated plain message classes, built only when something asks for it.

Most generated message modules hold plain classes (`__slots__`, a written-out `__init__`, `__eq__` and
`__repr__`) rather than `@dataclass` ones: the decorator's work for ~300 classes was about a quarter of
the broker's start-up CPU, and none of it is needed to decode or encode. Callers that reflect on a
message (`dataclasses.fields`, `is_dataclass`, `replace`, `asdict`: the response-error walk of the
metrics, the log dumper, the fuzzers and tests) still find `__dataclass_fields__`: `DataclassFields`
is a class attribute that builds the real `dataclasses.Field` table on first access, from the class's
slots (the field order), its annotations (the field types, as strings) and its `__init__`'s defaults,
and then replaces itself on that class with the table.

Pure and thread-agnostic: the first access may come from any thread; two racing builds make equal
tables and the last one stays.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any


class DataclassFields:
    """`__dataclass_fields__` of a generated plain class, made on first read (see the module's docstring)."""

    __slots__ = ()

    def __get__(self, obj: Any, owner: type) -> dict[str, dataclasses.Field[Any]]:
        table = _build(owner)
        owner.__dataclass_fields__ = table  # type: ignore[attr-defined]
        return table


def _build(owner: type) -> dict[str, dataclasses.Field[Any]]:
    """The fields a `@dataclass` of the same class would have: same names, order, types and defaults.

    A default the `__init__` builds afresh (a list, a struct; its signature shows None or a marker for
    it) becomes a `default_factory`, as the dataclass declared it."""
    names: tuple[str, ...] = owner.__dict__["__slots__"]
    annotations: dict[str, Any] = inspect.get_annotations(owner)
    parameters = inspect.signature(owner.__init__).parameters  # type: ignore[misc]
    fresh = owner()
    specs: list[tuple[str, Any, dataclasses.Field[Any]]] = []
    for name in names:
        declared = parameters[name].default
        value = getattr(fresh, name)
        if declared is value or (declared == value and type(declared) is type(value)):
            spec: dataclasses.Field[Any] = dataclasses.field(default=declared)
        else:
            spec = dataclasses.field(default_factory=_fresh(owner, name))
        specs.append((name, annotations.get(name, "Any"), spec))
    shadow = dataclasses.make_dataclass(owner.__name__, specs, eq=False, repr=False)
    return dict(shadow.__dataclass_fields__)  # type: ignore[attr-defined]


def _fresh(owner: type, name: str) -> Callable[[], Any]:
    """A field's default factory: the value a new instance starts with."""
    return lambda: getattr(owner(), name)
