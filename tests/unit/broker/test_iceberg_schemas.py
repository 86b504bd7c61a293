"""The registry's schemas as the Iceberg worker's jobs carry them: each once, references by id, the latest live."""

from __future__ import annotations

from pybroker.broker.iceberg_schemas import latest_id, new_schemas
from pybroker.broker.schema_registry.records import Key, schema_key, schema_value
from pybroker.broker.schema_registry.store import RegistryState


def _register(state: RegistryState, subject: str, version: int, schema_id: int, text: str,
              references: list[dict[str, object]] | None = None, deleted: bool = False) -> None:
    state.apply(schema_key(subject, version),
                schema_value(subject, version, schema_id, "AVRO", text, references or [], deleted))


def test_schemas_go_once_with_their_references_as_ids_and_the_latest_is_the_newest_live_version() -> None:
    state = RegistryState()
    _register(state, "money", 1, 1, '{"type":"fixed","name":"M","size":8}')
    _register(state, "orders-value", 1, 2, '"string"')
    _register(state, "orders-value", 2, 3, '{"type":"record","name":"O","fields":[{"name":"m","type":"M"}]}',
              [{"name": "M", "subject": "money", "version": 1}])
    first = new_schemas(state, frozenset())
    assert sorted(first) == ["1", "2", "3"] and first["3"]["refs"] == [1] and first["2"]["type"] == "AVRO"
    assert new_schemas(state, frozenset({1, 2, 3})) == {}
    assert latest_id(state, "orders-value") == 3 and latest_id(state, "nope-value") is None
    state.apply(Key("DELETE_SUBJECT", "orders-value"), {"subject": "orders-value", "version": 2})
    assert latest_id(state, "orders-value") is None  # every version soft-deleted: no latest
