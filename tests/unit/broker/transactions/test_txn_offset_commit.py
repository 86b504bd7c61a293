"""TxnOffsetCommit through the in-process broker, and transactional offsets across restarts.

Most tests play the transaction coordinator's part themselves, so the group side is tested alone: its
verification is switched off (`unverified`) and markers are written as it writes them
(`Log.append_marker`, then `GroupService.complete_transaction`). Restarts replay `__consumer_offsets`
from disk: a committed transaction's offsets come back committed, an aborted one's are gone, and an
open one's stay pending until its marker arrives. The last tests go through the real transaction
coordinator (InitProducerId, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) when the build has one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.broker.groups.offsets_topic import OFFSETS_TOPIC
from pybroker.config.broker_config import BrokerConfig
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pybroker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from pybroker.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from pybroker.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from pybroker.protocol.records.batch import iter_batches
from tests.unit.broker.conftest import RawClient

TOPIC = "t"
GROUP = "eos-group"
UNSTABLE = ErrorCode.UNSTABLE_OFFSET_COMMIT


@asynccontextmanager
async def broker(data: Path, *, verified: bool = False) -> AsyncIterator[tuple[BrokerApp, RawClient]]:
    """A broker over `data`; unless `verified`, TxnOffsetCommit skips the transaction coordinator's check."""
    app = BrokerApp(BrokerConfig.load({
        "log.dirs": str(data), "listeners": "PLAINTEXT://127.0.0.1:0",
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3",
        "transaction.state.log.num.partitions": "3"}))
    await app.start()
    transactions = getattr(app.state, "transactions", None)
    if transactions is not None and not verified:
        transactions.check_txn_offset_commit = lambda *args, **kwargs: ErrorCode.NONE
    reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
    client = RawClient(reader, writer)
    try:
        for _ in range(500):  # the offsets topic's partitions are replayed after start
            if not app.state.groups.coordinator.loading:
                break
            await asyncio.sleep(0.01)
        yield app, client
    finally:
        client.close()
        await app.stop()


async def create_topic(client: RawClient) -> None:
    answer = await client.call(CreateTopicsRequest(topics=[
        CreatableTopic(name=TOPIC, num_partitions=4, replication_factor=1)], timeout_ms=5000), 4)
    assert answer.topics[0].error_code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)


async def txn_commit(client: RawClient, pid: int, offsets: dict[int, int], *, epoch: int = 0, version: int = 3,
                     group: str = GROUP) -> dict[int, int]:
    answer = await client.call(TxnOffsetCommitRequest(
        transactional_id=f"tx-{pid}", group_id=group, producer_id=pid, producer_epoch=epoch, topics=[
            TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[
                TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="m")
                for p, o in offsets.items()])]), version)
    return {p.partition_index: p.error_code for t in answer.topics for p in t.partitions}


async def plain_commit(client: RawClient, offsets: dict[int, int]) -> None:
    answer = await client.call(OffsetCommitRequest(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
                                                   topics=[OffsetCommitRequestTopic(name=TOPIC, partitions=[
                                                       OffsetCommitRequestPartition(partition_index=p,
                                                                                    committed_offset=o)
                                                       for p, o in offsets.items()])]), 8)
    assert all(p.error_code == 0 for t in answer.topics for p in t.partitions)


async def fetch(client: RawClient, partitions: list[int], *, version: int = 8, stable: bool = True,
                group: str = GROUP) -> dict[int, tuple[int, int]]:
    """partition -> (committed offset, error code)."""
    if version >= 8:
        answer = await client.call(OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=group, topics=[
            OffsetFetchRequestTopics(name=TOPIC, partition_indexes=partitions)])], require_stable=stable), version)
        assert answer.groups[0].error_code == 0
        topics = answer.groups[0].topics
    else:
        answer = await client.call(OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequestTopic(name=TOPIC, partition_indexes=partitions)], require_stable=stable), version)
        assert answer.error_code == 0
        topics = answer.topics
    return {p.partition_index: (p.committed_offset, p.error_code) for t in topics for p in t.partitions}


def write_marker(app: BrokerApp, pid: int, commit: bool, *, epoch: int = 0, group: str = GROUP) -> None:
    """What the transaction coordinator does for the group's partition when the transaction ends."""
    state = app.state
    partition = state.groups.coordinator.partition_for(group)
    partition_log = state.logs.get_log(OFFSETS_TOPIC, partition)
    assert partition_log is not None
    partition_log.append_marker(pid, epoch, 0, commit, now_ms=state.clock_ms())
    state.groups.complete_transaction(partition, pid, commit)


@pytest.mark.parametrize("version", range(6))
async def test_every_version_commits_pending_offsets(tmp_path: Path, version: int) -> None:
    async with broker(tmp_path / "data") as (app, client):
        await create_topic(client)
        assert await txn_commit(client, 1000, {0: 10, 1: 11}, version=version) == {0: 0, 1: 0}
        assert await fetch(client, [0, 1]) == {0: (-1, UNSTABLE), 1: (-1, UNSTABLE)}
        assert await fetch(client, [0, 1], version=7) == {0: (-1, UNSTABLE), 1: (-1, UNSTABLE)}
        assert await fetch(client, [0, 1], stable=False) == {0: (-1, 0), 1: (-1, 0)}
        assert await fetch(client, [0, 1], version=6) == {0: (-1, 0), 1: (-1, 0)}  # no require_stable before v7
        write_marker(app, 1000, commit=True)
        assert await fetch(client, [0, 1]) == {0: (10, 0), 1: (11, 0)}


