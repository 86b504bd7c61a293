"""JSON Schema and Protobuf values into typed columns, and tombstones as rows: the worker on partitions written by
storage's own `Log`, the schemas as the broker's registry hands them over (`broker/iceberg_schemas.py`, a real
`RegistryState` fed Confluent's `_schemas` records), values encoded as Confluent's serializers frame them."""

from __future__ import annotations

import base64
import datetime
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.broker.iceberg_schemas import new_schemas
from pybroker.broker.schema_registry.records import schema_key, schema_value
from pybroker.broker.schema_registry.store import RegistryState
from pybroker.clients.iceberg.protobuf_columns import read_indexes
from pybroker.clients.iceberg.worker import Worker
from tests.unit.clients.iceberg.test_decoding_modes import V1, _append_values, _job, _scan, _value, framed
from tests.unit.storage.helpers import open_log

pytest.importorskip("pyiceberg")

JSON_V1 = {"type": "object", "properties": {
    "id": {"type": "integer"}, "name": {"type": "string"}, "score": {"type": "number"},
    "ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
    "where": {"type": ["object", "null"], "properties": {"city": {"type": "string"}}},
    "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
    "kind": {"enum": ["a", "b"]}}, "required": ["id"]}
JSON_V2 = {**JSON_V1, "properties": {**JSON_V1["properties"], "note": {"type": ["string", "null"]}}}
PROTO = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  string item = 2;
  enum Kind { VIEW = 0; BUY = 1; }
  Kind kind = 3;
  message Place { string city = 1; }
  Place where = 4;
  repeated int32 sizes = 5;
  map<string, int64> attrs = 6;
  google.protobuf.Timestamp at = 7;
  optional string note = 8;
  uint64 big = 9;
}
"""


def _registry(*schemas: tuple[int, str, str]) -> dict[str, Any]:
    state = RegistryState()
    for version, (schema_id, kind, text) in enumerate(schemas, 1):
        state.apply(schema_key("t-value", version), schema_value("t-value", version, schema_id, kind, text, [], False))
    return new_schemas(state, frozenset())


def _json_value(schema_id: int, value: Any) -> bytes:
    return struct.pack(">bI", 0, schema_id) + json.dumps(value).encode()


def test_json_schema_values_become_typed_columns_evolve_and_bad_ones_go_to_the_dead_letter_table(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    good = {"id": 1, "name": "n", "score": 2.5, "ok": True, "tags": ["x"], "where": {"city": "Lyon", "extra": 1},
            "counts": {"a": 3}, "kind": "a"}
    _append_values(log, [_json_value(1, good), _json_value(1, {"id": 2}),                       # 0-1
                         _json_value(2, {"id": 3, "note": "hi", "score": 4}),                     # 2
                         _json_value(1, {"name": "no id"}), _json_value(1, {"id": "x"}),         # 3-4
                         _json_value(1, {"id": 2 ** 70}), b"\x00\x00\x00\x00\x01{not json",       # 5-6
                         _json_value(3, {})])                                                    # 7
    log.flush()
    job = _job(tmp_path, log.last_stable_offset)
    job["schemas"] = _registry((1, "JSON", json.dumps(JSON_V1)), (2, "JSON", json.dumps(JSON_V2)),
                               (3, "JSON", json.dumps({"type": "object", "properties": {"kafka": {"type": "string"}}})))
    worker = Worker()
    status = worker.run(job)["topics"]["t"]
    assert status["error"] is None and status["rows_written"] == 3 and status["dlq_rows_written"] == 5, status
    sink = worker.sinks["t"]
    fields = {f.name: str(f.field_type) for f in sink.table.schema().fields}
    assert fields["id"] == "long" and fields["score"] == "double" and fields["ok"] == "boolean"
    assert fields["tags"].startswith("list<string") and fields["note"] == "string" and fields["kind"] == "string"
    assert fields["counts"].startswith("map<string, long") and fields["where"].startswith("struct<")
    rows = _scan(sink.table)
    assert rows[0]["id"] == 1 and rows[0]["where"] == {"city": "Lyon"} and dict(rows[0]["counts"]) == {"a": 3}
    assert rows[0]["tags"] == ["x"] and rows[0]["note"] is None and rows[1]["name"] is None
    assert rows[2]["note"] == "hi" and rows[2]["score"] == 4.0
    reasons = [r["reason"] for r in _scan(sink.dlq)]
    assert "does not validate" in reasons[0] and "does not validate at id" in reasons[1]
    assert "does not fit" in reasons[2] or "does not validate" in reasons[2]
    assert "JSONDecodeError" in reasons[3] and "collides" in reasons[4]
    log.close()


def _proto_classes(descriptor: str) -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    pool = descriptor_pool.DescriptorPool()
    well_known = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(well_known)
    pool.Add(well_known)
    proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(descriptor))
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_values_become_typed_columns_with_structs_lists_enums_and_timestamps(tmp_path: Path) -> None:
    schemas = _registry((1, "PROTOBUF", PROTO))
    order = _proto_classes(schemas["1"]["descriptor"])
    at = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC)
    first = order(id=7, item="tea", kind=1, sizes=[1, 2], note="n")
    first.where.city = "Lyon"
    first.attrs["a"] = 5
    first.at.FromDatetime(at)
    prefix = struct.pack(">bI", 0, 1)
    log = open_log(tmp_path / "t-0")
    _append_values(log, [prefix + b"\x00" + first.SerializeToString(),                  # 0: indexes [0], short form
                         prefix + b"\x02\x00" + order(id=8).SerializeToString(),        # 1: indexes [0], long form
                         prefix + b"\x02\x02" + order(id=9).SerializeToString(),        # 2: indexes [1]: no such message
                         prefix + b"\x00\xff\xff",                                      # 3: bytes that are no message
                         prefix + b"\x00" + order(big=2 ** 64 - 1).SerializeToString()])  # 4: uint64 past a long
    log.flush()
    job = _job(tmp_path, log.last_stable_offset)
    job["schemas"] = schemas
    worker = Worker()
    status = worker.run(job)["topics"]["t"]
    assert status["error"] is None and status["rows_written"] == 2 and status["dlq_rows_written"] == 3, status
    sink = worker.sinks["t"]
    fields = {f.name: str(f.field_type) for f in sink.table.schema().fields}
    assert fields["id"] == "long" and fields["kind"] == "string" and fields["at"] == "timestamptz"
    assert fields["sizes"].startswith("list<int") and fields["where"].startswith("struct<")
    rows = _scan(sink.table)
    assert rows[0]["id"] == 7 and rows[0]["kind"] == "BUY" and rows[0]["where"] == {"city": "Lyon"}
    assert rows[0]["sizes"] == [1, 2] and dict(rows[0]["attrs"]) == {"a": 5} and rows[0]["at"] == at
    assert rows[0]["note"] == "n" and rows[1]["note"] is None and rows[1]["where"] is None
    assert rows[1]["kind"] == "VIEW" and rows[1]["at"] is None and rows[1]["item"] == ""
    reasons = [r["reason"] for r in _scan(sink.dlq)]
    assert "name another message" in reasons[0] and "does not decode" in reasons[1] and "does not fit" in reasons[2]
    log.close()


def test_latest_mode_decodes_protobuf_without_message_indexes(tmp_path: Path) -> None:
    schemas = _registry((5, "PROTOBUF", PROTO))
    order = _proto_classes(schemas["5"]["descriptor"])
    log = open_log(tmp_path / "t-0")
    _append_values(log, [order(id=1, item="tea").SerializeToString()])
    log.flush()
    job = _job(tmp_path, log.last_stable_offset, mode="value_schema_latest", latest_id=5)
    job["schemas"] = schemas
    worker = Worker()
    assert worker.run(job)["topics"]["t"]["rows_written"] == 1
    assert _scan(worker.sinks["t"].table)[0]["item"] == "tea"
    log.close()


def test_tombstones_are_rows_with_null_value_columns_not_dead_letters(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _append_values(log, [None])                                  # 0: a tombstone before any schema's columns
    _append_values(log, [framed(1, V1, _value(1)), None])         # 1-2
    log.flush()
    worker = Worker()
    status = worker.run(_job(tmp_path, log.last_stable_offset))["topics"]["t"]
    assert status["error"] is None and status["rows_written"] == 3 and status["dlq_rows_written"] == 0, status
    rows = _scan(worker.sinks["t"].table)
    assert [r["kafka"]["key"] for r in rows] == [b"k", b"k", b"k"]
    assert rows[0]["user"] is None and rows[1]["user"] == "u1" and rows[2]["user"] is None and rows[2]["tags"] is None
    log.close()


@pytest.mark.parametrize(("payload", "expected"), [
    (b"\x00", ([0], 1)), (b"\x02\x04", ([2], 2)), (b"\x04\x02\x06rest", ([1, 3], 3))])
def test_message_indexes_are_read_as_confluent_writes_them(payload: bytes, expected: tuple[list[int], int]) -> None:
    assert read_indexes(payload) == expected


@pytest.mark.parametrize("payload", [b"", b"\x80", b"\x01", b"\xfe\x01", b"\xff" * 12])
def test_bad_message_indexes_raise_value_error(payload: bytes) -> None:
    with pytest.raises(ValueError):
        read_indexes(payload)


def _kv_rows(values: list[bytes | None]) -> Any:
    import pyarrow as pa

    from pybroker.clients.iceberg.columns import key_value_schema

    schema = key_value_schema().as_arrow()
    kafka = pa.array([{"partition": 0, "offset": i, "timestamp": 0, "headers": [], "key": None}
                      for i in range(len(values))], schema.field("kafka").type)
    return pa.Table.from_arrays([kafka, pa.array(values, pa.binary())], schema=schema)


_FUZZ_SCHEMAS = _registry((1, "JSON", json.dumps(JSON_V2)), (2, "PROTOBUF", PROTO))


def _fuzz_valid() -> list[bytes]:
    order = _proto_classes(_FUZZ_SCHEMAS["2"]["descriptor"])(id=3, item="x", sizes=[1, 2, 3], note="n")
    order.attrs["k"] = 1
    order.where.city = "c"
    return [_json_value(1, {"id": 1, "name": "n", "tags": ["a"], "counts": {"a": 1}, "where": {"city": "c"}}),
            struct.pack(">bI", 0, 2) + b"\x00" + order.SerializeToString()]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.integers(0, 1), cut=st.integers(0, 80),
       flips=st.lists(st.tuples(st.integers(0, 80), st.integers(0, 255)), max_size=4), junk=st.binary(max_size=40))
def test_any_json_or_protobuf_bytes_decode_or_become_a_dead_row_never_a_crash(
        which: int, cut: int, flips: list[tuple[int, int]], junk: bytes) -> None:
    """The JSON Schema and Protobuf decoders' fuzz target: a valid framed value cut, with bytes changed, or junk."""
    from pybroker.clients.iceberg.decoded_rows import split
    from pybroker.clients.iceberg.value_decoders import RegistrySchemas

    value = bytearray(_fuzz_valid()[which])
    for at, byte in flips:
        if at < len(value):
            value[at] = byte
    values: list[bytes | None] = [bytes(value[:cut]), bytes(value), struct.pack(">bI", 0, 1 + which) + junk]
    schemas = RegistrySchemas()
    schemas.add(_FUZZ_SCHEMAS)
    out = split(_kv_rows(values), "value_schema_id_prefix", schemas, None, keep_dead=True)
    decoded = sum(table.num_rows for _, table, _ in out.decoded.values())
    dead = out.dead.num_rows if out.dead is not None else 0
    assert decoded + dead == len(values)
    if out.dead is not None:
        assert all(out.dead.column("reason").to_pylist())
