"""The transactional id pattern matcher agrees with Python's `re.fullmatch` on the syntax it takes, refuses
what a linear-time matcher cannot do, and stays fast on patterns that make a backtracking engine explode."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.broker.id_pattern import IdPattern, PatternError

ALPHABET = "ab-1 \u00e9\u0663"  # with a non-ASCII letter and digit: Java's classes are ASCII

atoms = st.sampled_from(["a", "b", "-", "1", ".", "[ab]", "[^a]", "[0-9]", "\\d", "\\w", "\\s"])


def _patterns() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, inner).map("".join),
            st.tuples(inner, inner).map(lambda p: f"(?:{p[0]}|{p[1]})"),
            st.tuples(inner, st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{0,2}", "*?", "+?"])).map(
                lambda p: f"(?:{p[0]}){p[1]}"),
            inner.map(lambda p: f"({p})"),
        )
    return st.one_of(st.just(""), st.recursive(atoms, extend, max_leaves=8))


@settings(max_examples=400, deadline=None)
@given(pattern=_patterns(), subject=st.text(alphabet=ALPHABET, max_size=8),
       anchors=st.sampled_from(["", "^", "$", "^$"]))
def test_agrees_with_re_fullmatch(pattern: str, subject: str, anchors: str) -> None:
    full = ("^" if "^" in anchors else "") + pattern + ("$" if "$" in anchors else "")
    assert IdPattern(full).matches(subject) == bool(re.fullmatch(full, subject, re.ASCII)), (full, subject)


def test_java_meanings_where_python_differs() -> None:
    assert not IdPattern("a.b").matches("a\rb") and not IdPattern("a.b").matches("a\u2028b")
    assert IdPattern("a.b").matches("a\tb")
    assert not IdPattern("\\d").matches("\u0663") and not IdPattern("\\w").matches("\u00e9")
    assert IdPattern("[^\\d]").matches("\u0663")


@pytest.mark.parametrize("pattern", ["(a)\\1", "(?=a)a", "(?!b)a", "(?<=a)b", "(?i)abc", "(?>a+)", "a++",
                                     "[", "a{99999}", "x" * 2000, "(?P<n>a)(?P=n)"])
def test_refuses_what_it_cannot_match_linearly_or_at_all(pattern: str) -> None:
    with pytest.raises(PatternError):
        IdPattern(pattern)


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a|aa)+b", "(a*)*b", "(.*a){12}"])
def test_catastrophic_backtracking_patterns_stay_linear(pattern: str) -> None:
    subject = "a" * 3000 + "c"
    started = time.perf_counter()
    assert not IdPattern(pattern).matches(subject)
    assert time.perf_counter() - started < 30.0  # a backtracking engine needs longer than the universe's age


@pytest.mark.parametrize("depth", [10, 300, 499])
def test_deep_nesting_is_matched_or_refused_never_a_crash(depth: int) -> None:
    pattern = "(" * depth + "a" + ")" * depth
    try:
        compiled = IdPattern(pattern)
    except PatternError:
        return
    assert compiled.matches("a") and not compiled.matches("b")
