"""A streams group's own settings (Kafka's group configs of streams groups): IncrementalAlterConfigs and
DescribeConfigs on resource type GROUP, for the keys below; the share groups' keys are
`pybroker.broker.share.group_configs`, and the handlers route each key to its store.

| key | a group's value must be | when not set |
| --- | --- | --- |
| `streams.session.timeout.ms` | in `group.streams.min.session.timeout.ms` .. `group.streams.max.session.timeout.ms` | `group.streams.session.timeout.ms` |
| `streams.heartbeat.interval.ms` | in `group.streams.min.heartbeat.interval.ms` .. `group.streams.max.heartbeat.interval.ms`, below the session timeout | `group.streams.heartbeat.interval.ms` |
| `streams.num.standby.replicas` | 0 .. `group.streams.max.standby.replicas` | `group.streams.num.standby.replicas` |
| `streams.initial.rebalance.delay.ms` | 0 or more | `group.streams.initial.rebalance.delay.ms` |
| `streams.rack.aware.assignment.tags` | a comma-separated list without duplicates | `group.streams.rack.aware.assignment.tags` |

A change is checked as Kafka 4.4 checks it (`GroupConfig.validate`): the group's overrides after the change
are parsed (an integer, at least the key's least value), then each is checked against the broker's bounds,
then the session timeout against the heartbeat interval (each the group's, else the broker's), with
Kafka's messages; a refusal is INVALID_CONFIG and changes nothing. A value that the broker's bounds later
exclude is capped to them where it is used, as Kafka caps it. Kafka's other `streams.*` group keys (the
assignor's interval, name and offload, warm-up replicas, recovery lag, the task-offset interval) are refused
INVALID_CONFIG: this broker does not serve them (docs/skipped-features.md). The rack-aware tags only make a v1
member lacking one told MISSING_CLIENT_TAGS; standbys are not placed by them, as Kafka 4.4's assignor does not.

The overrides live in one JSON file in the first log dir (`pybroker-streams-group-configs.json`), replaced
whole and fsynced before the change is answered. Every alter authorizes nothing itself: the handler has
checked ALTER_CONFIGS on the group (DESCRIBE_CONFIGS to describe) before it calls here.

Threads: the event loop (the handlers and the coordinator); the file write is small and synchronous, as the
other JSON stores' writes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from pybroker.broker.groups.config import GroupConfig
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.protocol.errors import ErrorCode
from pybroker.storage.files import atomic_write

log = get_logger("pybroker.groups")

FILE_NAME = "pybroker-streams-group-configs.json"
FORMAT_VERSION = 1
SET, DELETE = 0, 1
MAX_GROUP_ID_CHARS = 2048
#: the prefix of every streams group key: the handlers send these here
PREFIX = "streams."


@dataclass(frozen=True, slots=True)
class Key:
    """One key: the `GroupConfig` field of the broker's value, the least value it parses to, and the
    `GroupConfig` fields of its bounds (None: no bound); `tags`: a list of client tag keys, not a number."""

    broker: str
    least: int
    low: str | None
    high: str | None
    tags: bool = False


#: Kafka 4.4's order of the range checks
KEYS: dict[str, Key] = {
    "streams.heartbeat.interval.ms": Key("streams_heartbeat_interval_ms", 1, "streams_min_heartbeat_interval_ms",
                                         "streams_max_heartbeat_interval_ms"),
    "streams.session.timeout.ms": Key("streams_session_timeout_ms", 1, "streams_min_session_timeout_ms",
                                      "streams_max_session_timeout_ms"),
    "streams.num.standby.replicas": Key("streams_num_standby_replicas", 0, None, "streams_max_standby_replicas"),
    "streams.initial.rebalance.delay.ms": Key("streams_initial_rebalance_delay_ms", 0, None, None),
    "streams.rack.aware.assignment.tags": Key("streams_rack_aware_assignment_tags", 0, None, None, tags=True),
}
TAGS = "streams.rack.aware.assignment.tags"
#: the longest tag list a group may keep (characters)
MAX_TAGS_CHARS = 4096
#: the order Kafka 4.4's DescribeConfigs lists them in (recorded: tests/conformance/streams_errors.py)
DESCRIBED = ("streams.initial.rebalance.delay.ms", "streams.heartbeat.interval.ms", "streams.session.timeout.ms",
             "streams.num.standby.replicas", TAGS)
#: DescribeConfigs' config type of each key (Kafka's INT, LIST)
CONFIG_TYPES = {key: 7 if spec.tags else 3 for key, spec in KEYS.items()}
SESSION, HEARTBEAT = "streams.session.timeout.ms", "streams.heartbeat.interval.ms"


class Invalid(Exception):
    pass


def split_tags(text: str) -> tuple[str, ...]:
    """A LIST config's items, as Kafka splits them (commas, spaces around them dropped; empty: none)."""
    text = text.strip()
    return tuple(re.split(r"\s*,\s*", text)) if text else ()


def _parse_tags(text: str | None) -> tuple[str, ...]:
    if text is None or len(text) > MAX_TAGS_CHARS:
        raise Invalid(f"Invalid value {(text or '')[:64]} for configuration {TAGS}: at most {MAX_TAGS_CHARS} "
                      "characters")
    tags = split_tags(text)
    if len(set(tags)) != len(tags):
        raise Invalid(f"Invalid value {text} for configuration {TAGS}: Configuration '{TAGS}' values must not be "
                      "duplicated.")
    return tags


