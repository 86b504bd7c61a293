"""Subscription regexes of the consumer protocol (KIP-848's `subscribed_topic_regex`).

Kafka evaluates them with RE2 (linear time, no backtracking). We use Python's `re` with a full match,
and refuse what would make it slow or what RE2 does not have, so a member cannot spend the event loop:
longer than `MAX_REGEX_CHARS`, back references and lookarounds, a repeat inside a repeat, and more than
`MAX_UNBOUNDED_REPEATS` unbounded repeats. A refused or malformed pattern is INVALID_REGULAR_EXPRESSION.
"""

from __future__ import annotations

import re
import re._parser as sre_parse  # Python 3.11+: the parser `re` itself compiles with
from collections.abc import Iterable
from typing import Any

MAX_REGEX_CHARS = 255
MAX_UNBOUNDED_REPEATS = 3
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}
_REFUSED = {"GROUPREF", "GROUPREF_EXISTS", "ASSERT", "ASSERT_NOT"}
#: sre's "no upper bound" (MAXREPEAT)
_UNBOUNDED = sre_parse.MAXREPEAT


class RegexError(ValueError):
    pass


def _walk(items: Any, inside_repeat: bool, counts: list[int]) -> None:
    for op, arg in items:
        name = str(op)
        if name in _REFUSED:
            raise RegexError("back references and lookarounds are not supported")
        if name in _REPEATS:
            _low, high, sub = arg
            if high == _UNBOUNDED:
                counts[0] += 1
            if high is not None and (high == _UNBOUNDED or high > 1):
                if inside_repeat:
                    raise RegexError("a repeat inside a repeat is not supported")
                _walk(sub, True, counts)
            else:
                _walk(sub, inside_repeat, counts)
        elif name == "SUBPATTERN":
            _walk(arg[-1], inside_repeat, counts)
        elif name == "BRANCH":
            for branch in arg[1]:
                _walk(branch, inside_repeat, counts)
        elif name in ("ATOMIC_GROUP",):
            _walk(arg, inside_repeat, counts)


def compile_topic_regex(pattern: str) -> re.Pattern[str]:
    """The compiled pattern, or `RegexError` saying why it is refused."""
    if not pattern:
        raise RegexError("the regex is empty")
    if len(pattern) > MAX_REGEX_CHARS:
        raise RegexError(f"the regex is longer than {MAX_REGEX_CHARS} characters")
    try:
        parsed = sre_parse.parse(pattern)
        compiled = re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise RegexError(f"invalid regex: {exc}") from None
    counts = [0]
    _walk(parsed, False, counts)
    if counts[0] > MAX_UNBOUNDED_REPEATS:
        raise RegexError(f"more than {MAX_UNBOUNDED_REPEATS} unbounded repeats")
    return compiled


def matching(pattern: str, names: Iterable[str]) -> set[str]:
    """The names the pattern matches in full (internal topics are never matched, as in Kafka)."""
    try:
        compiled = compile_topic_regex(pattern)
    except RegexError:
        return set()
    return {name for name in names if not name.startswith("__") and compiled.fullmatch(name)}
