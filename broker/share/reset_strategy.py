"""`share.auto.offset.reset`: where a share-partition read for the first time starts (KIP-932, KIP-1106).

| value | a new share-partition starts at |
| --- | --- |
| `latest` (the default) | the high watermark: only records produced from now on |
| `earliest` | the log start offset |
| `by_duration:<ISO-8601 duration>` | the first offset whose timestamp is at or after now minus the duration (the high watermark when no record is that recent) |

A value is valid as Kafka's group config validation has it: `latest` or `earliest` exactly (`none`, which a
consumer accepts, is not a share group's), or `by_duration:` followed by a duration as Java's
`Duration.parse` reads it (`PnDTnHnMn.nS`: days, hours, minutes and seconds, each optional but at least
one, each signed, seconds with up to nine decimals after `.` or `,`, letters in either case, an optional
sign before the `P` negating the whole; each part within a Java long) whose total is not negative. Every
other value is refused with Kafka's message (`invalid`).

Pure functions, no I/O: called on the event loop by the group configs' validation and by
`ShareService.share_partition` when it makes a share-partition.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BY_DURATION = "by_duration:"
#: Java's `Duration.parse` grammar, matched whole and case-insensitively
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_NANOS_PER_SECOND, _NANOS_PER_MS = 1_000_000_000, 1_000_000
#: seconds per part of the grammar (group number in `_DURATION` -> seconds)
_PART_SECONDS = {2: 86_400, 4: 3_600, 5: 60, 6: 1}


@dataclass(frozen=True, slots=True)
class ResetStrategy:
    """`kind` is "earliest", "latest" or "by_duration"; `duration_ns` is set for by_duration only."""

    kind: str
    duration_ns: int = 0

    def timestamp(self, now_ms: int) -> int:
        """The by_duration timestamp: now minus the duration, in ms (as Java's `Instant.minus(...).toEpochMilli()`)."""
        return (now_ms * _NANOS_PER_MS - self.duration_ns) // _NANOS_PER_MS


LATEST, EARLIEST = ResetStrategy("latest"), ResetStrategy("earliest")
_NAMED = {"latest": LATEST, "earliest": EARLIEST}


def invalid(key: str, value: str) -> str:
    """The reason Kafka gives for a refused value (after "Invalid value <value> for configuration <key>: ")."""
    return (f"Invalid value `{value}` for configuration {key}. The value must be either 'earliest', 'latest' or "
            "of the format 'by_duration:<PnDTnHnMn.nS>'.")


def _long(text: str) -> int | None:
    number = int(text)
    return number if _LONG_MIN <= number <= _LONG_MAX else None


def parse_duration_ns(text: str) -> int | None:
    """An ISO-8601 duration as Java's `Duration.parse` reads it, in nanoseconds; None where Java throws."""
    match = _DURATION.fullmatch(text)
    if match is None or (match.group(3) is not None and match.group(3).upper() == "T"):
        return None
    if all(match.group(g) is None for g in _PART_SECONDS):
        return None
    parts = []
    for group, unit in _PART_SECONDS.items():
        part = match.group(group)
        number = 0 if part is None else _long(part)
        if number is None or not _LONG_MIN <= number * unit <= _LONG_MAX:
            return None
        parts.append(number * unit)
    seconds = 0
    for part_seconds in reversed(parts):  # Java adds seconds to minutes, that to hours, that to days
        seconds += part_seconds
        if not _LONG_MIN <= seconds <= _LONG_MAX:
            return None
    fraction = match.group(7)
    nanos = int((fraction + "000000000")[:9]) if fraction else 0
    if match.group(6) is not None and match.group(6).startswith("-"):
        nanos = -nanos
    total = seconds * _NANOS_PER_SECOND + nanos
    if match.group(1) == "-":
        total = -total
    if not _LONG_MIN <= total // _NANOS_PER_SECOND <= _LONG_MAX:
        return None
    return total


def parse(value: str) -> ResetStrategy | None:
    """The strategy a valid value names; None for an invalid one."""
    named = _NAMED.get(value)
    if named is not None:
        return named
    if not value.startswith(BY_DURATION):
        return None
    duration = parse_duration_ns(value[len(BY_DURATION):])
    if duration is None or duration < 0:
        return None
    return ResetStrategy("by_duration", duration)


def check(value: str) -> str | None:
    """The group configs' check of a value: None when valid, else Kafka's reason."""
    return None if parse(value) is not None else invalid("share.auto.offset.reset", value)
