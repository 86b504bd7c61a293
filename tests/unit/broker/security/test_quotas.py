"""Client quotas: entity precedence, Describe filters, Alter validation, Kafka's rate and throttle time
(an injected clock, no sleeping), the throttle hook, and the quota file's round trip."""

from __future__ import annotations

import inspect
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pybroker.broker.detached_work import DetachedWork
from pybroker.broker.handlers.client_quotas import handle_alter, handle_describe
from pybroker.broker.security import quota_store
from pybroker.broker.security.quota_entities import (
    CLIENT_ID,
    PRODUCER_BYTE_RATE,
    USER,
    QuotaError,
    check_value,
    entity_of,
    resolve,
)
from pybroker.broker.security.quota_rate import Rate, throttle_ms
from pybroker.broker.security.quota_throttle import charge, fetch_throttle
from pybroker.broker.security.quotas import ClientQuotas
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasRequestEntityData,
    AlterClientQuotasRequestEntryData,
    OpData,
)
from pybroker.protocol.messages.describe_client_quotas import ComponentData, DescribeClientQuotasRequest
from pybroker.protocol.messages.produce import ProduceResponse

P = PRODUCER_BYTE_RATE


def E(**names: str | None) -> Any:
    return entity_of((k.replace("_", "-"), v) for k, v in names.items())


# -- precedence ----------------------------------------------------------------------------------------
LEVELS = [  # most specific first, as Kafka's ClientQuotaManager documents them
    (E(user="alice", client_id="app"), ("alice", "app")),
    (E(user="alice", client_id=None), ("alice", "app")),
    (E(user="alice"), ("alice", "")),
    (E(user=None, client_id="app"), ("alice", "app")),
    (E(user=None, client_id=None), ("alice", "app")),
    (E(user=None), ("alice", "")),
    (E(client_id="app"), ("", "app")),
    (E(client_id=None), ("", "app")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_configured_entity_wins(level: int) -> None:
    quotas = {entity: {P: float(i + 1)} for i, (entity, _) in enumerate(LEVELS[level:], start=level)}
    quotas[E(user="bob")] = {P: 999.0}
    entity, shared = LEVELS[level]
    assert resolve(quotas, "alice", "app", P) == (level + 1.0, entity, shared)


def test_keys_resolve_independently_and_nothing_limits_an_unconfigured_client() -> None:
    quotas = {E(user="alice"): {"consumer_byte_rate": 5.0}, E(client_id="app"): {P: 7.0}}
    assert resolve(quotas, "alice", "app", P)[0] == 7.0
    assert resolve(quotas, "alice", "app", "consumer_byte_rate")[0] == 5.0
    assert resolve(quotas, "bob", "other", P) is None


# -- validation ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("pairs", [[], [("group", "g")], [(USER, "a"), (USER, "b")], [("ip", "1.2.3.4"), (USER, "a")],
                                   [("ip", "not-an-ip")], [(USER, "")]])
def test_bad_entities_are_refused(pairs: list[tuple[str, str | None]]) -> None:
    with pytest.raises(QuotaError):
        entity_of(pairs)


@pytest.mark.parametrize(("key", "value"), [("unknown_key", 1.0), (P, 0.0), (P, -5.0), (P, 1.5),
                                            (P, float("inf")), ("connection_creation_rate", 5.0)])
def test_bad_values_are_refused(key: str, value: float) -> None:
    with pytest.raises(QuotaError):
        check_value(E(user="alice"), key, value)


def test_good_values_pass() -> None:
    check_value(E(user="alice"), P, 1024.0)
    check_value(E(user="alice"), "request_percentage", 12.5)
    check_value(entity_of([("ip", "10.0.0.1")]), "connection_creation_rate", 10.0)


# -- the handlers ---------------------------------------------------------------------------------------
def _ctx(tmp_path: Path) -> Any:
    return SimpleNamespace(state=SimpleNamespace(quotas=ClientQuotas(tmp_path / quota_store.FILE_NAME),
                                                 detached=DetachedWork()))


def _entry(ops: list[OpData], **names: str | None) -> AlterClientQuotasRequestEntryData:
    return AlterClientQuotasRequestEntryData(
        entity=[AlterClientQuotasRequestEntityData(entity_type=k.replace("_", "-"), entity_name=v)
                for k, v in names.items()], ops=ops)


async def _alter(ctx: Any, *entries: AlterClientQuotasRequestEntryData, validate_only: bool = False) -> Any:
    result = handle_alter(ctx, AlterClientQuotasRequest(entries=list(entries), validate_only=validate_only))
    return await result if inspect.isawaitable(result) else result


