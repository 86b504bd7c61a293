"""Avro schemas as table columns, and the value decoder's fuzz target: any bytes decode or are a dead row."""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
fastavro = pytest.importorskip("fastavro")

from pybroker.clients.iceberg.decoded_rows import split  # noqa: E402
from pybroker.clients.iceberg.value_decoders import NotDecodable, RegistrySchemas  # noqa: E402

NESTED = {"type": "record", "name": "R", "fields": [
    {"name": "a", "type": ["null", "long"]},
    {"name": "f", "type": {"type": "fixed", "name": "F", "size": 4}},
    {"name": "m", "type": {"type": "map", "values": {"type": "array", "items": "double"}}},
    {"name": "inner", "type": {"type": "record", "name": "I", "fields": [{"name": "x", "type": "float"}]}},
    {"name": "again", "type": "I"},
    {"name": "t", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "lt", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
]}


def _schemas(**by_id: Any) -> RegistrySchemas:
    schemas = RegistrySchemas()
    schemas.add({key.removeprefix("id"): {"type": "AVRO", "schema": json.dumps(value), "refs": []}
                 for key, value in by_id.items()})
    return schemas


def test_avro_types_map_to_arrow_columns_every_one_nullable() -> None:
    fields = _schemas(id1=NESTED).decoder(1).arrow_fields
    assert fields.field("a").type == pa.int64() and fields.field("f").type == pa.binary(4)
    assert fields.field("m").type == pa.map_(pa.string(), pa.list_(pa.float64()))
    assert fields.field("inner").type == fields.field("again").type == pa.struct([pa.field("x", pa.float32())])
    assert fields.field("t").type == pa.time64("us") and fields.field("lt").type == pa.timestamp("us")
    assert all(f.nullable for f in fields)
    assert _schemas(id2="string").decoder(2).arrow_fields.names == ["value"]  # not a record: one column


@pytest.mark.parametrize(("schema", "why"), [
    (["null", "int", "long"], "same kind of value"),
    ({"type": "record", "name": "U", "fields": [{"name": "u", "type": [
        {"type": "map", "values": "int"}, {"type": "record", "name": "R", "fields": [{"name": "r", "type": "int"}]}]}]},
     "same kind of value"),
    ({"type": "record", "name": "L", "fields": [{"name": "next", "type": ["null", "L"]}]}, "recursive"),
    ({"type": "record", "name": "K", "fields": [{"name": "kafka", "type": "int"}]}, "collides"),
    ({"type": "array", "items": {"type": "record", "name": "E", "fields": [{"name": "n", "type": "null"}]}},
     "no bytes"),
])
def test_a_schema_without_table_columns_is_not_decodable_with_the_reason(schema: Any, why: str) -> None:
    with pytest.raises(NotDecodable, match=why):
        _schemas(id5=schema).decoder(5)


UNIONS = {"type": "record", "name": "Event", "namespace": "shop", "fields": [
    {"name": "id", "type": ["null", "string", "long"]},
    {"name": "who", "type": [
        {"type": "record", "name": "Person", "fields": [{"name": "name", "type": "string"}]},
        {"type": "record", "name": "Robot", "fields": [{"name": "serial", "type": "long"}]}, "string"]},
    {"name": "items", "type": {"type": "array", "items": ["int", "string"]}}]}


def test_a_union_of_several_non_null_types_is_a_struct_with_a_member_per_branch() -> None:
    found = _schemas(id9=UNIONS).decoder(9)
    person = pa.struct([pa.field("name", pa.string())])
    robot = pa.struct([pa.field("serial", pa.int64())])
    assert found.arrow_fields.field("id").type == pa.struct([pa.field("member0", pa.string()),
                                                             pa.field("member1", pa.int64())])
    assert found.arrow_fields.field("who").type == pa.struct([pa.field("member0", person),
                                                              pa.field("member1", robot),
                                                              pa.field("member2", pa.string())])
    parsed = fastavro.parse_schema(UNIONS)
    rows = []
    for value in [{"id": "a", "who": ("shop.Person", {"name": "Ann"}), "items": [1, "x"]},
                  {"id": 7, "who": ("shop.Robot", {"serial": 9}), "items": []},
                  {"id": None, "who": "nobody", "items": ["y"]}]:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, value)
        rows.append(found.decode(out.getvalue()))
    assert rows[0]["id"] == {"member0": "a", "member1": None}
    assert rows[0]["who"] == {"member0": {"name": "Ann"}, "member1": None, "member2": None}
    assert rows[0]["items"] == [{"member0": 1, "member1": None}, {"member0": None, "member1": "x"}]
    assert rows[1]["id"] == {"member0": None, "member1": 7} and rows[1]["who"]["member1"] == {"serial": 9}
    assert rows[2]["id"] is None and rows[2]["who"] == {"member0": None, "member1": None, "member2": "nobody"}
    assert pa.array(rows, pa.struct(list(found.arrow_fields))).to_pylist() == rows


def test_a_schema_that_does_not_parse_is_that_schemas_reason_only() -> None:
    schemas = RegistrySchemas()
    schemas.add({"7": {"type": "AVRO", "schema": "{not json", "refs": []}})
    with pytest.raises(NotDecodable, match="does not parse"):
        schemas.decoder(7)


def test_references_name_types_of_other_schemas() -> None:
    schemas = RegistrySchemas()
    schemas.add({"1": {"type": "AVRO", "refs": [], "schema": json.dumps(
                    {"type": "record", "name": "shop.Money", "fields": [{"name": "cents", "type": "long"}]})},
                 "2": {"type": "AVRO", "refs": [1], "schema": json.dumps(
                    {"type": "record", "name": "shop.Order", "fields": [{"name": "total", "type": "shop.Money"}]})}})
    assert schemas.decoder(2).arrow_fields.field("total").type == pa.struct([pa.field("cents", pa.int64())])


def _valid_payload() -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(NESTED), {
        "a": 5, "f": b"abcd", "m": {"k": [1.5]}, "inner": {"x": 1.0}, "again": {"x": 2.0}, "t": 1000, "lt": 7})
    return out.getvalue()


def _rows(values: list[bytes | None]) -> Any:
    from pybroker.clients.iceberg.columns import key_value_schema

    schema = key_value_schema().as_arrow()
    kafka_type = schema.field("kafka").type
    kafka = pa.array([{"partition": 0, "offset": i, "timestamp": 0, "headers": [], "key": None}
                      for i in range(len(values))], kafka_type)
    return pa.Table.from_arrays([kafka, pa.array(values, pa.binary())], schema=schema)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.integers(0, 80), flips=st.lists(st.tuples(st.integers(0, 80), st.integers(0, 255)), max_size=4),
       junk=st.binary(max_size=40))
def test_any_bytes_decode_or_become_a_dead_row_never_a_crash(cut: int, flips: list[tuple[int, int]],
                                                             junk: bytes) -> None:
    """The decoder's fuzz target: a valid framed value cut, with bytes changed, or anything at all."""
    value = bytearray(struct.pack(">bI", 0, 1) + _valid_payload())
    for at, byte in flips:
        if at < len(value):
            value[at] = byte
    values: list[bytes | None] = [bytes(value[:cut]), bytes(value), junk, b"\x00\x00\x00\x00\x01" + junk]
    out = split(_rows(values), "value_schema_id_prefix", _schemas(id1=NESTED), None, keep_dead=True)
    decoded = sum(table.num_rows for _, table, _ in out.decoded.values())
    dead = out.dead.num_rows if out.dead is not None else 0
    assert decoded + dead == len(values)
    if out.dead is not None:
        assert all(out.dead.column("reason").to_pylist())
