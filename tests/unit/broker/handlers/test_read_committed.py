"""Fetch and ListOffsets under read_committed: the LSO, aborted transactions, long-polls woken by markers."""

from __future__ import annotations

import time

from pybroker.broker.app import BrokerApp
from pybroker.protocol.messages.fetch import AbortedTransaction, FetchPartition, FetchRequest, FetchTopic
from pybroker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from pybroker.protocol.records.batch import iter_batches, parse_header
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage.log import Log
from tests.unit.broker.conftest import RawClient
from tests.unit.broker.waiting import until

NOW = int(time.time() * 1000)


def _log(app: BrokerApp, topic: str) -> Log:
    app.state.logs.create_topic(topic, 1, {})
    log = app.state.logs.get_log(topic, 0)
    assert log is not None
    return log


def _append(log: Log, pid: int = -1, seq: int = -1, n: int = 2, *, transactional: bool = True,
            ts: int = NOW) -> None:
    data = bytearray(build_batch([Record(i, i, b"k", b"v%d" % i) for i in range(n)], base_timestamp=ts,
                                 producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq,
                                 is_transactional=transactional and pid >= 0))
    log.append(data, [(0, parse_header(data))], now_ms=NOW)


def _fetch(topic: str, offset: int = 0, *, isolation: int = 1, max_wait: int = 0, min_bytes: int = 0,
           max_bytes: int = 1 << 20) -> FetchRequest:
    return FetchRequest(max_wait_ms=max_wait, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=isolation,
                        topics=[FetchTopic(topic=topic, partitions=[
                            FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)])])


def _spans(records: object) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for _, h in iter_batches(bytes(records or b""))]  # type: ignore[call-overload]


async def test_read_committed_stops_at_the_lso_and_lists_aborts(client: RawClient, app: BrokerApp) -> None:
    log = _log(app, "rc")
    _append(log, 7, 0)                       # 0-1: producer 7's transaction
    log.append_marker(7, 0, 0, False, now_ms=NOW)  # 2: aborted
    _append(log)                             # 3-4 plain
    _append(log, 8, 0)                       # 5-6: producer 8, still open
    _append(log)                             # 7-8 plain, after the open transaction
    committed = (await client.call(_fetch("rc"), 12)).responses[0].partitions[0]
    assert (committed.high_watermark, committed.last_stable_offset) == (9, 5)
    assert _spans(committed.records) == [(0, 1), (2, 2), (3, 4)]
    assert committed.aborted_transactions == [AbortedTransaction(producer_id=7, first_offset=0)]
    uncommitted = (await client.call(_fetch("rc", isolation=0), 12)).responses[0].partitions[0]
    assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (9, 5)
    assert _spans(uncommitted.records)[-1] == (7, 8) and uncommitted.aborted_transactions is None
    at_lso = (await client.call(_fetch("rc", offset=5), 12)).responses[0].partitions[0]
    assert (at_lso.error_code, _spans(at_lso.records), at_lso.aborted_transactions) == (0, [], [])


async def test_aborted_list_is_bounded_by_the_bytes_returned(client: RawClient, app: BrokerApp) -> None:
    log = _log(app, "bound")
    _append(log, 7, 0)                             # 0-1
    log.append_marker(7, 0, 0, False, now_ms=NOW)  # 2
    _append(log, 8, 0, n=50)                       # 3-52
    log.append_marker(8, 0, 0, False, now_ms=NOW)  # 53
    first = log.read(0, 1 << 20).region
    assert first is not None
    small = next(h for _, h in iter_batches(first.read_bytes())).size
    part = (await client.call(_fetch("bound", max_bytes=small), 12)).responses[0].partitions[0]
    assert _spans(part.records) == [(0, 1)]
    assert part.aborted_transactions == [AbortedTransaction(producer_id=7, first_offset=0)]
    part = (await client.call(_fetch("bound", offset=3), 12)).responses[0].partitions[0]
    assert part.aborted_transactions == [AbortedTransaction(producer_id=8, first_offset=3)]


async def test_long_poll_wakes_when_a_marker_moves_the_lso(client: RawClient, app: BrokerApp) -> None:
    log = _log(app, "wake")
    _append(log, 7, 0)
    await client.send(_fetch("wake", max_wait=30_000, min_bytes=1), 12)
    await until(lambda: len(app.state.purgatory) == 1, "the fetch was never parked")
    log.append_marker(7, 0, 0, True, now_ms=NOW)
    app.state.purgatory.notify(("wake", 0))
    # woken by the marker, well before its 30 s max wait (a busy machine may take seconds, not 30)
    part = (await client.receive(1, 12, timeout=20)).responses[0].partitions[0]
    assert part.last_stable_offset == 3 and _spans(part.records) == [(0, 1), (2, 2)]
    assert part.aborted_transactions == []


async def test_list_offsets_latest_is_the_lso_under_read_committed(client: RawClient, app: BrokerApp) -> None:
    log = _log(app, "lo")
    _append(log, ts=1000)                      # 0-1
    _append(log, 7, 0, ts=5000)                # 2-3 open
    _append(log, ts=9000)                      # 4-5

    async def lookup(timestamp: int, isolation: int, version: int = 7) -> tuple[int, int]:
        request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[ListOffsetsTopic(
            name="lo", partitions=[ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
        part = (await client.call(request, version)).topics[0].partitions[0]
        return part.offset, part.timestamp

    assert await lookup(-1, 1) == (2, -1)
    assert await lookup(-1, 0) == (6, -1)
    assert await lookup(-1, 1, version=1) == (6, -1)  # v0-1 carry no isolation level
    assert await lookup(-2, 1) == (0, -1)
    assert await lookup(3000, 1) == (-1, -1)  # found at 2: not below the LSO
    assert await lookup(3000, 0) == (2, 5000)
    assert await lookup(-3, 1) == (-1, -1)    # the largest timestamp is past the LSO
    log.append_marker(7, 0, 0, True, now_ms=NOW)
    assert await lookup(-1, 1) == (7, -1)
    assert await lookup(-3, 1) == (6, NOW)     # the marker carries the largest timestamp now