async def test_the_batch_on_disk_is_transactional_under_the_producer(tmp_path: Path) -> None:
    async with broker(tmp_path / "data") as (app, client):
        await create_topic(client)
        await txn_commit(client, 4242, {0: 1, 1: 2}, epoch=7)
        partition_log = app.state.logs.get_log(OFFSETS_TOPIC, app.state.groups.coordinator.partition_for(GROUP))
        assert partition_log is not None
        region = partition_log.read(0, 1 << 20).region
        assert region is not None
        headers = [h for _, h in iter_batches(region.read_bytes())]
        assert [(h.is_transactional, h.is_control, h.producer_id, h.producer_epoch, h.records_count)
                for h in headers] == [(True, False, 4242, 7, 2)]
        assert partition_log.last_stable_offset == 0  # the transaction is open in the partition


async def test_unknown_partitions_and_an_empty_group_id(tmp_path: Path) -> None:
    async with broker(tmp_path / "data") as (_, client):
        await create_topic(client)
        assert await txn_commit(client, 1, {0: 1, 9: 1}) == {0: 0, 9: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert await txn_commit(client, 1, {0: 1}, group="") == {0: ErrorCode.INVALID_GROUP_ID}


async def test_a_loading_partition_is_coordinator_not_available_before_v2(tmp_path: Path) -> None:
    async with broker(tmp_path / "data") as (app, client):
        await create_topic(client)
        coordinator = app.state.groups.coordinator
        coordinator.begin_loading([coordinator.partition_for(GROUP)])
        assert await txn_commit(client, 1, {0: 1}, version=1) == {0: ErrorCode.COORDINATOR_NOT_AVAILABLE}
        assert await txn_commit(client, 1, {0: 1}, version=2) == {0: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
        coordinator.finish_loading(coordinator.partition_for(GROUP), {}, {}, 0)
        assert await txn_commit(client, 1, {0: 1}, version=2) == {0: 0}


async def test_a_stale_epoch_is_refused_and_later_transactions_of_the_same_epoch_go_on(tmp_path: Path) -> None:
    async with broker(tmp_path / "data") as (app, client):
        await create_topic(client)
        assert await txn_commit(client, 77, {0: 1}, epoch=5) == {0: 0}
        assert await txn_commit(client, 77, {1: 1}, epoch=5) == {1: 0}  # the same transaction again
        assert await txn_commit(client, 77, {0: 2}, epoch=4) == {0: ErrorCode.INVALID_PRODUCER_EPOCH}
        write_marker(app, 77, commit=True, epoch=5)
        assert await txn_commit(client, 77, {0: 3}, epoch=5) == {0: 0}  # transactions v1 keep the epoch
        write_marker(app, 77, commit=True, epoch=5)
        assert await fetch(client, [0, 1]) == {0: (3, 0), 1: (1, 0)}


async def test_restart_replays_markers_and_keeps_an_open_transaction_pending(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with broker(data) as (app, client):
        await create_topic(client)
        await plain_commit(client, {0: 5})
        await txn_commit(client, 1, {0: 10, 1: 11})
        await txn_commit(client, 2, {2: 12})
        write_marker(app, 1, commit=True)
        write_marker(app, 2, commit=False)
        await txn_commit(client, 4, {3: 40})
        await plain_commit(client, {3: 41})  # written after the transactional one: it wins the commit
        write_marker(app, 4, commit=True)
        await txn_commit(client, 3, {0: 30})  # still open at the restart
        before = await fetch(client, [0, 1, 2, 3], stable=False)
    assert before == {0: (10, 0), 1: (11, 0), 2: (-1, 0), 3: (41, 0)}
    async with broker(data) as (app, client):
        assert await fetch(client, [0, 1, 2, 3], stable=False) == before
        assert await fetch(client, [0, 1, 2, 3]) == {0: (-1, UNSTABLE), 1: (11, 0), 2: (-1, 0), 3: (41, 0)}
        write_marker(app, 3, commit=True)  # the transaction coordinator completes it after the restart
        assert await fetch(client, [0]) == {0: (30, 0)}
    async with broker(data) as (_, client):
        assert await fetch(client, [0, 1, 2, 3]) == {0: (30, 0), 1: (11, 0), 2: (-1, 0), 3: (41, 0)}


async def test_restart_then_abort_marker_drops_the_open_transaction(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with broker(data) as (_, client):
        await create_topic(client)
        await plain_commit(client, {0: 5})
        await txn_commit(client, 9, {0: 10})
    async with broker(data) as (app, client):
        assert await fetch(client, [0]) == {0: (-1, UNSTABLE)}
        write_marker(app, 9, commit=False)
        assert await fetch(client, [0]) == {0: (5, 0)}
    async with broker(data) as (_, client):
        assert await fetch(client, [0]) == {0: (5, 0)}


# -- through the transaction coordinator ---------------------------------------------------------------
def _has_transaction_coordinator() -> bool:
    from pybroker.broker.dispatch import load_handlers
    from pybroker.protocol.api_keys import ApiKey

    return ApiKey.END_TXN in load_handlers()


needs_coordinator = pytest.mark.skipif(not _has_transaction_coordinator(), reason="no transaction coordinator")


async def begin(client: RawClient, transactional_id: str) -> tuple[int, int]:
    from pybroker.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
    from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest

    init = await client.call(InitProducerIdRequest(transactional_id=transactional_id,
                                                    transaction_timeout_ms=60_000), 4)
    assert init.error_code == 0
    added = await client.call(AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=init.producer_id,
                                                     producer_epoch=init.producer_epoch, group_id=GROUP), 3)
    assert added.error_code == 0
    return init.producer_id, init.producer_epoch


async def end(client: RawClient, transactional_id: str, pid: int, epoch: int, commit: bool) -> None:
    from pybroker.protocol.messages.end_txn import EndTxnRequest

    ended = await client.call(EndTxnRequest(transactional_id=transactional_id, producer_id=pid,
                                            producer_epoch=epoch, committed=commit), 3)
    assert ended.error_code == 0


async def wait_stable(client: RawClient, partitions: list[int]) -> dict[int, tuple[int, int]]:
    """OffsetFetch with require_stable until no partition is unstable (the markers are written after EndTxn)."""
    for _ in range(200):
        found = await fetch(client, partitions)
        if all(code != UNSTABLE for _, code in found.values()):
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"still unstable: {found}")


@needs_coordinator
async def test_commit_and_abort_through_the_transaction_coordinator(tmp_path: Path) -> None:
    async with broker(tmp_path / "data", verified=True) as (_, client):
        await create_topic(client)
        pid, epoch = await begin(client, "tx-a")
        tx = TxnOffsetCommitRequest(transactional_id="tx-a", group_id=GROUP, producer_id=pid, producer_epoch=epoch,
                                    topics=[TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[
                                        TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=17,
                                                                        committed_metadata="")])])
        assert (await client.call(tx, 3)).topics[0].partitions[0].error_code == 0
        assert await fetch(client, [0]) == {0: (-1, UNSTABLE)}
        await end(client, "tx-a", pid, epoch, commit=True)
        assert await wait_stable(client, [0]) == {0: (17, 0)}

        pid, epoch = await begin(client, "tx-a")
        tx.producer_id, tx.producer_epoch = pid, epoch
        tx.topics[0].partitions[0].committed_offset = 99
        assert (await client.call(tx, 3)).topics[0].partitions[0].error_code == 0
        await end(client, "tx-a", pid, epoch, commit=False)
        assert await wait_stable(client, [0]) == {0: (17, 0)}


