"""Validation on produce, on built batches: the records to blame, the strategies, payload checks, the rule cache."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import fastavro

from pybroker.broker.schema_registry.records import schema_key, schema_value
from pybroker.broker.schema_registry.registry import Registry
from pybroker.broker.schema_registry.store import RegistryState
from pybroker.broker.schema_registry.validation import SchemaValidation
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import parse_header
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage.topic_store import TopicInfo

SCHEMA = {"type": "record", "name": "Order", "namespace": "shop", "fields": [{"name": "id", "type": "long"}]}
STRATEGY = "io.confluent.kafka.serializers.subject."


class Logs:
    def __init__(self) -> None:
        self.table: dict[str, TopicInfo] = {}

    def topics(self) -> dict[str, TopicInfo]:
        return self.table


async def _no_writes(records: Any) -> None:
    raise AssertionError("no writes here")


def setup(configs: dict[str, str], *, payload: bool = False) -> tuple[SchemaValidation, Logs]:
    state = RegistryState()
    for subject, schema_id in (("orders-value", 7), ("shop.Order", 7), ("orders-shop.Order", 7)):
        state.apply(schema_key(subject, 1), schema_value(subject, 1, schema_id, "AVRO", json.dumps(SCHEMA), [],
                                                         False))
    logs = Logs()
    logs.table["orders"] = TopicInfo("orders", uuid.uuid4(), 1, configs)
    return SchemaValidation(Registry(state, _no_writes), logs, payload=payload), logs  # type: ignore[arg-type]


def framed(schema_id: int, value: dict[str, Any] | None = None) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMA), value or {"id": 1})
    return b"\x00" + schema_id.to_bytes(4, "big") + out.getvalue()


def check(validation: SchemaValidation, *values: bytes | None, key: bytes = b"k") -> Any:
    batch = build_batch([Record(i, 0, key, v) for i, v in enumerate(values)])
    return validation.check("orders", batch, parse_header(batch, 0))


def test_unframed_and_unregistered_records_are_named() -> None:
    validation, _ = setup({"confluent.value.schema.validation": "true"})
    assert check(validation, framed(7), None) is None
    refused = check(validation, framed(7), b"plain", framed(8), b"\x00\x00")
    assert refused.error_code == ErrorCode.INVALID_RECORD
    assert [index for index, _ in refused.record_errors] == [1, 2, 3]
    assert "magic byte" in refused.record_errors[0][1] and "not registered" in refused.record_errors[1][1]


def test_strategies_and_keys() -> None:
    record_name, _ = setup({"confluent.value.schema.validation": "true",
                            "confluent.value.subject.name.strategy": STRATEGY + "RecordNameStrategy"})
    assert check(record_name, framed(7)) is None
    keys, _ = setup({"confluent.key.schema.validation": "true"})  # orders-key has no schema registered
    assert "magic byte" in check(keys, framed(7)).record_errors[0][1]
    refused = check(keys, framed(7), key=framed(7))
    assert refused is not None and "orders-key" in refused.record_errors[0][1]


def test_payload_check_and_rule_cache() -> None:
    validation, logs = setup({"confluent.value.schema.validation": "true"}, payload=True)
    assert check(validation, framed(7)) is None
    assert check(validation, framed(7) + b"trailing") is not None
    logs.table["orders"].configs = {}  # the log manager replaces the dict when configs change
    assert check(validation, b"anything") is None


def test_a_compressed_batch_is_checked_and_a_bomb_refused_clearly() -> None:
    from pybroker.broker.schema_registry import validation as module
    from pybroker.protocol.records.codecs import GZIP
    checked, _ = setup({"confluent.value.schema.validation": "true"})
    batch = build_batch([Record(0, 0, b"k", framed(7)), Record(1, 0, b"k", b"plain")], compression=GZIP)
    refused = checked.check("orders", batch, parse_header(batch, 0))
    assert refused is not None and [i for i, _ in refused.record_errors] == [1]
    bomb = build_batch([Record(0, 0, None, bytes(module.MAX_CHECKED_BYTES + 1))], compression=GZIP)
    refused = checked.check("orders", bomb, parse_header(bomb, 0))
    assert refused is not None and refused.error_code == ErrorCode.INVALID_RECORD and "at most" in refused.message
