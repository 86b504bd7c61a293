"""Topic metadata that must survive restarts: name, topic id, partition count, config overrides.

Kafka keeps this in its metadata log; a single node keeps it in `pybroker-topics.json`, written
atomically into every log dir with a version counter (the newest readable copy wins at startup, so
losing one dir's copy loses nothing). Each partition dir also gets Kafka's `partition.metadata`
(`version: 0` and the topic id in Kafka's base64 form), so the id lives next to the data too.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pybroker.storage.checkpoints import atomic_write

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


class TopicStore:
    def __init__(self, dirs: list[Path]) -> None:
        self.dirs = dirs
        self.version = 0

    def load(self) -> dict[str, TopicInfo]:
        best: tuple[int, dict[str, TopicInfo]] = (-1, {})
        for directory in self.dirs:
            try:
                raw = json.loads((directory / FILE_NAME).read_text())
                topics = {
                    t["name"]: TopicInfo(t["name"], uuid.UUID(t["topic_id"]), int(t["partitions"]),
                                         {str(k): str(v) for k, v in t.get("configs", {}).items()})
                    for t in raw["topics"]
                }
                if raw["version"] > best[0]:
                    best = (raw["version"], topics)
            except (FileNotFoundError, ValueError, KeyError, TypeError):
                continue
        self.version = max(best[0], 0)
        return best[1]

    def save(self, topics: dict[str, TopicInfo]) -> None:
        self.version += 1
        data = json.dumps({
            "version": self.version,
            "topics": [{"name": t.name, "topic_id": str(t.topic_id), "partitions": t.num_partitions,
                        "configs": t.configs} for t in sorted(topics.values(), key=lambda t: t.name)],
        }, indent=1).encode()
        for directory in self.dirs:
            atomic_write(directory / FILE_NAME, data)
