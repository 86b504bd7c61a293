"""Regular expressions from clients, matched in time linear in the subject: ListTransactions v2's
transactional id pattern (KIP-1152), with the meaning Kafka's Java `Pattern` gives them.

Python's `re` backtracks, so a hostile pattern such as `(a+)+$` costs exponential time on a modest id
while holding the GIL: a denial of service of the whole broker. Here the pattern is parsed with Python's
own parser (the syntax Kafka's Java patterns share: literals, `.`, classes, `\\d\\w\\s`, groups,
alternation, `* + ? {m,n}`, `^ $`) and compiled to a Thompson NFA that is simulated one subject character
at a time: O(len(subject) x states), never worse. Where Python and Java differ, Java's meaning is kept:
`\\d \\w \\s` are ASCII classes, and `.` matches no line terminator (`\\r` and U+2028 included).

Backreferences, lookarounds, atomic groups and possessive quantifiers (which no NFA simulation has) and
inline flags are refused as invalid, and so is a pattern whose expansion (`{m,n}` copies) would exceed
MAX_STATES. Matching is whole-subject, as Java's `Pattern.matcher(id).matches()`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse
from typing import Any

MAX_PATTERN_CHARS = 1000
MAX_STATES = 2000

CharTest = Callable[[str], bool]

_DIGITS = frozenset("0123456789")
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_SPACE = frozenset(" \t\n\x0b\f\r")
#: what Java's `.` does not match (its line terminators)
_LINE_TERMINATORS = frozenset("\n\r\u0085\u2028\u2029")

#: Java's (ASCII) classes: \d is [0-9], \w [a-zA-Z_0-9], \s [ \t\n\x0B\f\r]
_CATEGORIES: dict[Any, CharTest] = {
    sre.CATEGORY_DIGIT: _DIGITS.__contains__,
    sre.CATEGORY_NOT_DIGIT: lambda c: c not in _DIGITS,
    sre.CATEGORY_SPACE: _SPACE.__contains__,
    sre.CATEGORY_NOT_SPACE: lambda c: c not in _SPACE,
    sre.CATEGORY_WORD: _WORD.__contains__,
    sre.CATEGORY_NOT_WORD: lambda c: c not in _WORD,
}
_AT_START = {sre.AT_BEGINNING, sre.AT_BEGINNING_STRING}
_AT_END = {sre.AT_END, sre.AT_END_STRING}


def _is(char: str) -> CharTest:
    return lambda c: c == char


def _is_not(char: str) -> CharTest:
    return lambda c: c != char


def _between(low: int, high: int) -> CharTest:
    return lambda c: low <= ord(c) <= high


class PatternError(ValueError):
    """The pattern is not one we match: malformed, or beyond what a linear-time matcher can do."""


def _class_test(items: list[tuple[Any, Any]]) -> CharTest:
    negate = bool(items) and items[0][0] is sre.NEGATE
    tests: list[CharTest] = []
    for op, arg in items[1:] if negate else items:
        if op is sre.LITERAL:
            tests.append(_is(chr(arg)))
        elif op is sre.RANGE:
            tests.append(_between(arg[0], arg[1]))
        elif op is sre.CATEGORY and arg in _CATEGORIES:
            tests.append(_CATEGORIES[arg])
        else:
            raise PatternError(f"unsupported in a character class: {op}")
    if negate:
        return lambda c: not any(t(c) for t in tests)
    return lambda c: any(t(c) for t in tests)


class IdPattern:
    """A compiled pattern: `matches(subject)` is True when the whole subject matches."""

    def __init__(self, pattern: str) -> None:
        if len(pattern) > MAX_PATTERN_CHARS:
            raise PatternError(f"longer than {MAX_PATTERN_CHARS} characters")
        try:
            parsed = sre_parse.parse(pattern, 0)
        except (re.error, RecursionError, OverflowError) as exc:
            raise PatternError(str(exc)) from None
        if parsed.state.flags & ~(re.UNICODE | sre.SRE_FLAG_UNICODE):
            raise PatternError("inline flags are not supported")
        self.eps: list[list[int]] = []
        self.step: list[tuple[CharTest, int] | None] = []
        self.anchor: list[Any] = []
        self.start = self._new()
        try:
            self.accept = self._sequence(list(parsed), self.start)
        except RecursionError:
            raise PatternError("nested too deeply") from None

    # -- construction (Thompson) ------------------------------------------------------------------------
    def _new(self) -> int:
        if len(self.eps) >= MAX_STATES:
            raise PatternError(f"needs more than {MAX_STATES} states")
        self.eps.append([])
        self.step.append(None)
        self.anchor.append(None)
        return len(self.eps) - 1

    def _edge(self, at: int, test: CharTest) -> int:
        source, target = self._new(), self._new()
        self.eps[at].append(source)
        self.step[source] = (test, target)
        return target

    def _sequence(self, items: list[tuple[Any, Any]], at: int) -> int:
        for op, arg in items:
            at = self._item(op, arg, at)
        return at

    def _item(self, op: Any, arg: Any, at: int) -> int:
        if op is sre.LITERAL:
            return self._edge(at, _is(chr(arg)))
        if op is sre.NOT_LITERAL:
            return self._edge(at, _is_not(chr(arg)))
        if op is sre.ANY:
            return self._edge(at, lambda c: c not in _LINE_TERMINATORS)
        if op is sre.IN:
            return self._edge(at, _class_test(list(arg)))
        if op is sre.SUBPATTERN:
            _group, add_flags, del_flags, body = arg
            if add_flags or del_flags:
                raise PatternError("inline flags are not supported")
            return self._sequence(list(body), at)
        if op is sre.BRANCH:
            end = self._new()
            for alternative in arg[1]:
                self.eps[self._sequence(list(alternative), at)].append(end)
            return end
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            low, high, body = arg
            return self._repeat(low, high, body, at)
        if op is sre.AT and (arg in _AT_START or arg in _AT_END):
            node = self._new()
            self.anchor[node] = arg
            self.eps[at].append(node)
            return node
        raise PatternError(f"unsupported construct: {op}")

    def _repeat(self, low: int, high: int, body: Any, at: int) -> int:
        items = list(body)
        for _ in range(low):
            at = self._sequence(items, at)
        if high == sre.MAXREPEAT:
            hub = self._new()
            self.eps[at].append(hub)
            self.eps[self._sequence(items, hub)].append(hub)
            return hub
        end = self._new()
        for _ in range(high - low):
            self.eps[at].append(end)
            at = self._sequence(items, at)
        self.eps[at].append(end)
        return end

    # -- simulation ---------------------------------------------------------------------------------------
    def _closure(self, states: list[int], position: int, length: int) -> set[int]:
        seen: set[int] = set()
        stack = list(states)
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            anchor = self.anchor[node]
            if anchor is not None and not ((anchor in _AT_START and position == 0)
                                           or (anchor in _AT_END and position == length)):
                continue
            seen.add(node)
            stack.extend(self.eps[node])
        return seen

    def matches(self, subject: str) -> bool:
        length = len(subject)
        current = self._closure([self.start], 0, length)
        for position, char in enumerate(subject, 1):
            moves = [step[1] for node in current if (step := self.step[node]) is not None and step[0](char)]
            if not moves:
                return False
            current = self._closure(moves, position, length)
        return self.accept in current
