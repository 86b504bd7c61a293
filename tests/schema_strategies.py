"""Hypothesis strategies that build message objects from our schema tables, for a given version.

Only fields present in the version get random values (others keep their defaults), nullable fields
are sometimes None, and values stay inside each type's range, so any object drawn must round-trip.
"""

from __future__ import annotations

import importlib
import uuid
from typing import Any

from hypothesis import strategies as st

from pybroker.protocol.codegen import messages_of, schema_modules
from pybroker.protocol.schema.dsl import Field, Message

INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
UINT_RANGES = {"uint16": 16, "uint32": 32}
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)


def message_cases(kinds: tuple[str, ...] = ("request", "response", "header")) -> list[tuple[str, Message, int]]:
    """(schema module, message, version) for every message of those kinds in every schema module."""
    cases = []
    for name in schema_modules():
        for message in messages_of(name):
            if message.kind not in kinds:
                continue
            assert message.valid.hi is not None
            cases += [(name, message, v) for v in range(message.valid.lo, message.valid.hi + 1)]
    return cases


def case_id(value: Any) -> str:
    """Readable pytest ids: the module name, the message name, the version."""
    return value if isinstance(value, str) else getattr(value, "name", str(value))


def _scalar(type_: str) -> st.SearchStrategy[Any]:
    if type_ in INT_RANGES:
        bits = INT_RANGES[type_]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if type_ in UINT_RANGES:
        return st.integers(0, 2 ** UINT_RANGES[type_] - 1)
    table: dict[str, st.SearchStrategy[Any]] = {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "uuid": st.uuids(),
        "string": TEXT,
        "bytes": st.binary(max_size=8),
        "records": st.binary(max_size=16),
    }
    return table[type_]


def _value(f: Field, version: int, classes: dict[str, type]) -> st.SearchStrategy[Any]:
    if f.is_struct:
        element: st.SearchStrategy[Any] = struct_strategy(classes[_class_name(f, classes)], f.fields, version,
                                                          classes)
    else:
        element = _scalar(f.element_type)
    strategy = st.lists(element, max_size=3) if f.is_array else element
    if version in f.nullable:
        strategy = st.one_of(st.none(), strategy)
    return strategy


def _class_name(f: Field, classes: dict[str, type]) -> str:
    for name in classes:
        if name.endswith(f.element_type) and classes[name].__dataclass_fields__.keys() == {x.name for x in f.fields}:
            return name
    raise KeyError(f.element_type)


def struct_strategy(cls: type, fields: tuple[Field, ...], version: int,
                    classes: dict[str, type]) -> st.SearchStrategy[Any]:
    present = {f.name: _value(f, version, classes) for f in fields if version in f.versions}
    return st.builds(cls, **present)


def message_strategy(module_name: str, message: Message, version: int) -> st.SearchStrategy[Any]:
    module = importlib.import_module(f"pybroker.protocol.messages.{module_name}")
    classes = {name: obj for name, obj in vars(module).items()
               if isinstance(obj, type) and hasattr(obj, "__dataclass_fields__")}
    return struct_strategy(classes[message.name], message.fields, version, classes)


def to_plain(obj: Any, fields: tuple[Field, ...], version: int) -> dict[str, Any]:
    """The fields of `obj` present in `version`, as plain data (uuids as strings, records as bytes)."""
    out: dict[str, Any] = {}
    for f in fields:
        if version not in f.versions:
            continue
        out[f.name] = _plain_value(getattr(obj, f.name), f, version)
    return out


def _plain_value(value: Any, f: Field, version: int) -> Any:
    if value is None:
        return None
    if f.is_array:
        return [_plain_one(v, f, version) for v in value]
    return _plain_one(value, f, version)


def _plain_one(value: Any, f: Field, version: int) -> Any:
    if f.is_struct:
        return to_plain(value, f.fields, version) if not isinstance(value, dict) else value
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value
