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

from pybroker.protocol.frame_codec import decode_request
from tests.fuzz.mutate import FuzzInput

Rule = Callable[[int, int, object], bool]

RULES: dict[str, Rule] = {}


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
KNOWN_FINDINGS: dict[str, tuple[str, re.Pattern[str]]] = {}


def known_finding(kind: str, detail: str) -> str | None:
    for name, (known_kind, pattern) in KNOWN_FINDINGS.items():
        if kind == known_kind and pattern.search(detail):
            return name
    return None
