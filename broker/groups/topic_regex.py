"""Subscription regexes of the consumer protocol (KIP-848's `subscribed_topic_regex`).

Kafka evaluates them with RE2: linear time, no backreferences or lookarounds. We use the broker's
linear-time matcher (`id_pattern.IdPattern`, a Thompson NFA: a hostile pattern cannot stall the event
loop) with a whole-name match, and a pattern at most `MAX_REGEX_CHARS` long. A refused or malformed
pattern is INVALID_REGULAR_EXPRESSION. Every topic is a candidate, internal ones included, as in Kafka (its
coordinator matches every name in the metadata image: `__consumer_offsets` spelled out is assigned). With an
authorizer, a member's regex yields only the topics it may DESCRIBE (`TopicFilter`, Kafka 4's rule).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pybroker.broker.id_pattern import IdPattern, PatternError

MAX_REGEX_CHARS = 255


class RegexError(ValueError):
    pass


def compile_topic_regex(pattern: str) -> IdPattern:
    """The compiled pattern, or `RegexError` saying why it is refused."""
    if not pattern:
        raise RegexError("the regex is empty")
    if len(pattern) > MAX_REGEX_CHARS:
        raise RegexError(f"the regex is longer than {MAX_REGEX_CHARS} characters")
    try:
        return IdPattern(pattern)
    except PatternError as exc:
        raise RegexError(str(exc)) from None


def matching(pattern: str, names: Iterable[str]) -> set[str]:
    """The names the pattern matches in full."""
    try:
        compiled = compile_topic_regex(pattern)
    except RegexError:
        return set()
    return {name for name in names if compiled.matches(name)}


@dataclass(frozen=True, slots=True)
class TopicFilter:
    """Which topics a member's regex may bring it: those its principal may DESCRIBE from its host. `key`
    names the principal and host, so members asking as the same one share the authorizer's answers."""

    key: tuple[str, str]
    allowed: Callable[[str], bool] = field(compare=False, hash=False)