@needs_coordinator
async def test_a_commit_outside_a_transaction_is_refused(tmp_path: Path) -> None:
    async with broker(tmp_path / "data", verified=True) as (_, client):
        await create_topic(client)
        codes = await txn_commit(client, 123, {0: 1})  # no such producer for "tx-123"
        assert codes[0] not in (ErrorCode.NONE, ErrorCode.UNKNOWN_SERVER_ERROR)
        assert await fetch(client, [0]) == {0: (-1, 0)}


@needs_coordinator
async def test_v5_adds_the_groups_partition_to_the_transaction_itself(tmp_path: Path) -> None:
    """Transactions v2 (KIP-890): no AddOffsetsToTxn; TxnOffsetCommit v5 waits while the coordinator adds it."""
    from pybroker.protocol.messages.end_txn import EndTxnRequest
    from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest

    async with broker(tmp_path / "data", verified=True) as (_, client):
        await create_topic(client)
        init = await client.call(InitProducerIdRequest(transactional_id="tx-v5", transaction_timeout_ms=60_000), 5)
        assert init.error_code == 0
        tx = TxnOffsetCommitRequest(transactional_id="tx-v5", group_id=GROUP, producer_id=init.producer_id,
                                    producer_epoch=init.producer_epoch, topics=[TxnOffsetCommitRequestTopic(
                                        name=TOPIC, partitions=[TxnOffsetCommitRequestPartition(
                                            partition_index=1, committed_offset=55, committed_metadata=None)])])
        assert (await client.call(tx, 4)).topics[0].partitions[0].error_code == ErrorCode.TRANSACTION_ABORTABLE
        assert (await client.call(tx, 5)).topics[0].partitions[0].error_code == 0
        assert await fetch(client, [1]) == {1: (-1, UNSTABLE)}
        ended = await client.call(EndTxnRequest(transactional_id="tx-v5", producer_id=init.producer_id,
                                                producer_epoch=init.producer_epoch, committed=True), 5)
        assert ended.error_code == 0
        assert await wait_stable(client, [1]) == {1: (55, 0)}
