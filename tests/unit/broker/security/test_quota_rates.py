"""request_percentage and connection creation rates with an injected clock: what is measured, when a
client or an IP is over its quota, and that nothing is measured when no such quota is set."""

from __future__ import annotations

from typing import Any

import pytest

from pybroker.broker.security import request_time
from pybroker.broker.security.connection_rate import BROKER_LIMIT, IP_LIMIT, ConnectionRates
from pybroker.broker.security.quota_entities import (
    CONNECTION_CREATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    entity_of,
)
from pybroker.broker.security.quota_throttle import charge
from pybroker.broker.security.quotas import ClientQuotas
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages.metadata import MetadataResponse
from pybroker.protocol.messages.produce import ProduceResponse


def _quotas(entities: dict[Any, dict[str, float]]) -> ClientQuotas:
    quotas = ClientQuotas(None, window_num=2, window_size_s=1)  # the rate is measured over >= 1 s
    quotas.quotas = {entity_of(pairs): values for pairs, values in entities.items()}
    return quotas


def test_request_time_is_a_percentage_of_one_thread_and_throttles_past_the_quota() -> None:
    quotas = _quotas({(("client-id", "greedy"),): {REQUEST_PERCENTAGE: 50.0}})
    assert request_time.charge(quotas, "User:ANONYMOUS", "greedy", 0.4, 0) == 0  # 40% of a thread
    # 80% against 50%: Kafka's (O - T) / T x W over the 1 s window
    assert request_time.charge(quotas, "User:ANONYMOUS", "greedy", 0.4, 0) == 600
    assert request_time.charge(quotas, "User:ANONYMOUS", "modest", 5.0, 0) == 0  # not governed
    assert request_time.charge(quotas, "User:ANONYMOUS", "greedy", 0.1, 2500) == 0  # the window moved on


def test_request_time_is_measured_only_with_a_request_percentage_and_never_for_exempt_apis() -> None:
    assert not request_time.timed(None, ApiKey.METADATA)
    quotas = _quotas({(("client-id", "app"),): {PRODUCER_BYTE_RATE: 1024.0}})
    assert not request_time.timed(quotas, ApiKey.METADATA)
    quotas.quotas = {entity_of([("user", None)]): {REQUEST_PERCENTAGE: 10.0}}  # replaced whole: flags follow
    assert request_time.timed(quotas, ApiKey.METADATA)
    assert request_time.timed(quotas, ApiKey.PRODUCE)
    for exempt in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.WRITE_TXN_MARKERS):
        assert not request_time.timed(quotas, exempt)


def test_the_request_throttle_reaches_any_response_and_the_longer_throttle_wins() -> None:
    response = MetadataResponse(throttle_time_ms=0)
    assert charge(None, ApiKey.METADATA, 12, "User:ANONYMOUS", "c", 10, response, 0, 300) == (300, False)
    assert response.throttle_time_ms == 300
    quotas = _quotas({(("client-id", "c"),): {PRODUCER_BYTE_RATE: 1000.0}})
    produced = ProduceResponse(responses=[], throttle_time_ms=0)
    delay, hold = charge(quotas, ApiKey.PRODUCE, 9, "User:ANONYMOUS", "c", 1500, produced, 0, 100)
    assert (delay, hold) == (500, False) and produced.throttle_time_ms == 500  # bytes: 1500 vs 1000/s
    produced = ProduceResponse(responses=[], throttle_time_ms=0)
    assert charge(quotas, ApiKey.PRODUCE, 9, "User:ANONYMOUS", "d", 10, produced, 0, 900) == (900, False)


def test_no_quota_costs_nothing() -> None:
    rates = ConnectionRates()
    quotas = _quotas({(("client-id", "app"),): {PRODUCER_BYTE_RATE: 1024.0}})
    for now in range(1000):
        assert rates.admit(quotas, "127.0.0.1", now) is None
        assert rates.admit(None, "127.0.0.1", now) is None
    assert not rates._by_ip and not rates._broker._samples  # nothing was even counted
    assert not quotas.times_requests and not quotas.limits_ips


def test_an_ip_over_its_connection_creation_rate_is_refused_until_it_slows_down() -> None:
    rates = ConnectionRates(window_num=2, window_size_s=1)
    quotas = _quotas({(("ip", "127.0.0.1"),): {CONNECTION_CREATION_RATE: 2},
                      (("ip", None),): {CONNECTION_CREATION_RATE: 1}})
    assert quotas.limits_ips
    assert [rates.admit(quotas, "127.0.0.1", 0) for _ in range(3)] == [None, None, IP_LIMIT]
    # the default ip entity: each other IP on its own, at 1 a second
    assert [rates.admit(quotas, "10.0.0.1", 0) for _ in range(2)] == [None, IP_LIMIT]
    assert rates.admit(quotas, "10.0.0.2", 0) is None
    assert rates.admit(quotas, "127.0.0.1", 500) == IP_LIMIT  # refused attempts count too (Kafka)
    assert rates.admit(quotas, "127.0.0.1", 2500) is None  # the window moved on


def test_ip_entities_match_any_spelling_of_the_address() -> None:
    rates = ConnectionRates(window_num=2, window_size_s=1)
    quotas = _quotas({(("ip", "::FFFF:7F00:1"),): {CONNECTION_CREATION_RATE: 1}})
    assert rates.admit(quotas, "::ffff:127.0.0.1", 0) is None
    assert rates.admit(quotas, "::ffff:127.0.0.1", 0) == IP_LIMIT
    assert rates.admit(quotas, "127.0.0.2", 0) is None  # no default ip entity: not limited


@pytest.mark.parametrize(("rate", "admitted"), [(3, 3), (0, 0)])
def test_the_broker_wide_max_connection_creation_rate(rate: int, admitted: int) -> None:
    rates = ConnectionRates(rate, window_num=2, window_size_s=1)
    answers = [rates.admit(None, f"10.0.0.{i}", 0) for i in range(5)]
    assert answers == [None] * admitted + [BROKER_LIMIT] * (5 - admitted)
