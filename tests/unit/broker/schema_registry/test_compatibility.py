"""The compatibility rules per format, on the cases Confluent documents (reader = the schema that reads,
writer = the schema the data was written with; BACKWARD checks new-reads-old, FORWARD old-reads-new)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pybroker.broker.schema_registry.errors import RegistryError
from pybroker.broker.schema_registry.formats import Parsed, formats
from pybroker.broker.schema_registry.registry import Registry
from pybroker.broker.schema_registry.store import RegistryState, Version


def parse(kind: str, schema: Any, references: dict[str, Parsed] | None = None) -> Parsed:
    text = schema if kind == "PROTOBUF" else json.dumps(schema)
    return formats()[kind].parse(text, references or {})


def reads(kind: str, reader: Any, writer: Any) -> bool:
    return not formats()[kind].compatible(parse(kind, reader), parse(kind, writer))


def record(*fields: dict[str, Any], name: str = "R") -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "n", "fields": list(fields)}


# -- Avro -----------------------------------------------------------------------------------------------

def test_avro_added_field_needs_a_default_to_read_old_data() -> None:
    old = record({"name": "a", "type": "int"})
    with_default = record({"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": ""})
    without = record({"name": "a", "type": "int"}, {"name": "b", "type": "string"})
    assert reads("AVRO", with_default, old)
    assert not reads("AVRO", without, old)
    assert reads("AVRO", old, without)  # a removed field is ignored by the reader


@pytest.mark.parametrize(("writer", "reader", "ok"), [
    ("int", "long", True), ("int", "double", True), ("long", "float", True), ("float", "double", True),
    ("string", "bytes", True), ("bytes", "string", True),
    ("long", "int", False), ("double", "float", False), ("string", "int", False), ("boolean", "int", False),
])
def test_avro_promotions(writer: str, reader: str, ok: bool) -> None:
    assert reads("AVRO", record({"name": "a", "type": reader}), record({"name": "a", "type": writer})) is ok


def test_avro_unions_enums_fixed_aliases() -> None:
    assert reads("AVRO", ["null", "string"], "string")
    assert not reads("AVRO", "string", ["null", "string"])  # the writer may write null
    assert reads("AVRO", ["null", "long"], ["null", "int"])
    enum = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    assert reads("AVRO", {**enum, "symbols": ["A", "B", "C"]}, enum)
    assert not reads("AVRO", {**enum, "symbols": ["A"]}, enum)
    assert reads("AVRO", {**enum, "symbols": ["A"], "default": "A"}, enum)
    fixed = {"type": "fixed", "name": "F", "size": 4}
    assert not reads("AVRO", {**fixed, "size": 8}, fixed)
    renamed = {**record({"name": "a", "type": "int"}, name="S"), "aliases": ["R"]}
    assert reads("AVRO", renamed, record({"name": "a", "type": "int"}))
    assert not reads("AVRO", record({"name": "a", "type": "int"}, name="S"), record({"name": "a", "type": "int"}))
    field_alias = record({"name": "b", "type": "int", "aliases": ["a"]})
    assert reads("AVRO", field_alias, record({"name": "a", "type": "int"}))


def test_avro_recursive_types_and_references() -> None:
    tree = {"type": "record", "name": "Node", "fields": [
        {"name": "children", "type": {"type": "array", "items": "Node"}}]}
    assert reads("AVRO", tree, tree)
    referenced = parse("AVRO", record({"name": "x", "type": "int"}, name="Point"))
    user = formats()["AVRO"].parse(json.dumps(record({"name": "p", "type": "n.Point"}, name="Shape")),
                                   {"point": referenced})
    assert not formats()["AVRO"].compatible(user, user)


def test_avro_invalid_and_normalized() -> None:
    with pytest.raises(RegistryError) as bad:
        parse("AVRO", {"type": "record", "name": "R", "fields": [{"name": "a", "type": "nope"}]})
    assert bad.value.code == 42201
    loose = parse("AVRO", {"type": "record", "name": "R", "namespace": "n",
                           "fields": [{"name": "a", "type": {"type": "int"}}]})
    assert formats()["AVRO"].normalize(loose) == '{"type":"record","name":"n.R","fields":[{"name":"a","type":"int"}]}'


@given(st.sampled_from(["null", "boolean", "int", "long", "float", "double", "bytes", "string"]))
def test_avro_every_schema_reads_itself(kind: str) -> None:
    schema = record({"name": "a", "type": kind}, {"name": "b", "type": {"type": "array", "items": kind}},
                    {"name": "c", "type": {"type": "map", "values": kind}})
    assert reads("AVRO", schema, schema)


def test_avro_payload_validation() -> None:
    import io

    import fastavro
    schema = parse("AVRO", record({"name": "a", "type": "int"}))
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(schema.text)), {"a": 7})
    assert formats()["AVRO"].validate(schema, out.getvalue()) is None
    assert formats()["AVRO"].validate(schema, out.getvalue() + b"x") is not None
    assert formats()["AVRO"].validate(schema, b"") is not None


# -- JSON Schema ----------------------------------------------------------------------------------------

def obj(properties: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, **more}


def test_json_content_models() -> None:
    closed = obj({"a": {"type": "string"}}, additionalProperties=False)
    open_ = obj({"a": {"type": "string"}})
    # adding an optional property to a closed model: old data cannot hold it; to an open one it might
    assert reads("JSON", obj({"a": {"type": "string"}, "b": {"type": "integer"}}), closed)
    assert not reads("JSON", obj({"a": {"type": "string"}, "b": {"type": "integer"}}), open_)
    # required without default added to a closed model: old data lacks it
    assert not reads("JSON", obj({"a": {"type": "string"}, "b": {"type": "integer"}}, required=["b"]), closed)
    # removing a property: fine for an open reader, not for a closed one
    assert reads("JSON", obj({}), obj({"a": {"type": "string"}}))
    assert not reads("JSON", obj({}, additionalProperties=False), obj({"a": {"type": "string"}}))
    assert not reads("JSON", closed, open_)  # additionalProperties removed


def test_json_types_and_bounds() -> None:
    assert reads("JSON", {"type": "number"}, {"type": "integer"})
    assert not reads("JSON", {"type": "integer"}, {"type": "number"})
    assert not reads("JSON", {"type": "string"}, {"type": ["string", "null"]})
    assert not reads("JSON", {"type": "string", "maxLength": 5}, {"type": "string"})
    assert reads("JSON", {"type": "string", "maxLength": 9}, {"type": "string", "maxLength": 5})
    assert not reads("JSON", {"type": "integer", "minimum": 3}, {"type": "integer", "minimum": 1})
    assert reads("JSON", {"enum": ["a", "b", "c"]}, {"enum": ["a", "b"]})
    assert not reads("JSON", {"enum": ["a"]}, {"enum": ["a", "b"]})
    assert not reads("JSON", obj({"a": {"type": "string"}}, required=["a"]), obj({"a": {"type": "string"}}))
    assert reads("JSON", {"type": "array", "items": {"type": "number"}}, {"type": "array", "items": {"type": "integer"}})
    assert reads("JSON", {"anyOf": [{"type": "string"}, {"type": "integer"}]}, {"type": "string"})
    assert not reads("JSON", {"anyOf": [{"type": "string"}]}, {"anyOf": [{"type": "string"}, {"type": "integer"}]})


def test_json_refs_invalid_and_payload() -> None:
    with_ref = {"definitions": {"p": {"type": "integer"}}, "type": "object", "properties": {"x": {"$ref": "#/definitions/p"}}}
    assert not reads("JSON", {**with_ref, "definitions": {"p": {"type": "string"}}}, with_ref)
    with pytest.raises(RegistryError) as bad:
        parse("JSON", {"type": "nonsense"})
    assert bad.value.code == 42201
    schema = parse("JSON", obj({"x": {"type": "number"}}, required=["x"]))
    assert formats()["JSON"].validate(schema, b'{"x": 1}') is None
    assert formats()["JSON"].validate(schema, b'{"y": 1}') is not None
    assert formats()["JSON"].validate(schema, b"not json") is not None


# -- Protobuf -------------------------------------------------------------------------------------------

PROTO = """syntax = "proto3";
package acme;
message Reading {
  string sensor = 1;
  double celsius = 2;
  oneof where { string room = 3; int32 floor = 4; }
  Unit unit = 5;
}
enum Unit { C = 0; F = 1; }
"""


def test_protobuf_rules() -> None:
    assert reads("PROTOBUF", PROTO, PROTO)
    assert reads("PROTOBUF", PROTO.replace("  Unit unit = 5;\n", ""), PROTO)  # a removed field
    assert reads("PROTOBUF", PROTO.replace("Unit unit = 5;", "Unit unit = 5; int64 at = 6;"), PROTO)
    assert not reads("PROTOBUF", PROTO.replace("double celsius", "string celsius"), PROTO)
    assert reads("PROTOBUF", PROTO.replace("int32 floor", "int64 floor"), PROTO)  # one wire group
    assert not reads("PROTOBUF", PROTO.replace("Unit unit", "Reading unit"), PROTO)  # enum -> message
    assert not reads("PROTOBUF", PROTO.replace("package acme", "package other"), PROTO)
    assert not reads("PROTOBUF", PROTO.replace("message Reading", "message Renamed"), PROTO)
    assert not reads("PROTOBUF", PROTO.replace("oneof where { string room = 3; int32 floor = 4; }",
                                               "string room = 3; int32 floor = 4;"), PROTO)


def test_protobuf_descriptor_form_matches_text_form() -> None:
    from google.protobuf import descriptor_pb2
    file = descriptor_pb2.FileDescriptorProto(name="r.proto", package="acme", syntax="proto3")
    message = file.message_type.add(name="Reading")
    message.field.add(name="sensor", number=1, type=9, label=1)
    message.field.add(name="celsius", number=2, type=1, label=1)
    encoded = base64.b64encode(file.SerializeToString()).decode()
    text = 'syntax = "proto3"; package acme; message Reading { string sensor = 1; double celsius = 2; }'
    assert reads("PROTOBUF", encoded, text) and reads("PROTOBUF", text, encoded)
    assert not reads("PROTOBUF", encoded, text.replace("double", "string"))
    with pytest.raises(RegistryError):
        parse("PROTOBUF", "message {")


# -- levels ---------------------------------------------------------------------------------------------

def _versions(*schemas: dict[str, Any]) -> list[Version]:
    return [Version("s", i + 1, i + 1, "AVRO", json.dumps(s), []) for i, s in enumerate(schemas)]


@pytest.mark.parametrize(("level", "ok"), [
    ("NONE", True), ("BACKWARD", True), ("BACKWARD_TRANSITIVE", False), ("FORWARD", True),
    ("FORWARD_TRANSITIVE", True), ("FULL", True), ("FULL_TRANSITIVE", False),
])
def test_the_seven_levels(level: str, ok: bool) -> None:
    v1 = record({"name": "a", "type": "int"})
    v2 = record({"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0})
    new = record({"name": "a", "type": "int"}, {"name": "b", "type": "int"})
    # new reads v2 (b is there) but not v1 (b missing, no default: only the transitive levels look);
    # v2 reads new and v1 reads new (it ignores b): forward holds at every depth
    registry = Registry(RegistryState(), _no_writes)
    assert (not registry.incompatibilities("s", parse("AVRO", new), _versions(v1, v2), level)) is ok


async def _no_writes(records: Any) -> None:
    raise AssertionError("no writes here")


def test_protobuf_text_serialized_as_a_descriptor_protobuf_loads() -> None:
    from google.protobuf import descriptor_pool, message_factory

    from pybroker.broker.schema_registry.protobuf_descriptor import descriptor_of, serialized
    text = """syntax = "proto3";
    package acme;
    message Reading {
      string sensor = 1;
      optional double celsius = 2;
      oneof where { string room = 3; int32 floor = 4; }
      Unit unit = 5;
      map<string, Tag> tags = 6;
      message Tag { repeated bytes raw = 1; }
      Tag first = 7;
    }
    enum Unit { C = 0; F = 1; }
    """
    parsed = parse("PROTOBUF", text)
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(descriptor_of(parsed))
    reading = message_factory.GetMessageClass(pool.FindMessageTypeByName("acme.Reading"))
    value = reading(sensor="s", celsius=1.5, floor=3, unit=1, first={"raw": [b"x"]})
    value.tags["k"].raw.append(b"y")
    again = reading.FromString(value.SerializeToString())
    assert again.floor == 3 and again.WhichOneof("where") == "floor" and again.tags["k"].raw == [b"y"]
    assert again.HasField("celsius")
    # the descriptor form reads as the same model, so the rules see no difference
    as_descriptor = parse("PROTOBUF", serialized(parsed))
    assert not formats()["PROTOBUF"].compatible(as_descriptor, parsed)
    assert not formats()["PROTOBUF"].compatible(parsed, as_descriptor)


PRIMITIVE_DEFAULTS = {"null": None, "boolean": False, "int": 0, "long": 0, "float": 0.0, "double": 0.0,
                      "bytes": "", "string": ""}
field_types = st.sampled_from(sorted(PRIMITIVE_DEFAULTS))


@given(st.lists(field_types, min_size=1, max_size=6), field_types)
def test_avro_adding_a_defaulted_field_is_full_and_dropping_one_forward(kinds: list[str], added: str) -> None:
    """Confluent's documented evolution: a field added with a default keeps FULL compatibility; a field
    added without one breaks BACKWARD only; removing a field keeps BACKWARD and breaks FORWARD unless the
    old schema gave it a default."""
    old = record(*({"name": f"f{i}", "type": kind} for i, kind in enumerate(kinds)))
    with_default = record(*old["fields"], {"name": "new", "type": added, "default": PRIMITIVE_DEFAULTS[added]})
    without = record(*old["fields"], {"name": "new", "type": added})
    assert reads("AVRO", with_default, old) and reads("AVRO", old, with_default)
    assert not reads("AVRO", without, old) and reads("AVRO", old, without)
    if len(kinds) > 1:
        dropped = record(*old["fields"][1:])
        assert reads("AVRO", dropped, old) and not reads("AVRO", old, dropped)
