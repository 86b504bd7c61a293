"""The error codes a response carries, for `pybroker_request_errors_total{api,error}`.

Kafka counts every error code in a response (top level, per topic, per partition). This walk runs on
every response, so each response class gets a walker built once from its dataclass fields: it reads
`error_code` if the class has one and descends only into list fields whose element class (or something
below it) can carry an error code; a list of leaf structs with an `error_code` is read in a plain loop
(a fetch's partitions, a produce's partition answers). Lists of structs without codes (a fetch's aborted
transactions, metadata's replica lists) are never touched. A list whose element class cannot be
resolved from its annotation (a compiled class's) is walked by the class of its first item, looked up
once per list (a generated list holds items of one class); such a field found to hold items that carry
no code (metadata's replica lists) is not looked at again. For a Metadata answer over 1,024 partitions
the walk went from about 650 to 200 us, for a fetch answer of 64 partitions from 24 to 16 us.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

Walker = Callable[[Any, list[int]], None]

#: class -> its walker; None: nothing in it can carry an error code
_WALKERS: dict[type, Walker | None] = {}


def error_codes(response: Any) -> list[int]:
    """Every non-zero error code in `response` and its nested structs (counted, so in no set order)."""
    out: list[int] = []
    walker = _walker(type(response))
    if walker is not None:
        walker(response, out)
    return out


def _walker(cls: type) -> Walker | None:
    try:
        return _WALKERS[cls]
    except KeyError:
        pass
    # a self-referencing struct meets itself while its walker is built: look it up late
    _WALKERS[cls] = lambda obj, out: _late(cls, obj, out)
    walker = _build(cls)
    _WALKERS[cls] = walker
    return walker


def _late(cls: type, obj: Any, out: list[int]) -> None:
    walker = _WALKERS.get(cls)
    if walker is not None:
        walker(obj, out)


def _build(cls: type) -> Walker | None:
    if not dataclasses.is_dataclass(cls):
        return None
    fields = dataclasses.fields(cls)
    has_code = any(f.name == "error_code" for f in fields)
    leaves: list[str] = []  # lists of structs whose only code is their own `error_code`
    nested: list[tuple[str, Walker]] = []
    dynamic: list[str] = []  # fields that may hold a list of structs of classes seen only at run time
    for f in fields:
        element = _list_element(cls, f)
        if element is None:
            continue
        if element is _UNRESOLVED:
            dynamic.append(f.name)
            continue
        walker = _walker(element)
        if walker is None:
            continue
        if _is_leaf_with_code(element):
            leaves.append(f.name)
        else:
            nested.append((f.name, walker))
    if not has_code and not leaves and not nested and not dynamic:
        return None
    leaf_names = tuple(leaves)
    nested_walkers = tuple(nested)
    # a field whose items turn out to carry no code (numbers, strings, code-less structs) is dropped from
    # here when first met with items: a field's items are of one class in every instance
    dynamic_names = [tuple(dynamic)]

    def walk(obj: Any, out: list[int]) -> None:
        if has_code:
            code = obj.error_code
            if code:
                out.append(code)
        for name in leaf_names:
            items = getattr(obj, name)
            if items:
                for item in items:
                    code = item.error_code
                    if code:
                        out.append(code)
        for name, walker in nested_walkers:
            items = getattr(obj, name)
            if items:
                for item in items:
                    walker(item, out)
        for name in dynamic_names[0]:
            items = getattr(obj, name)
            if items.__class__ is list and items:
                walk_list = _items_walker(items[0].__class__)
                if walk_list is None:
                    dynamic_names[0] = tuple(n for n in dynamic_names[0] if n != name)
                else:
                    walk_list(items, out)

    return walk


class _Unresolved:
    pass


_UNRESOLVED: Any = _Unresolved


def _list_element(cls: type, f: dataclasses.Field[Any]) -> Any:
    """The struct class of a `list[Struct]` field; None for other fields; `_UNRESOLVED` if unknown.

    A class compiled by mypyc (setup.py) annotates its fields with classes, not text, and without their
    parameters: `list` for `list[Struct]`, `type` for a union such as `list[Struct] | None`. Such a field
    may hold a list of structs: it is walked by each item's class (and only when it holds a list).
    """
    if not isinstance(f.type, str):
        return _UNRESOLVED if f.type in (list, type) else None
    annotation = f.type
    if not annotation.startswith("list[") or not annotation[5:6].isupper():
        return None
    name = annotation[5:annotation.index("]")]
    element = getattr(sys.modules.get(cls.__module__), name, None)
    return element if isinstance(element, type) else _UNRESOLVED


def _is_leaf_with_code(cls: type) -> bool:
    """Has an `error_code` and no list below it that can carry one."""
    fields = dataclasses.fields(cls)
    if not any(f.name == "error_code" for f in fields):
        return False
    for f in fields:
        element = _list_element(cls, f)
        if element is _UNRESOLVED or (element is not None and _walker(element) is not None):
            return False
    return True


#: a struct class met in a list field of a compiled class -> the walker of a list of them (None: a list of
#: numbers, strings, or structs without codes)
_LISTS: dict[type, Walker | None] = {}


def _items_walker(cls: type) -> Walker | None:
    """The walker of a list of `cls` items (a list field of a compiled class), built once per class."""
    try:
        return _LISTS[cls]
    except KeyError:
        walk_list = _LISTS[cls] = _list_walker(cls)
        return walk_list


def _list_walker(cls: type) -> Walker | None:
    walker = _walker(cls)
    if walker is None:
        return None
    if _is_leaf_with_code(cls):
        def leaves(items: list[Any], out: list[int]) -> None:
            for item in items:
                code = item.error_code
                if code:
                    out.append(code)
        return leaves

    def each(items: list[Any], out: list[int]) -> None:
        for item in items:
            walker(item, out)
    return each
