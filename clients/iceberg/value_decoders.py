"""How a record's value becomes typed columns: the one seam between the Iceberg worker and a schema registry.

`iceberg.mode` picks how values are read (Redpanda's names):
- `key_value`: no decoding; the value is one binary column (`columns.key_value_schema`).
- `value_schema_id_prefix`: the value carries Confluent's wire prefix (magic byte 0, a 4-byte big-endian
  schema id) and the rest is encoded by that registered schema.
- `value_schema_latest`: the value (no prefix) is encoded by the latest schema registered for the topic's
  value subject (`<topic>-value`); the broker names that schema's id in the job.

The decoding modes need only this of a registry: "give me the Arrow columns and the decoder for schema
id N" (`RegistrySchemas.decoder`). The broker's registry hands its schemas to the worker through the
job's pipe (`broker/iceberg_tables.py`: each schema once per worker process), so the worker parses no
`_schemas` record itself. Avro (`avro_columns.py`), JSON Schema (`json_columns.py`) and Protobuf
(`protobuf_columns.py`) are decoded; an unknown id or a value that does not decode raises `NotDecodable`, and its record goes to the dead-letter table
(`iceberg.invalid.record.action=dlq_table`) or is dropped.

Called by the worker process's one thread.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

MODES = ("disabled", "key_value", "value_schema_id_prefix", "value_schema_latest")
DECODING_MODES = frozenset({"value_schema_id_prefix", "value_schema_latest"})
CONFLUENT_MAGIC = 0
_PREFIX = struct.Struct(">bI")
#: parsed schemas (and their failures) kept per worker
MAX_DECODERS = 4096


class UnservedMode(Exception):
    """The topic's mode needs what this broker does not have (its schema registry is off)."""


class NotDecodable(ValueError):
    """This value does not decode by its schema: its record goes to the dead-letter table or is dropped."""


@dataclass(frozen=True, slots=True)
class ValueDecoder:
    """The value columns of one schema, and how one value's bytes become a row of them."""

    schema_id: int
    arrow_fields: pa.Schema
    decode: Callable[[bytes], dict[str, Any]]
    #: value_schema_latest's values carry no prefix (for Protobuf, no message indexes either); None: `decode`
    decode_unframed: Callable[[bytes], dict[str, Any]] | None = None


def schema_id_prefix(value: bytes | None) -> tuple[int, bytes]:
    """(schema id, payload) of a value in Confluent's wire format; `NotDecodable` when it has none."""
    if value is None or len(value) < _PREFIX.size:
        raise NotDecodable("the value is shorter than Confluent's 5-byte schema id prefix")
    magic, schema_id = _PREFIX.unpack_from(value)
    if magic != CONFLUENT_MAGIC:
        raise NotDecodable(f"the value starts with byte {magic}, not Confluent's magic byte 0")
    return schema_id, value[_PREFIX.size:]


class RegistrySchemas:
    """The schemas the broker sent (id -> {"type", "schema", "refs": [ids]}), parsed on first use."""

    def __init__(self) -> None:
        self.schemas: dict[int, dict[str, Any]] = {}
        self._decoders: dict[int, ValueDecoder | NotDecodable] = {}

    def add(self, schemas: dict[str, Any]) -> None:
        for key, entry in schemas.items():
            self.schemas[int(key)] = entry

    def decoder(self, schema_id: int) -> ValueDecoder:
        found = self._decoders.get(schema_id)
        if found is None:
            try:
                found = self._build(schema_id)
            except NotDecodable as exc:
                found = exc
            if len(self._decoders) >= MAX_DECODERS:
                self._decoders.clear()
            self._decoders[schema_id] = found
        if isinstance(found, NotDecodable):
            raise found
        return found

    def _entry(self, schema_id: int) -> dict[str, Any]:
        entry = self.schemas.get(schema_id)
        if entry is None:
            raise NotDecodable(f"schema id {schema_id} is not in the broker's schema registry")
        return entry

    def _named(self, schema_id: int, named: dict[str, Any], depth: int = 0) -> Any:
        """Parse Avro schema `schema_id` (its references first) into `named`; its fastavro form."""
        import fastavro

        entry = self._entry(schema_id)
        if entry.get("type", "AVRO") != "AVRO":
            raise NotDecodable(f"schema id {schema_id} is {entry.get('type')}, referenced from an Avro schema")
        if depth > 16:
            raise NotDecodable(f"schema id {schema_id}: references nested too deeply")
        for ref in entry.get("refs") or []:
            self._named(int(ref), named, depth + 1)
        try:
            return fastavro.parse_schema(json.loads(entry["schema"]), named_schemas=named, _write_hint=False)
        except Exception as exc:  # the registry checked it; a failure here is still only this schema's
            raise NotDecodable(f"schema id {schema_id} does not parse: {exc}") from None

    def _build(self, schema_id: int) -> ValueDecoder:
        kind = self._entry(schema_id).get("type", "AVRO")
        build = BUILDERS.get(kind)
        if build is None:
            raise NotDecodable(f"schema id {schema_id} is {kind}: no decoder for that schema type")
        return build(self, schema_id)

    def _avro(self, schema_id: int) -> ValueDecoder:
        from pybroker.clients.iceberg.avro_columns import Unsupported, decoder, value_fields

        named: dict[str, Any] = {}
        parsed = self._named(schema_id, named)
        try:
            fields = value_fields(parsed, named)
        except Unsupported as exc:
            raise NotDecodable(f"schema id {schema_id} has no table columns: {exc}") from None
        top = named.get(parsed, parsed) if isinstance(parsed, str) else parsed
        is_record = isinstance(top, dict) and top.get("type") in ("record", "error")
        return ValueDecoder(schema_id, fields, decoder(parsed, fields, is_record, named))

    def _json(self, schema_id: int) -> ValueDecoder:
        from pybroker.clients.iceberg.avro_columns import Unsupported
        from pybroker.clients.iceberg.json_columns import decoder

        try:
            fields, decode = decoder(json.loads(self._entry(schema_id)["schema"]))
        except (Unsupported, ValueError) as exc:
            raise NotDecodable(f"schema id {schema_id} has no table columns: {exc}") from None
        return ValueDecoder(schema_id, fields, decode)

    def _protobuf(self, schema_id: int) -> ValueDecoder:
        from pybroker.clients.iceberg.avro_columns import Unsupported
        from pybroker.clients.iceberg.protobuf_columns import build_file, decoder

        try:
            file = build_file(schema_id, self.schemas)
            fields, decode = decoder(file, framed=True)
            _, plain = decoder(file, framed=False)
        except (Unsupported, ValueError) as exc:
            raise NotDecodable(f"schema id {schema_id} has no table columns: {exc}") from None
        return ValueDecoder(schema_id, fields, decode, plain)


#: schema type -> how its decoder is made
BUILDERS: dict[str, Callable[[RegistrySchemas, int], ValueDecoder]] = {
    "AVRO": RegistrySchemas._avro, "JSON": RegistrySchemas._json, "PROTOBUF": RegistrySchemas._protobuf}


def check_mode(mode: str, has_registry: bool) -> None:
    """Raise `UnservedMode` for a decoding mode when the broker runs no schema registry."""
    if mode in DECODING_MODES and not has_registry:
        raise UnservedMode(f"iceberg.mode={mode} decodes values by their registered schema, and this broker "
                           "runs no schema registry: set schema.registry.port (or use key_value)")