def _parse(key: str, text: str | None) -> int:
    if KEYS[key].tags:
        _parse_tags(text)
        return 0
    try:
        value = int((text or "").strip())
    except ValueError:
        raise Invalid(f"Invalid value {text} for configuration {key}: Not a number of type INT") from None
    if not -2**31 <= value < 2**31:
        raise Invalid(f"Invalid value {text} for configuration {key}: Not a number of type INT")
    if value < KEYS[key].least:
        raise Invalid(f"Invalid value {value} for configuration {key}: Value must be at least {KEYS[key].least}")
    return value


def validate(overrides: dict[str, str], config: GroupConfig) -> None:
    """Kafka's checks of a group's overrides after a change (raises `Invalid` with Kafka's message)."""
    values = {key: _parse(key, text) for key, text in overrides.items() if not KEYS[key].tags}
    for key, text in overrides.items():
        if KEYS[key].tags:
            _parse_tags(text)
    for key, spec in KEYS.items():
        if key not in values:
            continue
        value = values[key]
        low = getattr(config, spec.low) if spec.low else None
        high = getattr(config, spec.high) if spec.high else None
        if low is not None and high is not None and not low <= value <= high:
            raise Invalid(f"{key} must be in the range {low} to {high} inclusive.")
        if low is None and high is not None and value > high:
            raise Invalid(f"{key} must be less than or equal to {high}")
    if SESSION in values or HEARTBEAT in values:
        session = values.get(SESSION, config.streams_session_timeout_ms)
        heartbeat = values.get(HEARTBEAT, config.streams_heartbeat_interval_ms)
        if session <= heartbeat:
            raise Invalid(f"{SESSION} must be greater than {HEARTBEAT}")


class StreamsGroupConfigs:
    """Group id -> its overrides of the keys above; what a group uses is `effective`."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.configs: dict[str, dict[str, str]] = {}
        if path is None or not path.exists():
            return
        try:
            doc = json.loads(path.read_text())
            configs = {str(g): {str(k): str(v) for k, v in c.items() if k in KEYS}
                       for g, c in doc.get("groups", {}).items()}
            for overrides in configs.values():
                for key, text in overrides.items():
                    _parse(key, text)
        except (OSError, ValueError, AttributeError, Invalid) as exc:  # the broker starts; groups use the defaults
            log.error("streams group configs not read: every streams group uses the broker's settings",
                      path=path.name, error=str(exc))
            return
        self.configs = configs

    def alter(self, group_id: str, changes: list[tuple[str, int, str | None]], validate_only: bool,
              config: GroupConfig) -> tuple[ErrorCode, str | None]:
        """Apply IncrementalAlterConfigs operations (SET, DELETE) to one group's overrides, all or none."""
        if not group_id or len(group_id) > MAX_GROUP_ID_CHARS:
            return ErrorCode.INVALID_REQUEST, "Group name must be given."
        updated = dict(self.configs.get(group_id, {}))
        for key, operation, value in changes:
            if key not in KEYS:
                return ErrorCode.INVALID_CONFIG, f"Group config {key} is not served by this broker."
            if operation == SET:
                updated[key] = "" if value is None else value
            elif operation == DELETE:
                updated.pop(key, None)
            else:
                return ErrorCode.INVALID_CONFIG, f"Config value append/subtract is not allowed for config key: {key}"
        try:
            validate(updated, config)
        except Invalid as exc:
            return ErrorCode.INVALID_CONFIG, str(exc)
        if validate_only:
            return ErrorCode.NONE, None
        configs = dict(self.configs)
        if updated:
            configs[group_id] = {k: ",".join(split_tags(v)) if KEYS[k].tags else str(_parse(k, v))
                                 for k, v in updated.items()}
        else:
            configs.pop(group_id, None)
        if self.path is not None:
            try:
                atomic_write(self.path, json.dumps({"version": FORMAT_VERSION, "groups": configs},
                                                   sort_keys=True).encode())
            except OSError as exc:
                return ErrorCode.KAFKA_STORAGE_ERROR, f"The configs could not be persisted: {exc}"
        self.configs = configs
        return ErrorCode.NONE, None

    def described(self, group_id: str, config: GroupConfig) -> list[tuple[str, str, bool]]:
        """(key, value, is_default) of every streams key of `group_id`: its override, else the broker's value."""
        mine = self.configs.get(group_id, {})
        return [(key, mine.get(key, self.broker_text(key, config)), key not in mine) for key in DESCRIBED]

    @staticmethod
    def broker_text(key: str, config: GroupConfig) -> str:
        """The broker's value of a streams key, as DescribeConfigs shows it."""
        value = getattr(config, KEYS[key].broker)
        return ",".join(value) if KEYS[key].tags else str(value)

    def tags(self, group_id: str, config: GroupConfig) -> tuple[str, ...]:
        """The client tag keys `group_id`'s members must carry: its own list, else the broker's."""
        text = self.configs.get(group_id, {}).get(TAGS)
        return config.streams_rack_aware_assignment_tags if text is None else split_tags(text)

    def effective(self, group_id: str, key: str, config: GroupConfig) -> int:
        """What the group uses of a number: its override capped to the broker's bounds, else the broker's."""
        spec = KEYS[key]
        assert not spec.tags
        text = self.configs.get(group_id, {}).get(key)
        if text is None:
            return int(getattr(config, spec.broker))
        value = int(text)
        if spec.low is not None:
            value = max(value, int(getattr(config, spec.low)))
        if spec.high is not None:
            value = min(value, int(getattr(config, spec.high)))
        return value
