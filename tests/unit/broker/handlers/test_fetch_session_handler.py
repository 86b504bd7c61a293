"""Fetch sessions (KIP-227) over the wire: full then incremental fetches, session errors, forgotten topics,
topic ids, what an incremental answer leaves out, and the metrics."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from pybroker.broker.app import BrokerApp
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from pybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.batch import iter_batches
from pybroker.protocol.records.record import Record, build_batch
from tests.unit.broker.conftest import RawClient

ZERO = uuid.UUID(int=0)


def _records(n: int) -> bytes:
    return build_batch([Record(i, 0, b"k", b"v") for i in range(n)], base_timestamp=int(time.time() * 1000))


async def _produce(client: RawClient, topic: str, partition: int, n: int) -> None:
    answer = await client.call(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=partition, records=_records(n))])]), 9)
    assert answer.responses[0].partition_responses[0].error_code == 0


def _fetch(session_id: int, epoch: int, parts: dict[tuple[str, int], int], *,
           forgotten: list[tuple[str, list[int]]] = (), ids: dict[str, uuid.UUID] | None = None) -> FetchRequest:
    topics: dict[str, FetchTopic] = {}
    for (topic, partition), offset in parts.items():
        entry = topics.setdefault(topic, FetchTopic(topic=topic, topic_id=(ids or {}).get(topic, ZERO)))
        entry.partitions.append(FetchPartition(partition=partition, fetch_offset=offset,
                                               partition_max_bytes=1 << 20))
    return FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_id=session_id,
                        session_epoch=epoch, topics=list(topics.values()),
                        forgotten_topics_data=[ForgottenTopic(topic=t, topic_id=(ids or {}).get(t, ZERO),
                                                              partitions=p) for t, p in forgotten])


def _answered(response: object) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(topic, partition) -> (error, high watermark, records in the answer)."""
    out = {}
    for topic in response.responses:  # type: ignore[attr-defined]
        for p in topic.partitions:
            count = sum(h.records_count for _, h in iter_batches(bytes(p.records or b"")))
            out[(topic.topic, p.partition_index)] = (p.error_code, p.high_watermark, count)
    return out


