"""The fetch session cache (KIP-227) without a broker: resolution of full and incremental fetches against
a model, Kafka's eviction rules, the caps, and what an incremental answer keeps."""

from __future__ import annotations

import random
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.broker.fetch_sessions import EVICTION_MS, FetchSessionCache, next_epoch
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.fetch import (
    FetchableTopicResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
    PartitionData,
)

ZERO = uuid.UUID(int=0)
ME = "User:ANONYMOUS"


def _request(session_id: int, epoch: int, parts: list[tuple[str, int]] = (), forget: list[tuple[str, int]] = (),
             replica_id: int = -1) -> FetchRequest:
    topics: dict[str, FetchTopic] = {}
    for topic, partition in parts:
        topics.setdefault(topic, FetchTopic(topic=topic)).partitions.append(FetchPartition(partition=partition))
    forgotten: dict[str, ForgottenTopic] = {}
    for topic, partition in forget:
        forgotten.setdefault(topic, ForgottenTopic(topic=topic)).partitions.append(partition)
    return FetchRequest(session_id=session_id, session_epoch=epoch, topics=list(topics.values()),
                        forgotten_topics_data=list(forgotten.values()), replica_id=replica_id)


def _answer(topics: list[FetchTopic], hw: dict[tuple[str, int], int] | None = None,
            records: frozenset[tuple[str, int]] = frozenset()) -> FetchResponse:
    """What the handler's read would give: every planned partition, in order."""
    return FetchResponse(responses=[FetchableTopicResponse(topic=t.topic, partitions=[
        PartitionData(partition_index=p.partition, high_watermark=(hw or {}).get((t.topic, p.partition), 0),
                      log_start_offset=0, records=b"x" if (t.topic, p.partition) in records else b"")
        for p in t.partitions]) for t in topics])


def _open(cache: FetchSessionCache, parts: list[tuple[str, int]], now: int = 0, replica_id: int = -1) -> int:
    plan = cache.plan(_request(0, 0, parts, replica_id=replica_id), 12, now, ME)
    return plan.finish(_answer(plan.topics)).session_id


def _names(response: FetchResponse) -> list[tuple[str, int]]:
    return [(t.topic, p.partition_index) for t in response.responses for p in t.partitions]


