"""Inputs that reach a bug another part of the project owns and has not fixed yet: not fed to the target.

Each rule names the issue-11 item it belongs to and has a strict-xfail reproducer in
`tests/fuzz/test_findings.py`: when the fix lands the reproducer passes, the strict xfail fails the
suite, and that is the signal to delete the rule here (and the xfail mark there).
"""

from __future__ import annotations

from collections.abc import Callable

from pybroker.protocol.frames import decode_request
from tests.fuzz.mutate import FuzzInput

Rule = Callable[[int, int, object], bool]

#: more partitions than this in one request reach issue 11 item 4 (partitions made one by one on the event
#: loop until descriptors run out); owner: the partition caps (`storage/`, create_topics/create_partitions)
PARTITIONS_PER_REQUEST = 1000


def _many_partitions(api_key: int, version: int, request: object) -> bool:
    topics = getattr(request, "topics", None) or []
    if api_key == 19:  # CreateTopics
        return sum(max(t.num_partitions, len(t.assignments)) for t in topics) > PARTITIONS_PER_REQUEST
    if api_key == 37:  # CreatePartitions
        return sum(max(t.count, len(t.assignments or ())) for t in topics) > PARTITIONS_PER_REQUEST
    return False


RULES: dict[str, Rule] = {
    "item 4: a huge partition count is created on the event loop": _many_partitions,
}


def _frames(data: bytes) -> list[bytearray]:
    frames, pos = [], 0
    while len(data) - pos >= 4:
        size = int.from_bytes(data[pos : pos + 4], "big", signed=True)
        if size < 0 or len(data) - pos - 4 < size:
            break
        frames.append(bytearray(data[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    return frames


def known_rule(item: FuzzInput) -> str | None:
    """The name of the first rule an input's requests match, or None to feed it."""
    if not RULES:
        return None
    for frame in _frames(item.data):
        try:
            header, request = decode_request(frame)
        except Exception:
            continue
        for name, rule in RULES.items():
            if rule(header.api_key, header.api_version, request):
                return name
    return None