async def test_alter_sets_removes_validates_and_persists(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    response = await _alter(ctx, _entry([OpData(key=P, value=1024)], client_id="app"),
                            _entry([OpData(key="nope", value=1)], user="alice"),
                            _entry([OpData(key="consumer_byte_rate", value=2048)], user=None, client_id=None),
                            _entry([OpData(key="nope", remove=True)], user="bob"),
                            _entry([OpData(key=P, value=float("nan"))], user="carol"))
    assert [e.error_code for e in response.entries] == [0, ErrorCode.INVALID_REQUEST, 0, ErrorCode.INVALID_REQUEST,
                                                        ErrorCode.INVALID_REQUEST]
    assert response.entries[1].entity[0].entity_name == "alice"
    assert ctx.state.quotas.quotas == {E(client_id="app"): {P: 1024.0},
                                       E(user=None, client_id=None): {"consumer_byte_rate": 2048.0}}
    await _alter(ctx, _entry([OpData(key=P, value=1)], client_id="other"), validate_only=True)
    assert E(client_id="other") not in ctx.state.quotas.quotas
    await _alter(ctx, _entry([OpData(key=P, remove=True)], client_id="app"))
    assert E(client_id="app") not in ctx.state.quotas.quotas
    reloaded = ClientQuotas(tmp_path / quota_store.FILE_NAME)
    assert reloaded.quotas == {E(user=None, client_id=None): {"consumer_byte_rate": 2048.0}}
    for version in (0, 1):
        response.encode(version)


async def test_describe_filters_with_match_types_and_strict(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    await _alter(ctx, _entry([OpData(key=P, value=1)], user="alice"),
                 _entry([OpData(key=P, value=2)], user="alice", client_id="app"),
                 _entry([OpData(key=P, value=3)], user=None),
                 _entry([OpData(key=P, value=4)], client_id="app"))

    def described(components: list[tuple[str, int, str | None]], strict: bool) -> set[float]:
        request = DescribeClientQuotasRequest(components=[ComponentData(entity_type=t, match_type=m, match=n)
                                                          for t, m, n in components], strict=strict)
        response = handle_describe(ctx, request)
        assert response.error_code == 0
        return {v.value for e in response.entries for v in e.values}

    assert described([], False) == {1, 2, 3, 4}
    assert described([], True) == set()
    assert described([(USER, 0, "alice")], False) == {1, 2}
    assert described([(USER, 0, "alice")], True) == {1}
    assert described([(USER, 1, None)], False) == {3}
    assert described([(USER, 2, None)], False) == {1, 2}
    assert described([(CLIENT_ID, 0, "app")], True) == {4}
    assert described([(USER, 2, None), (CLIENT_ID, 2, None)], True) == {2}
    bad = handle_describe(ctx, DescribeClientQuotasRequest(components=[ComponentData(entity_type="group")]))
    assert bad.error_code == ErrorCode.INVALID_REQUEST and bad.entries is None


# -- rate and throttle ----------------------------------------------------------------------------------
def test_rate_is_measured_over_at_least_num_minus_one_windows() -> None:
    rate = Rate(11, 1000)
    rate.record(10_000, 0)
    assert rate.window_ms(0) == 10_000
    assert rate.per_second(0) == 1000.0
    rate.record(10_000, 10_500)
    assert rate.window_ms(10_500) == 10_500
    assert rate.per_second(10_999) == pytest.approx(20_000 / 10.999)  # since the first sample started
    # 11 windows after it started the first sample ages out; the rest is stretched to 10 windows again
    assert rate.per_second(11_000) == pytest.approx(10_000 / 10.5)


def test_throttle_is_kafkas_o_minus_t_over_t_times_w() -> None:
    rate = Rate(11, 1000)
    rate.record(20_000, 0)  # 2000 B/s over the 10 s minimum window
    assert throttle_ms(rate, 2000.0, 0) == 0
    assert throttle_ms(rate, 1000.0, 0) == 10_000  # (2000 - 1000) / 1000 * 10 s
    assert throttle_ms(rate, 1600.0, 0) == 2500


def test_charge_throttles_only_the_governed_client_and_old_versions_wait() -> None:
    quotas = ClientQuotas(None)
    quotas.quotas = {E(client_id="slow"): {P: 1000.0}}
    response = ProduceResponse()
    assert charge(quotas, 0, 9, "User:ANONYMOUS", "slow", 10_000, response, 0) == (0, False)  # 1000 B/s: at quota
    delay, hold = charge(quotas, 0, 9, "User:ANONYMOUS", "slow", 10_000, response, 1)
    assert delay == 9999 and not hold and response.throttle_time_ms == 9999  # (2000-1000)/1000 x 10.001 s
    assert charge(quotas, 0, 5, "User:ANONYMOUS", "slow", 10_000, ProduceResponse(), 2)[1] is True  # pre-KIP-219
    assert charge(quotas, 0, 9, "User:ANONYMOUS", "fast", 10**9, ProduceResponse(), 3) == (0, False)
    assert charge(quotas, 3, 9, "User:ANONYMOUS", "slow", 10**9, object(), 3) == (0, False)  # not produce/fetch


def test_a_throttled_fetch_answers_nothing_and_is_not_charged() -> None:
    from pybroker.protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData

    quotas = ClientQuotas(None)
    quotas.quotas = {E(client_id="c"): {"consumer_byte_rate": 100.0}}
    response = FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=[
        PartitionData(partition_index=0, records=b"x" * 5000)])])
    delay = fetch_throttle(quotas, "User:ANONYMOUS", "c", response, 0)  # the fetch handler asks, first
    assert delay > 0
    assert quotas._rates[("consumer_byte_rate", ("", "c"))].per_second(0) == 0
    answered = FetchResponse(throttle_time_ms=delay, responses=[])  # what the handler answers then
    assert charge(quotas, 1, 12, "User:ANONYMOUS", "c", 0, answered, 0) == (delay, False)  # applied, not charged
    assert charge(quotas, 1, 7, "User:ANONYMOUS", "c", 0, answered, 0) == (delay, True)  # pre-KIP-219 waits
    assert quotas._rates[("consumer_byte_rate", ("", "c"))].per_second(0) == 0


def test_quota_file_round_trip_and_a_damaged_file_stops_the_start(tmp_path: Path) -> None:
    path = tmp_path / quota_store.FILE_NAME
    quotas = {E(user="alice", client_id=None): {P: 1024.0, "request_percentage": 50.0},
              entity_of([("ip", "10.0.0.1")]): {"connection_creation_rate": 3.0}}
    quota_store.save(path, quotas)
    assert quota_store.load(path) == quotas
    path.write_text('{"version": 1, "entities": [{"entity": [["user", "a"]], "quotas": {"bogus": 1}}]}')
    from pybroker.storage.errors import StorageError
    with pytest.raises(StorageError):
        quota_store.load(path)
