"""Topic-partition offsets as Spark's Kafka source writes them: `{"topic": {"0": 23, "1": -2}}`.

Why a module of its own: the same JSON shape is a user option (`startingOffsets`, `endingOffsets`,
`startingOffsetsByTimestamp`, `assign`) and the streaming offset Spark stores in its checkpoint. Spark
decides whether a micro-batch has new data by comparing two offsets *as JSON strings*, so every offset
this connector hands to Spark goes through `to_json_dict`, which always orders keys the same way (sorted,
as `json.dumps(..., sort_keys=True)` would).

Pure Python: no Spark, no client library, so the unit tests need neither.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

#: Spark's per-partition specials in offset JSON
EARLIEST = -2
LATEST = -1


class TopicPartition(NamedTuple):
    """Equal to (and hashes like) kafka-python's TopicPartition, which is the same named tuple shape."""

    topic: str
    partition: int


class OptionError(ValueError):
    """A connector option that is missing, malformed, or not supported; the message names the option."""


Offsets = dict[TopicPartition, int]


def _load_json_object(text: str, option: str, example: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {option!r} is not valid JSON ({exc.msg}); expected e.g. {example}") from None
    if not isinstance(value, dict):
        raise OptionError(f"option {option!r} must be a JSON object, e.g. {example}; got {text!r}")
    return value


def _partition_number(topic: str, key: object, option: str) -> int:
    text = str(key)
    if not text.isdigit():
        raise OptionError(f"option {option!r}: partition {key!r} of topic {topic!r} is not a partition number")
    return int(text)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_partition_values(text: str, option: str, *, minimum: int, meaning: str) -> Offsets:
    """`{"topic": {"0": n, ...}, ...}` with every n an integer >= `minimum` (offsets, or timestamps)."""
    example = '{"topicA": {"0": 23, "1": -2}}'
    parsed: Offsets = {}
    for topic, partitions in _load_json_object(text, option, example).items():
        if not isinstance(partitions, dict):
            raise OptionError(f"option {option!r}: topic {topic!r} must map partitions to {meaning}s, e.g. {example}")
        for key, value in partitions.items():
            if not _is_int(value) or value < minimum:
                raise OptionError(
                    f"option {option!r}: {meaning} {value!r} for {topic}-{key} must be an integer >= {minimum}")
            parsed[TopicPartition(topic, _partition_number(topic, key, option))] = value
    if not parsed:
        raise OptionError(f"option {option!r} names no partitions; expected e.g. {example}")
    return parsed


def parse_assign(text: str) -> tuple[TopicPartition, ...]:
    """The `assign` option: `{"topicA": [0, 1], "topicB": [2]}`."""
    example = '{"topicA": [0, 1], "topicB": [2, 4]}'
    assigned: list[TopicPartition] = []
    for topic, partitions in _load_json_object(text, "assign", example).items():
        if not isinstance(partitions, list) or not all(_is_int(p) and p >= 0 for p in partitions):
            raise OptionError(f"option 'assign': topic {topic!r} must map to a list of partition numbers, "
                              f"e.g. {example}")
        assigned += [TopicPartition(topic, p) for p in partitions]
    if not assigned:
        raise OptionError(f"option 'assign' names no partitions; expected e.g. {example}")
    return tuple(sorted(set(assigned)))


def to_json_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The canonical streaming offset: topics and partition keys in sorted (string) order."""
    nested: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets, key=lambda tp: (tp.topic, str(tp.partition))):
        nested.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return nested


def from_json_dict(value: Mapping[str, Any]) -> Offsets:
    """The inverse of `to_json_dict`, for offsets Spark hands back (from its checkpoint or a previous call)."""
    offsets: Offsets = {}
    for topic, partitions in value.items():
        for key, offset in partitions.items():
            offsets[TopicPartition(topic, int(key))] = int(offset)
    return offsets


def describe(offsets: Mapping[TopicPartition, int]) -> str:
    """Offsets as one short line for messages."""
    return json.dumps(to_json_dict(offsets), separators=(",", ":"))
