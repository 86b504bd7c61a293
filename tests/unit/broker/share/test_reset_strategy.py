"""`share.auto.offset.reset`'s values as Kafka's group config validation takes them: Java's `Duration.parse`
grammar (cases from its documentation and its edges: empty sections, decimals, signs, long overflow), the
share group's own refusals (`none`, a bare `by_duration`, a negative duration), and any string at all
answered with a strategy or a refusal, never an exception."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pybroker.broker.share import reset_strategy
from pybroker.broker.share.reset_strategy import parse, parse_duration_ns

S = 1_000_000_000


@pytest.mark.parametrize(("text", "nanos"), [
    ("PT20.345S", 20_345_000_000), ("PT15M", 900 * S), ("PT10H", 36_000 * S), ("P2D", 172_800 * S),
    ("P2DT3H4M", 183_840 * S), ("PT-6H3M", -21_420 * S), ("-PT6H3M", -21_780 * S), ("-PT-6H+3M", 21_420 * S),
    ("pt1s", S), ("PT1,5S", 1_500_000_000), ("PT1.S", S), ("PT-0.5S", -500_000_000), ("PT0S", 0),
    ("PT0.000000001S", 1), ("+P1D", 86_400 * S), ("PT9223372036854775807S", 9_223_372_036_854_775_807 * S),
    ("P1DT0H", 86_400 * S),
])
def test_durations_java_reads(text: str, nanos: int) -> None:
    assert parse_duration_ns(text) == nanos


@pytest.mark.parametrize("text", [
    "", "P", "PT", "P1DT", "P1W", "P1Y", "P-6H3M", "PT1.1234567891S", "PT9223372036854775808S",
    "P106751991167301D", "1H", "PT1H ", " PT1H", "PT1_0S", "PT\u0661S", "PT1S1M", "P1D1D",
])
def test_durations_java_refuses(text: str) -> None:
    assert parse_duration_ns(text) is None


@pytest.mark.parametrize(("value", "kind", "nanos"), [
    ("latest", "latest", 0), ("earliest", "earliest", 0), ("by_duration:PT1H", "by_duration", 3_600 * S),
    ("by_duration:PT0S", "by_duration", 0), ("by_duration:-PT-1M", "by_duration", 60 * S),
])
def test_valid_values(value: str, kind: str, nanos: int) -> None:
    assert parse(value) == reset_strategy.ResetStrategy(kind, nanos)
    assert reset_strategy.check(value) is None


@pytest.mark.parametrize("value", ["none", "by_duration", "by_duration:", "by_duration:-PT1S", "Latest",
                                   "BY_DURATION:PT1H", "by_duration:PT-1S", "sometimes"])
def test_refused_values_say_what_kafka_says(value: str) -> None:
    assert parse(value) is None
    assert reset_strategy.check(value) == (
        f"Invalid value `{value}` for configuration share.auto.offset.reset. The value must be either "
        "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def test_the_timestamp_is_now_minus_the_duration_rounded_down() -> None:
    assert parse("by_duration:PT1H").timestamp(10_000_000) == 10_000_000 - 3_600_000  # type: ignore[union-attr]
    assert parse("by_duration:PT0.0005S").timestamp(1_000) == 999  # type: ignore[union-attr]


@given(st.text(max_size=60))
def test_any_value_is_a_strategy_or_a_refusal(value: str) -> None:
    found = parse(value)
    assert found is None or found.duration_ns >= 0
    assert (reset_strategy.check(value) is None) == (found is not None)


@given(st.integers(0, 10**6), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59), st.integers(0, 999))
def test_generated_durations_read_back(days: int, hours: int, minutes: int, seconds: int, millis: int) -> None:
    text = f"P{days}DT{hours}H{minutes}M{seconds}.{millis:03d}S"
    assert parse_duration_ns(text) == ((days * 86_400 + hours * 3_600 + minutes * 60 + seconds) * S
                                       + millis * 1_000_000)
