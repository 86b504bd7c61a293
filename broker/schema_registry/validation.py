"""Schema validation on produce: a topic with `confluent.key.schema.validation` or
`confluent.value.schema.validation` on refuses, with INVALID_RECORD and a `record_errors` entry per record,
every record whose key (or value) is not Confluent's framing (magic byte 0, then a 4-byte schema id) of an
id registered under the subject the topic's `confluent.<key|value>.subject.name.strategy` names:
TopicNameStrategy `<topic>-key`/`<topic>-value`, RecordNameStrategy the schema's record name (Avro's full
name, a JSON Schema's `title`, Protobuf's first message), TopicRecordNameStrategy `<topic>-<record name>`.
A null key or value (a tombstone) passes. With `schema.registry.validate.payload` the rest of the bytes must
also decode with that schema (its cost per record is measured by `bench/schema_validation.py`).

The check runs only when the broker serves a registry (`ReplicaManager.schema_validation` is None
otherwise, so an append pays one attribute test); a topic whose keys are off pays a dict lookup of its
cached rule. Records of a compressed batch are decompressed for it, on the event loop, at most
`MAX_CHECKED_BYTES` of them (a larger batch on a validated topic is refused with INVALID_RECORD, saying so).

Threads: the event loop (called from `leader_append.append_records`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pybroker.broker.schema_registry.errors import RegistryError
from pybroker.broker.schema_registry.formats import Parsed
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import BatchHeader, RecordsError, iter_batches
from pybroker.protocol.records.record import decode_records

if TYPE_CHECKING:
    from pybroker.broker.schema_registry.registry import Registry
    from pybroker.storage.log_manager import LogManager

STRATEGY_PREFIX = "io.confluent.kafka.serializers.subject."
#: record_errors entries named per refused batch at most (the first ones)
MAX_RECORD_ERRORS = 100
#: a compressed batch is inflated on the event loop for the check: at most this much of it
MAX_CHECKED_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Rule:
    key_strategy: str | None  # None: keys are not checked
    value_strategy: str | None


def _on(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def rule_of(configs: dict[str, str]) -> Rule | None:
    key = configs.get("confluent.key.subject.name.strategy", "TopicNameStrategy").removeprefix(STRATEGY_PREFIX)
    value = configs.get("confluent.value.subject.name.strategy", "TopicNameStrategy").removeprefix(STRATEGY_PREFIX)
    rule = Rule(key if _on(configs.get("confluent.key.schema.validation")) else None,
                value if _on(configs.get("confluent.value.schema.validation")) else None)
    return rule if rule.key_strategy or rule.value_strategy else None


def record_name(parsed: Parsed) -> str | None:
    """The record name RecordNameStrategy names a subject after."""
    model: Any = parsed.model
    if parsed.schema_type == "AVRO":
        expanded = model["expanded"]
        return expanded.get("name") if isinstance(expanded, dict) else None
    if parsed.schema_type == "JSON":
        return model.get("title") if isinstance(model, dict) else None
    return next(iter(model.messages), None)


class SchemaValidation:
    def __init__(self, registry: Registry, logs: LogManager, *, payload: bool) -> None:
        self.registry = registry
        self.logs = logs
        self.payload = payload
        #: topic -> (the configs dict the rule came from, the rule); the log manager replaces a topic's
        #: configs dict when they change, so its identity says whether the rule is current
        self._rules: dict[str, tuple[dict[str, str], Rule | None]] = {}

    def rule_for(self, topic: str) -> Rule | None:
        info = self.logs.topics().get(topic)
        if info is None:
            return None
        cached = self._rules.get(topic)
        if cached is not None and cached[0] is info.configs:
            return cached[1]
        rule = rule_of(info.configs)
        self._rules[topic] = (info.configs, rule)
        return rule

    def check(self, topic: str, records: Any, header: BatchHeader) -> RecordsError | None:
        """Why the records are refused (INVALID_RECORD with the records to blame), or None."""
        rule = self.rule_for(topic)
        if rule is None:
            return None
        errors: list[tuple[int, str]] = []
        for pos, batch in iter_batches(records):
            try:
                decoded = decode_records(records, pos, batch, MAX_CHECKED_BYTES)
            except RecordsError as exc:
                return RecordsError(ErrorCode.INVALID_RECORD, f"schema validation could not read the batch "
                                    f"(at most {MAX_CHECKED_BYTES >> 20} MiB of records are checked): {exc.message}")
            for index, record in enumerate(decoded):
                for part, strategy, payload in (("key", rule.key_strategy, record.key),
                                                ("value", rule.value_strategy, record.value)):
                    if strategy is None or payload is None:
                        continue
                    reason = self._reason(topic, part, strategy, payload)
                    if reason is not None:
                        errors.append((index, f"the record's {part} {reason}"))
                        break
            if len(errors) >= MAX_RECORD_ERRORS:
                break
        if not errors:
            return None
        return RecordsError(ErrorCode.INVALID_RECORD, f"schema validation failed: {errors[0][1]}",
                            tuple(errors[:MAX_RECORD_ERRORS]))

    def _reason(self, topic: str, part: str, strategy: str, payload: bytes) -> str | None:
        if len(payload) < 5 or payload[0] != 0:
            return "lacks the magic byte and schema id of a registered schema"
        schema_id = int.from_bytes(payload[1:5], "big")
        state = self.registry.state
        holder = state.by_id.get(schema_id)
        if holder is None:
            return f"names schema id {schema_id}, which is not registered"
        parsed: Parsed | None = None
        if strategy == "TopicNameStrategy":
            subject = f"{topic}-{part}"
        else:
            try:
                parsed = self.registry.parsed_version(holder)
            except RegistryError:
                return f"names schema id {schema_id}, which does not parse"
            name = record_name(parsed)
            if name is None:
                return f"names schema id {schema_id}, whose schema has no record name for {strategy}"
            subject = name if strategy == "RecordNameStrategy" else f"{topic}-{name}"
        if not any(v.schema_id == schema_id for v in state.live(subject)):
            return f"names schema id {schema_id}, which is not registered under subject {subject}"
        if self.payload:
            if parsed is None:
                try:
                    parsed = self.registry.parsed_version(holder)
                except RegistryError:
                    return f"names schema id {schema_id}, which does not parse"
            problem = self.registry.format_of(parsed.schema_type).validate(parsed, bytes(payload[5:]))
            if problem is not None:
                return problem
        return None
