"""The `_schemas` records in Confluent's format, and the state they rebuild (as written by pybroker, or by a
Confluent registry: DELETE_SUBJECT, CLEAR_SUBJECT, NOOP, unknown key types)."""

from __future__ import annotations

import json

from pybroker.broker.schema_registry.records import Key, decode, encode_value, schema_key, schema_value
from pybroker.broker.schema_registry.store import RegistryState


def test_keys_are_confluents_json_in_its_field_order() -> None:
    assert schema_key("t-value", 3).encode() == b'{"keytype":"SCHEMA","subject":"t-value","version":3,"magic":1}'
    assert Key("CONFIG", None).encode() == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert Key("MODE", "s").encode() == b'{"keytype":"MODE","subject":"s","magic":0}'
    assert Key("NOOP").encode() == b'{"keytype":"NOOP","magic":0}'
    value = schema_value("s", 1, 5, "JSON", "{}", [], False)
    assert value == {"subject": "s", "version": 1, "id": 5, "schemaType": "JSON", "schema": "{}", "deleted": False}
    assert "schemaType" not in schema_value("s", 1, 5, "AVRO", '"int"', [], False)


def replay(*records: tuple[bytes, bytes | None]) -> RegistryState:
    state = RegistryState()
    for key, value in records:
        decoded = decode(key, value)
        if decoded is not None:
            state.apply(*decoded)
    return state


def schema(subject: str, version: int, schema_id: int, deleted: bool = False) -> tuple[bytes, bytes | None]:
    return (schema_key(subject, version).encode(),
            encode_value(schema_value(subject, version, schema_id, "AVRO", '"string"', [], deleted)))


def test_replay_of_a_confluent_written_log() -> None:
    state = replay(
        schema("a-value", 1, 1), schema("a-value", 2, 2), schema("b-value", 1, 1),
        (b'{"keytype":"CONFIG","subject":null,"magic":0}', b'{"compatibilityLevel":"FULL"}'),
        (b'{"keytype":"MODE","subject":"b-value","magic":0}', b'{"mode":"READONLY"}'),
        (b'{"keytype":"NOOP","magic":0}', None),
        (b'{"keytype":"SOMETHING_NEW","magic":0}', b"{}"),
        (b"not json", b"{"),
        (b'{"keytype":"DELETE_SUBJECT","subject":"a-value","magic":0}', b'{"subject":"a-value","version":2}'),
    )
    assert [v.version for v in state.live("a-value")] == []
    assert [v.version for v in state.live("a-value", deleted=True)] == [1, 2]
    assert state.level(None) == "FULL" and state.level("a-value") == "FULL"
    assert state.mode("b-value") == "READONLY" and state.mode("a-value") == "READWRITE"
    assert state.max_id == 2
    state.apply(*decode(b'{"keytype":"CLEAR_SUBJECT","subject":"a-value","magic":0}', b'{"subject":"a-value"}'))
    assert "a-value" not in state.subjects
    assert 2 not in state.by_id and 1 in state.by_id  # id 1 is still held by b-value
    state.apply(*decode(schema_key("b-value", 1).encode(), None))  # a hard delete's tombstone
    assert state.by_id == {} and state.subjects == {}
    assert json.loads(Key("CONFIG", None).encode())["subject"] is None
