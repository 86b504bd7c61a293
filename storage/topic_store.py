"""Topic metadata that must survive restarts: name, topic id, partition count, config overrides.

Kafka keeps this in its metadata log; a single node keeps it in `pybroker-topics.json`, written
atomically into every log dir:

    {"version": 7, "topics": [{"name": "orders", "topic_id": "<uuid>", "partitions": 3,
                               "configs": {"retention.ms": "1000"}}]}

`version` grows with every save; at startup the newest readable copy wins, so losing or corrupting one
dir's copy loses nothing. Each partition dir also gets Kafka's `partition.metadata` (`version: 0` and
the topic id in Kafka's base64 form), so a partition's data names the topic it belongs to.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pybroker.storage.errors import LogDirsOfflineError, TopicStoreError
from pybroker.storage.files import atomic_write

FILE_NAME = "pybroker-topics.json"
PARTITION_METADATA = "partition.metadata"


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: dict[str, str] = field(default_factory=dict)


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def write_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    atomic_write(directory / PARTITION_METADATA, f"version: 0\ntopic_id: {kafka_uuid(topic_id)}\n".encode())


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    """The topic id a partition dir belongs to; None if the file is missing or unreadable."""
    try:
        fields = dict(line.split(":", 1) for line in (directory / PARTITION_METADATA).read_text().splitlines()
                      if ":" in line)
        if fields.get("version", "").strip() != "0":
            return None
        return parse_kafka_uuid(fields["topic_id"].strip())
    except (OSError, UnicodeDecodeError, KeyError, ValueError, binascii.Error):
        return None


def _topic_from_json(raw: Any) -> TopicInfo:
    configs = raw.get("configs", {})
    if not isinstance(raw["name"], str) or not isinstance(configs, dict) or int(raw["partitions"]) < 1:
        raise ValueError("malformed topic entry")
    return TopicInfo(raw["name"], uuid.UUID(raw["topic_id"]), int(raw["partitions"]),
                     {str(k): str(v) for k, v in configs.items()})


class TopicStore:
    def __init__(self, dirs: list[Path]) -> None:
        self.dirs = dirs
        self.version = 0
        self._lock = threading.Lock()
        #: offline dirs are skipped on save (the log manager wires in its failure channel)
        self.is_online: Callable[[Path], bool] = lambda directory: True
        self.on_error: Callable[[Path, OSError], object] = _raise

    def load(self) -> dict[str, TopicInfo]:
        """The newest readable copy across the dirs (empty when no dir has one).

        Raises `TopicStoreError` when copies exist but none can be read: starting without the
        topic table would set every partition aside, so an operator must look first.
        """
        best_version, best = -1, {}
        broken: list[str] = []
        for directory in self.dirs:
            path = directory / FILE_NAME
            try:
                raw = json.loads(path.read_bytes())
                version = int(raw["version"])
                topics = {t.name: t for t in map(_topic_from_json, raw["topics"])}
            except FileNotFoundError:
                continue
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                broken.append(f"{path}: {exc}")
                continue
            if version > best_version:
                best_version, best = version, topics
        if broken and best_version < 0:
            raise TopicStoreError("no readable copy of the topic table: " + "; ".join(broken))
        self.version = max(best_version, 0)
        return best

    def save(self, topics: dict[str, TopicInfo]) -> None:
        """Write `topics` to every online dir. One save at a time: the one that starts last serialises
        the newest state and writes it last, under the highest version."""
        with self._lock:
            self._save(topics)

    def _save(self, topics: dict[str, TopicInfo]) -> None:
        self.version += 1
        data = json.dumps({
            "version": self.version,
            "topics": [{"name": t.name, "topic_id": str(t.topic_id), "partitions": t.num_partitions,
                        "configs": t.configs} for t in sorted(topics.values(), key=lambda t: t.name)],
        }, indent=1).encode()
        written = 0
        for directory in self.dirs:
            if not self.is_online(directory):
                continue
            try:
                atomic_write(directory / FILE_NAME, data)
            except OSError as exc:
                self.on_error(directory, exc)  # that dir goes offline; the others still hold the table
                continue
            written += 1
        if not written:
            raise LogDirsOfflineError("every log dir is offline: topic changes cannot be saved")


def _raise(directory: Path, exc: OSError) -> None:
    raise exc
