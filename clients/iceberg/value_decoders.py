"""How a record's value becomes typed columns: the one seam between the Iceberg worker and a schema registry.

`iceberg.mode` picks how values are read (Redpanda's names):
- `key_value`: no decoding; the value is one binary column (`columns.key_value_schema`). Served.
- `value_schema_id_prefix`: the value carries Confluent's wire prefix (magic byte 0, a 4-byte big-endian
  schema id) and the rest is encoded by that registered schema.
- `value_schema_latest`: the value is encoded by the latest schema registered for the topic's value subject.

The two decoding modes need only this of a registry: "give me the Arrow schema and the decoder for schema
id N" (`SchemaSource.decoder`). A `SchemaSource` built on the `_schemas` topic (Confluent's key and value
JSON, Avro first with fastavro) plugs in here once the registry lands; until then a topic in those modes
gets no rows and its status says why (`UnservedMode`). A record that does not decode goes to the
dead-letter table (`iceberg.invalid.record.action=dlq_table`) with the key_value columns, or is dropped.

Pure: any thread may call it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

MODES = ("disabled", "key_value", "value_schema_id_prefix", "value_schema_latest")
SERVED_MODES = frozenset({"key_value"})
CONFLUENT_MAGIC = 0
_PREFIX = struct.Struct(">bI")


class UnservedMode(Exception):
    """The topic's mode needs what this broker does not have yet (a schema registry)."""


class NotDecodable(ValueError):
    """This value does not decode by its schema: its record goes to the dead-letter table or is dropped."""


@dataclass(frozen=True, slots=True)
class ValueDecoder:
    """The value columns of one schema, and how one value's bytes become a row of them."""

    schema_id: int
    arrow_fields: pa.Schema
    decode: Callable[[bytes], dict[str, Any]]


class SchemaSource(Protocol):
    """What the decoding modes need of a schema registry."""

    def decoder(self, schema_id: int) -> ValueDecoder: ...

    def latest_id(self, subject: str) -> int: ...


def schema_id_prefix(value: bytes | None) -> tuple[int, bytes]:
    """(schema id, payload) of a value in Confluent's wire format; `NotDecodable` when it has none."""
    if value is None or len(value) < _PREFIX.size:
        raise NotDecodable("the value is shorter than Confluent's 5-byte schema id prefix")
    magic, schema_id = _PREFIX.unpack_from(value)
    if magic != CONFLUENT_MAGIC:
        raise NotDecodable(f"the value starts with byte {magic}, not Confluent's magic byte 0")
    return schema_id, value[_PREFIX.size:]


def check_mode(mode: str) -> None:
    """Raise `UnservedMode` for a mode this broker cannot fill a table for yet."""
    if mode not in SERVED_MODES:
        raise UnservedMode(f"iceberg.mode={mode} decodes values by their registered schema, and this broker "
                           "has no schema registry yet: use key_value")