async def test_full_then_incremental_answers_only_what_changed(client: RawClient, app: BrokerApp) -> None:
    await _produce(client, "s", 0, 2)
    full = await client.call(_fetch(0, 0, {("s", 0): 0}), 12)
    assert full.error_code == 0 and full.session_id != 0
    assert _answered(full) == {("s", 0): (0, 2, 2)}
    sid = full.session_id
    # nothing changed: an empty answer, same session
    quiet = await client.call(_fetch(sid, 1, {("s", 0): 2}), 12)
    assert (quiet.error_code, quiet.session_id, _answered(quiet)) == (0, sid, {})
    # new records: the partition comes back (its position is the session's, 2, not re-sent)
    await _produce(client, "s", 0, 3)
    moved = await client.call(_fetch(sid, 2, {}), 12)
    assert _answered(moved) == {("s", 0): (0, 5, 3)}
    # a wrong epoch, an unknown session
    stale = await client.call(_fetch(sid, 2, {}), 12)
    assert (stale.error_code, stale.session_id, stale.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    unknown = await client.call(_fetch(sid + 1, 3, {}), 12)
    assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # the epoch did not advance on errors
    again = await client.call(_fetch(sid, 3, {("s", 0): 5}), 12)
    assert (again.error_code, _answered(again)) == (0, {})
    # forgetting every partition closes the session
    closed = await client.call(_fetch(sid, 4, {}, forgotten=[("s", [0])]), 12)
    assert (closed.error_code, closed.session_id) == (0, 0)
    assert app.state.fetch_sessions.get(sid) is None


async def test_added_and_forgotten_partitions_and_final_epoch(client: RawClient, app: BrokerApp) -> None:
    await _produce(client, "a", 0, 1)
    await _produce(client, "b", 0, 4)
    full = await client.call(_fetch(0, 0, {("a", 0): 0}), 11)
    sid = full.session_id
    # the client sends what moved (a's position) and what is new (b); a has nothing new: left out
    added = await client.call(_fetch(sid, 1, {("a", 0): 1, ("b", 0): 1}), 11)
    assert _answered(added) == {("b", 0): (0, 4, 4)}  # b's whole batch: records are sent batch by batch
    session = app.state.fetch_sessions.get(sid)
    assert session is not None and len(session.partitions) == 2
    await _produce(client, "a", 0, 1)
    await _produce(client, "b", 0, 1)
    forgot = await client.call(_fetch(sid, 2, {("b", 0): 4}, forgotten=[("a", [0])]), 11)
    assert _answered(forgot) == {("b", 0): (0, 5, 1)}
    assert len(session.partitions) == 1
    # a full fetch naming the session closes it; epoch -1 makes no new one
    final = await client.call(_fetch(sid, -1, {("a", 0): 0}), 11)
    assert final.session_id == 0 and app.state.fetch_sessions.get(sid) is None
    assert _answered(final) == {("a", 0): (0, 2, 2)}


async def test_errors_are_always_answered_and_again_once_gone(client: RawClient, app: BrokerApp) -> None:
    await _produce(client, "e", 0, 2)
    full = await client.call(_fetch(0, 0, {("e", 0): 0, ("e", 7): 0}), 12)
    sid = full.session_id
    assert _answered(full)[("e", 7)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # the erring partition is answered on every incremental fetch; the healthy one only when it changes
    for epoch in (1, 2):
        again = await client.call(_fetch(sid, epoch, {("e", 0): 2}), 12)
        assert set(_answered(again)) == {("e", 7)}
    out_of_range = await client.call(_fetch(sid, 3, {("e", 0): 99}), 12)
    assert _answered(out_of_range)[("e", 0)][0] == ErrorCode.OFFSET_OUT_OF_RANGE
    back = await client.call(_fetch(sid, 4, {("e", 0): 2}), 12)
    assert _answered(back)[("e", 0)] == (0, 2, 0)  # answered once more after its error went away


async def test_topic_ids_and_mixed_versions(client: RawClient, app: BrokerApp) -> None:
    await _produce(client, "t", 0, 3)
    meta = await client.call(MetadataRequest(topics=[MetadataRequestTopic(name="t")]), 12)
    ids = {"t": meta.topics[0].topic_id}
    full = await client.call(_fetch(0, 0, {("t", 0): 0}, ids=ids), 13)
    sid = full.session_id
    assert sid != 0 and full.responses[0].topic_id == ids["t"]
    mixed = await client.call(_fetch(sid, 1, {}), 12)
    assert mixed.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    await _produce(client, "t", 0, 1)
    incremental = await client.call(_fetch(sid, 1, {}, ids=ids), 13)
    assert [(t.topic_id, [p.high_watermark for p in t.partitions]) for t in incremental.responses] == \
        [(ids["t"], [4])]
    forget = await client.call(_fetch(sid, 2, {}, forgotten=[("t", [0])], ids=ids), 13)
    assert forget.session_id == 0


async def test_metrics_count_fetches_and_sessions(client: RawClient, app: BrokerApp) -> None:
    from prometheus_client.registry import CollectorRegistry

    from pybroker.broker.metrics.collector import BrokerCollector

    await _produce(client, "m", 0, 1)
    full = await client.call(_fetch(0, 0, {("m", 0): 0}), 12)
    for epoch in (1, 2, 3):
        await client.call(_fetch(full.session_id, epoch, {}), 12)
    await client.call(_fetch(0, -1, {("m", 0): 0}), 12)
    registry = CollectorRegistry()
    registry.register(BrokerCollector(app.state))
    get = registry.get_sample_value
    assert get("pybroker_fetch_session_requests_total", {"kind": "incremental"}) == 3
    assert get("pybroker_fetch_session_requests_total", {"kind": "full"}) == 1
    assert get("pybroker_fetch_session_requests_total", {"kind": "sessionless"}) == 1
    assert get("pybroker_fetch_sessions") == 1
    assert get("pybroker_fetch_session_partitions") == 1


async def test_a_session_outlives_its_connection(client: RawClient, app: BrokerApp) -> None:
    """Kafka's sessions are not tied to connections: a consumer that reconnects goes on incrementally."""
    await _produce(client, "r", 0, 1)
    full = await client.call(_fetch(0, 0, {("r", 0): 0}), 12)
    client.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
    again = RawClient(reader, writer)
    try:
        await _produce(again, "r", 0, 2)
        incremental = await again.call(_fetch(full.session_id, 1, {("r", 0): 1}), 12)
        assert (incremental.session_id, _answered(incremental)) == (full.session_id, {("r", 0): (0, 3, 2)})
    finally:
        again.close()


async def test_a_fetch_throttled_by_its_quota_leaves_the_session_untouched(client: RawClient, app: BrokerApp) -> None:
    """KAFKA-6946 over the wire: the throttled fetch answers nothing (its throttle, its session id) and
    charges nothing; the session is as before, so the next incremental fetch answers the records; a
    throttled full fetch makes no session. (A throttled connection is muted: each step uses a new one.)"""
    from pybroker.broker.security.quota_entities import CONSUMER_BYTE_RATE, entity_of

    async def call(request: FetchRequest) -> Any:
        reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
        fresh = RawClient(reader, writer)
        try:
            return await fresh.call(request, 12)
        finally:
            fresh.close()

    await _produce(client, "q", 0, 2)
    sid = (await call(_fetch(0, 0, {("q", 0): 2}))).session_id
    assert sid != 0
    await _produce(client, "q", 0, 50)
    quotas = app.state.quotas
    quotas.quotas = {entity_of([("client-id", None)]): {CONSUMER_BYTE_RATE: 1.0}}  # any answer is over it
    sessions = len(app.state.fetch_sessions)
    throttled = await call(_fetch(sid, 1, {}))
    assert throttled.throttle_time_ms > 0
    assert (throttled.error_code, throttled.session_id, throttled.responses) == (0, sid, [])
    full = await call(_fetch(0, 0, {("q", 0): 0}))
    assert (full.session_id, full.responses) == (0, []) and full.throttle_time_ms > 0
    assert len(app.state.fetch_sessions) == sessions
    quotas.quotas = {}
    again = await call(_fetch(sid, 2, {}))
    assert (again.error_code, again.session_id, _answered(again)) == (0, sid, {("q", 0): (0, 52, 50)})
