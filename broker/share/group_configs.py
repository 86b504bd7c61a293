"""Group configs of share groups (KIP-932): IncrementalAlterConfigs and DescribeConfigs on resource type GROUP.

Kafka keeps per-group overrides of a few group settings; share groups read these (Kafka's names):

| key | values | default |
| --- | --- | --- |
| `share.auto.offset.reset` | `latest`, `earliest`, `by_duration:<ISO-8601 duration>` (`reset_strategy`) | `latest`: a share-partition first read starts at the end |
| `share.isolation.level` | `read_uncommitted`, `read_committed` | `read_uncommitted` |
| `share.record.lock.duration.ms` | 1000 .. 3600000 | the broker's `group.share.record.lock.duration.ms` |
| `share.delivery.count.limit` | 2 .. 10 | the broker's `group.share.delivery.count.limit` |
| `share.partition.max.record.locks` | 100 .. 10000 | the broker's `group.share.partition.max.record.locks` |

Any other key is INVALID_CONFIG. The overrides live in one JSON file in the first log dir
(`pybroker-group-configs.json`), replaced whole and fsynced before the change is answered
(`storage/files.py`'s `atomic_write`). A refused value is INVALID_CONFIG with Kafka's message.

Threads: the event loop; the file write is small and synchronous (as the other JSON stores' writes).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pybroker.broker.share import reset_strategy
from pybroker.protocol.errors import ErrorCode
from pybroker.storage.files import atomic_write

FILE_NAME = "pybroker-group-configs.json"
FORMAT_VERSION = 1
GROUP_RESOURCE = 32
SET, DELETE = 0, 1
MAX_GROUP_ID_CHARS = 2048


def _one_of(*allowed: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        return None if value in allowed else f"must be one of {', '.join(allowed)}"
    return check


def _int_between(low: int, high: int) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        try:
            number = int(value)
        except ValueError:
            return "must be an integer"
        return None if low <= number <= high else f"must be between {low} and {high}"
    return check


#: key -> (its default as shown when not set, the check of a value: None when valid, else why not)
SHARE_KEYS: dict[str, tuple[str, Callable[[str], str | None]]] = {
    "share.auto.offset.reset": ("latest", reset_strategy.check),
    "share.isolation.level": ("read_uncommitted", _one_of("read_uncommitted", "read_committed")),
    "share.record.lock.duration.ms": ("", _int_between(1000, 3_600_000)),
    "share.delivery.count.limit": ("", _int_between(2, 10)),
    "share.partition.max.record.locks": ("", _int_between(100, 10_000)),
}


class GroupConfigs:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.configs: dict[str, dict[str, str]] = {}
        if path is not None and path.exists():
            doc = json.loads(path.read_text())
            self.configs = {str(g): {str(k): str(v) for k, v in c.items() if k in SHARE_KEYS}
                            for g, c in doc.get("groups", {}).items()}

    def get(self, group_id: str, key: str) -> str | None:
        return self.configs.get(group_id, {}).get(key)

    def alter(self, group_id: str, changes: list[tuple[str, int, str | None]],
              validate_only: bool) -> tuple[ErrorCode, str | None]:
        if not group_id or len(group_id) > MAX_GROUP_ID_CHARS:
            return ErrorCode.INVALID_REQUEST, "Group name must be given."
        updated = dict(self.configs.get(group_id, {}))
        for key, operation, value in changes:
            if key not in SHARE_KEYS:
                return ErrorCode.INVALID_CONFIG, f"Unknown group config name: {key}"
            if operation == SET:
                why = SHARE_KEYS[key][1](value or "")
                if value is None or why is not None:
                    return ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {key}: {why}"
                updated[key] = value
            elif operation == DELETE:
                updated.pop(key, None)
            else:
                return ErrorCode.INVALID_CONFIG, f"Config value append/subtract is not allowed for config key: {key}"
        if validate_only:
            return ErrorCode.NONE, None
        configs = dict(self.configs)
        if updated:
            configs[group_id] = updated
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

    def described(self, group_id: str, defaults: dict[str, str]) -> list[tuple[str, str, bool]]:
        """(key, value, is_default) of every share group config of `group_id`."""
        mine = self.configs.get(group_id, {})
        return [(key, mine.get(key, defaults.get(key, default)), key not in mine)
                for key, (default, _check) in SHARE_KEYS.items()]