def test_incremental_answer_keeps_records_moved_watermarks_and_errors_only() -> None:
    cache = FetchSessionCache(10, 100)
    parts = [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    sid = _open(cache, parts)
    plan = cache.plan(_request(sid, 1), 12, 1, ME)
    assert [(t.topic, [p.partition for p in t.partitions]) for t in plan.topics] == [("a", [0, 1]), ("b", [0, 1])]
    answer = _answer(plan.topics, hw={("a", 1): 5}, records=frozenset({("b", 0)}))
    answer.responses[1].partitions[1].error_code = ErrorCode.OFFSET_OUT_OF_RANGE
    kept = plan.finish(answer)
    assert _names(kept) == [("a", 1), ("b", 0), ("b", 1)] and kept.session_id == sid
    # the erring partition's watermark was reset: answered again once the error is gone; a served one
    # moved to the back of the session
    plan = cache.plan(_request(sid, 2), 12, 2, ME)
    assert [(t.topic, p.partition) for t in plan.topics for p in t.partitions] == \
        [("a", 0), ("a", 1), ("b", 1), ("b", 0)]
    assert _names(plan.finish(_answer(plan.topics, hw={("a", 1): 5}))) == [("b", 1)]


def test_epochs_wrap_and_stay_final() -> None:
    assert next_epoch(0) == 1 and next_epoch(2**31 - 1) == 1 and next_epoch(-1) == -1


def test_stale_sessions_are_evicted_first_then_smaller_old_ones() -> None:
    cache = FetchSessionCache(2, 100, rng=random.Random(1))
    small = _open(cache, [("a", 0)], now=0)
    big = _open(cache, [("a", 0), ("a", 1), ("a", 2)], now=0)
    # full: a new session of any size cannot evict sessions younger than the eviction time
    assert _open(cache, [("b", i) for i in range(10)], now=1000) == 0
    # once old (touched again after EVICTION_MS), the smallest goes for a bigger newcomer
    for sid in (small, big):
        session = cache.get(sid)
        assert session is not None
        cache.touch(session, EVICTION_MS + 10)
    assert _open(cache, [("c", 0)], now=EVICTION_MS + 20) == 0  # same size as the smallest: refused
    newcomer = _open(cache, [("c", 0), ("c", 1)], now=EVICTION_MS + 20)
    assert newcomer != 0 and cache.get(small) is None and cache.get(big) is not None
    # a session unused for the eviction time goes first, whatever its size
    late = 3 * EVICTION_MS
    cache.touch(cache.get(newcomer), late)  # type: ignore[arg-type]
    assert _open(cache, [("d", 0)], now=late + 1) != 0 and cache.get(big) is None
    assert cache.evictions == 2 and len(cache) == 2
    assert cache.total_partitions == sum(len(s.partitions) for s in cache.sessions())


def test_a_replica_session_evicts_a_consumer_one_at_once() -> None:
    cache = FetchSessionCache(1, 100)
    consumer = _open(cache, [("a", 0), ("a", 1)], now=0)
    assert _open(cache, [("a", 0)], now=1) == 0
    replica = _open(cache, [("a", 0)], now=1, replica_id=1)
    assert replica != 0 and cache.get(consumer) is None
    assert _open(cache, [("a", 0)] * 1, now=2, replica_id=2) == 0  # privileged and young: kept


def test_caps_on_a_session_and_on_the_cache() -> None:
    cache = FetchSessionCache(10, 3, max_cached_partitions=4)
    assert _open(cache, [("a", i) for i in range(4)]) == 0  # over the per-session cap: no session
    sid = _open(cache, [("a", 0), ("a", 1)])
    assert _open(cache, [("b", 0), ("b", 1), ("b", 2)]) == 0  # the cache would hold 5
    grown = cache.plan(_request(sid, 1, [("a", 2), ("a", 3)]), 12, 0, ME)
    assert grown.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and cache.get(sid) is None
    assert cache.total_partitions == 0


def test_a_session_answers_only_its_principal() -> None:
    cache = FetchSessionCache(10, 10)
    sid = _open(cache, [("a", 0)])
    assert cache.plan(_request(sid, 1), 12, 0, "User:mallory").error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    cache.plan(_request(sid, 0, [("b", 0)]), 12, 0, "User:mallory")  # nor close it with a full fetch
    assert cache.plan(_request(sid, 1), 12, 0, ME).error == ErrorCode.NONE


# A model of the protocol: sessions as (epoch, set of partitions); every request's verdict predicted.
_PARTS = st.tuples(st.sampled_from(["x", "y"]), st.integers(0, 2))
_OPS = st.lists(st.tuples(st.sampled_from(["full", "final", "incremental"]), st.integers(0, 3),
                          st.integers(-1, 4), st.lists(_PARTS, max_size=3), st.lists(_PARTS, max_size=2)),
                max_size=30)


@settings(max_examples=150, deadline=None)
@given(_OPS)
def test_resolution_follows_a_model(ops: list[tuple[str, int, int, list, list]]) -> None:
    cache = FetchSessionCache(3, 5)
    model: dict[int, tuple[int, set[tuple[str, int]]]] = {}
    opened: list[int] = [0]
    for now, (kind, which, epoch_skew, parts, forget) in enumerate(ops):
        sid = opened[which % len(opened)]
        if kind in ("full", "final"):
            plan = cache.plan(_request(sid, 0 if kind == "full" else -1, parts), 12, now, ME)
            model.pop(sid, None)
            assert plan.error == ErrorCode.NONE
            response = plan.finish(_answer(plan.topics))
            assert set(_names(response)) == set(parts)
            if response.session_id:
                assert kind == "full" and len(set(parts)) <= 5
                model[response.session_id] = (1, set(parts))
                opened.append(response.session_id)
            continue
        expected_epoch = model[sid][0] if sid in model else None
        epoch = expected_epoch if expected_epoch is not None else 1
        if epoch_skew < 0:
            epoch += 1  # an incremental epoch that is not the session's
        plan = cache.plan(_request(sid, epoch, parts, forget), 12, now, ME)
        if sid not in model:
            assert plan.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            continue
        if epoch_skew < 0:
            assert plan.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
            continue
        held = (model[sid][1] | set(parts)) - set(forget)
        if len(model[sid][1] | set(parts)) > 5:
            assert plan.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            del model[sid]
            continue
        assert plan.error == ErrorCode.NONE
        response = plan.finish(_answer(plan.topics))
        if not held:
            assert response.session_id == 0
            del model[sid]
            continue
        assert response.session_id == sid
        assert {(t.topic, p.partition) for t in plan.topics for p in t.partitions} == held
        model[sid] = (next_epoch(expected_epoch), held)
    assert {s.id for s in cache.sessions()} == set(model)  # nothing is old enough to be evicted
    for session in cache.sessions():
        assert session.epoch == model[session.id][0]
        assert set(session.partitions) == model[session.id][1]
    assert len(cache) <= 3
    assert cache.total_partitions == sum(len(s.partitions) for s in cache.sessions())


def test_session_partitions_whose_read_was_revoked_are_refused_not_read() -> None:
    cache = FetchSessionCache(10, 10)
    sid = _open(cache, [("a", 0), ("b", 0), ("b", 1)])
    plan = cache.plan(_request(sid, 1), 12, 0, ME, may_read=lambda cached: cached.name != "b")
    assert [t.topic for t in plan.topics] == ["a"]
    answer = plan.finish(_answer(plan.topics))
    assert [(t.topic, p.partition_index, p.error_code) for t in answer.responses for p in t.partitions] == \
        [("b", 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED), ("b", 1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    allowed_again = cache.plan(_request(sid, 2), 12, 0, ME, may_read=lambda cached: True)
    assert _names(allowed_again.finish(_answer(allowed_again.topics))) == [("b", 0), ("b", 1)]


def test_a_throttled_fetch_leaves_its_session_untouched() -> None:
    """KAFKA-6946: the throttled answer is empty and the session keeps what it last told the client, so
    the next incremental fetch still answers the partition whose high watermark moved meanwhile."""
    cache = FetchSessionCache(10, 100)
    sid = _open(cache, [("a", 0), ("a", 1)])
    plan = cache.plan(_request(sid, 1), 12, 1, ME)
    throttled = plan.throttled_response(250)
    assert (throttled.throttle_time_ms, throttled.error_code, throttled.session_id, throttled.responses) == \
        (250, ErrorCode.NONE, sid, [])
    plan = cache.plan(_request(sid, 2), 12, 2, ME)  # the epoch moved on with the throttled fetch, as in Kafka
    assert plan.error == ErrorCode.NONE
    assert _names(plan.finish(_answer(plan.topics, hw={("a", 1): 7}))) == [("a", 1)]
    # had the throttled fetch seen hw 7 too, the session must still answer it (it told the client nothing)
    plan = cache.plan(_request(sid, 3), 12, 3, ME)
    plan.throttled_response(10)
    plan = cache.plan(_request(sid, 4), 12, 4, ME)
    assert _names(plan.finish(_answer(plan.topics, hw={("a", 1): 7, ("a", 0): 3}))) == [("a", 0)]


def test_a_throttled_full_fetch_makes_no_session_and_a_raced_epoch_is_named() -> None:
    cache = FetchSessionCache(10, 100)
    plan = cache.plan(_request(0, 0, [("a", 0)]), 12, 0, ME)
    assert plan.throttled_response(5).session_id == 0 and len(cache) == 0
    sid = _open(cache, [("a", 0)])
    slow = cache.plan(_request(sid, 1), 12, 1, ME)
    cache.plan(_request(sid, 2), 12, 2, ME).finish(_answer([]))  # another fetch advanced the epoch meanwhile
    assert slow.throttled_response(5).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
