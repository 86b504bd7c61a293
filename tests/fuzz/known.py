"""Bugs the fuzzer finds that another part of the project owns and has not fixed yet.

Two lists. `RULES` keeps inputs away from the target when feeding them would cost the whole run (a hang
stops the broker for the rest of its life). `KNOWN_FINDINGS` lets the campaign go on past a finding it
recognises: it is still reported and saved, but does not fail the bounded run.

Every entry names the issue-11 item it belongs to and has a strict-xfail reproducer in
`tests/fuzz/test_findings.py`: when the fix lands the reproducer passes, the strict xfail fails the
suite, and that is the signal to delete the entry here (and the xfail mark there).
"""

from __future__ import annotations

import re
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


#: a topic name longer than this cannot be renamed to `<name>-<p>.<32 hex>-delete` within 255 bytes
DELETABLE_NAME = 212


def _long_name_deleted(api_key: int, version: int, request: object) -> bool:
    if api_key != 20:  # DeleteTopics
        return False
    names = [t.name for t in getattr(request, "topics", None) or [] if t.name]
    names += list(getattr(request, "topic_names", None) or [])
    return any(len(name.encode("utf-8", "replace")) > DELETABLE_NAME for name in names)


RULES: dict[str, Rule] = {
    "item 4: a huge partition count is created on the event loop": _many_partitions,
    # the failed delete leaves the Log it dropped open (a ResourceWarning when it is collected), and its
    # directory behind, which stops the next start (see KNOWN_FINDINGS)
    "item 7: deleting a topic with a name over 212 bytes fails and leaks its open files": _long_name_deleted,
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


#: finding kind and a pattern of its detail -> what it is
KNOWN_FINDINGS: dict[str, tuple[str, re.Pattern[str]]] = {
    # a topic name with a newline breaks the line-based checkpoint files: start offsets go back to 0
    "item 1: DeleteRecords undone by a restart (a topic name with a newline)":
        ("restart", re.compile(r"state changed across a restart: topics \[\], offsets .*; [1-9]\d* topic names with")),
    # a 249-character topic cannot be deleted (the -delete rename is too long); its dir stays, and
    # at the next start setting it aside as stray is too long a name as well: the broker does not start
    "item 7: a 249-character topic left behind by a failed delete stops the next start":
        ("restart", re.compile(r"did not start again on its dir: OSError\(36")),
    # checkpoint writes from several worker threads share one temp file name: the losing rename's
    # FileNotFoundError is taken for a disk failure (DeleteRecords next to other requests)
    "item 3: concurrent checkpoint writes take the log dir offline":
        ("error-logged", re.compile(r"log dir offline .*FileNotFoundError")),
    # the same failed delete leaves `<name>-0` behind; creating the topic again sets it aside under a name
    # too long as well, and that OSError takes the log dir offline
    "item 7: recreating a 249-character topic takes the log dir offline":
        ("error-logged", re.compile(r"log dir offline .*File name too long")),
    # a produce waiting for its fsync when its topic is deleted logs an error and answers
    # KAFKA_STORAGE_ERROR (handlers/produce.py)
    "produce: acks=-1 racing a DeleteTopics logs 'flush failed' at error level":
        ("error-logged", re.compile(r"produce: flush failed .*LogClosedError")),
}


def known_finding(kind: str, detail: str) -> str | None:
    for name, (known_kind, pattern) in KNOWN_FINDINGS.items():
        if kind == known_kind and pattern.search(detail):
            return name
    return None
