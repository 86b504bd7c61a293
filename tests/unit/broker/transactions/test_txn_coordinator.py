"""The transaction coordinator's rules over fakes: fencing, ends, timeouts, expiry, KIP-360, KIP-890, KIP-939."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from pybroker.broker.transactions.metadata import MAX_EPOCH, NO_TIMEOUT_MS, TV_2, TxnMetadata
from pybroker.broker.transactions.state_machine import TxnState
from pybroker.protocol.errors import ErrorCode
from tests.unit.broker.transactions.txn_fakes import make_coordinator

S = TxnState
E = ErrorCode
TP = ("t", 0)
TP2 = ("t", 1)


async def test_first_init_gives_a_new_id_at_epoch_0_and_writes_it() -> None:
    co, txn_log, _, _ = make_coordinator()
    result = await co.init_producer_id("a", 60_000)
    assert (result.error, result.producer_id, result.producer_epoch) == (E.NONE, 1000, 0)
    meta = txn_log.last("a")
    assert meta is not None and meta.state is S.EMPTY and meta.producer_epoch == 0
    assert txn_log.records[0][0] == co.partition_for("a")


async def test_a_second_producer_fences_the_first() -> None:
    co, _, _, _ = make_coordinator()
    first = await co.init_producer_id("a", 60_000)
    second = await co.init_producer_id("a", 60_000)
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    assert await co.add_partitions("a", first.producer_id, 0, frozenset({TP})) is E.PRODUCER_FENCED
    assert (await co.end_txn("a", first.producer_id, 0, True)).error is E.PRODUCER_FENCED
    assert co.check_produce("a", first.producer_id, 0, *TP, 9) is E.INVALID_PRODUCER_EPOCH


async def test_commit_writes_prepare_then_markers_then_complete() -> None:
    co, txn_log, markers, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    assert await co.add_partitions("a", p.producer_id, 0, frozenset({TP, TP2})) is E.NONE
    assert co.get("a").state is S.ONGOING  # type: ignore[union-attr]
    assert co.check_produce("a", p.producer_id, 0, *TP, 9) is E.NONE
    end = await co.end_txn("a", p.producer_id, 0, True)
    assert end.error is E.NONE
    assert txn_log.last("a").state is S.PREPARE_COMMIT  # type: ignore[union-attr]
    await co.wait_idle()
    assert markers.calls == [(p.producer_id, 0, 0, True, [TP, TP2])]
    meta = co.get("a")
    assert meta is not None and meta.state is S.COMPLETE_COMMIT and not meta.partitions
    assert [m.state for _, _, m in txn_log.records if m] == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT,
                                                             S.COMPLETE_COMMIT]


async def test_end_retried_after_it_completed_is_answered_none_and_the_opposite_is_invalid() -> None:
    co, _, _, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    await co.add_partitions("a", p.producer_id, 0, frozenset({TP}))
    await co.end_txn("a", p.producer_id, 0, False)
    await co.wait_idle()
    assert (await co.end_txn("a", p.producer_id, 0, False)).error is E.NONE
    assert (await co.end_txn("a", p.producer_id, 0, True)).error is E.INVALID_TXN_STATE


async def test_commit_with_nothing_open_is_invalid_txn_state() -> None:
    co, _, _, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    assert (await co.end_txn("a", p.producer_id, 0, True)).error is E.INVALID_TXN_STATE


async def test_unknown_ids_and_producers_are_invalid_producer_id_mapping() -> None:
    co, _, _, _ = make_coordinator()
    assert await co.add_partitions("nobody", 1, 0, frozenset({TP})) is E.INVALID_PRODUCER_ID_MAPPING
    p = await co.init_producer_id("a", 60_000)
    assert await co.add_partitions("a", p.producer_id + 1, 0, frozenset({TP})) is E.INVALID_PRODUCER_ID_MAPPING
    assert (await co.end_txn("nobody", 1, 0, True)).error is E.INVALID_PRODUCER_ID_MAPPING
    assert co.check_produce("nobody", 1, 0, *TP, 9) is E.INVALID_PRODUCER_ID_MAPPING


async def test_init_with_a_transaction_open_aborts_it_first() -> None:
    co, txn_log, markers, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    await co.add_partitions("a", p.producer_id, 0, frozenset({TP}))
    result = await co.init_producer_id("a", 60_000)
    assert result.error is E.CONCURRENT_TRANSACTIONS
    assert txn_log.last("a").state is S.PREPARE_ABORT  # type: ignore[union-attr]
    await co.wait_idle()
    assert markers.calls == [(p.producer_id, 1, 0, False, [TP])]  # aborted with the epoch fenced
    retry = await co.init_producer_id("a", 60_000)
    assert (retry.error, retry.producer_epoch) == (E.NONE, 2)


async def test_transaction_timeout_is_checked_against_the_maximum() -> None:
    co, _, _, _ = make_coordinator(max_timeout_ms=1000)
    assert (await co.init_producer_id("a", 1001)).error is E.INVALID_TRANSACTION_TIMEOUT
    assert (await co.init_producer_id("a", 0)).error is E.INVALID_TRANSACTION_TIMEOUT
    assert (await co.init_producer_id("a", 1000)).error is E.NONE
    assert (await co.init_producer_id("", 1000)).error is E.INVALID_REQUEST


async def test_kip_360_a_producer_with_its_id_bumps_and_a_retry_gets_the_same_epoch() -> None:
    co, _, _, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    bumped = await co.init_producer_id("a", 60_000, p.producer_id, 0)
    assert (bumped.error, bumped.producer_id, bumped.producer_epoch) == (E.NONE, p.producer_id, 1)
    retry = await co.init_producer_id("a", 60_000, p.producer_id, 0)  # the answer was lost: same epoch again
    assert (retry.error, retry.producer_epoch) == (E.NONE, 1)
    assert (await co.init_producer_id("a", 60_000, p.producer_id + 5, 0)).error is E.PRODUCER_FENCED
    other = await co.init_producer_id("a", 60_000)  # a new producer: the epoch moves on, last is forgotten
    assert other.producer_epoch == 2
    assert (await co.init_producer_id("a", 60_000, p.producer_id, 1)).error is E.PRODUCER_FENCED
    assert (await co.init_producer_id("a", 60_000, p.producer_id, -1)).error is E.INVALID_REQUEST


async def test_an_exhausted_epoch_moves_the_id_to_a_new_producer_id() -> None:
    co, _, _, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    entry = co.entries["a"]
    entry.meta = TxnMetadata("a", p.producer_id, MAX_EPOCH - 1, 60_000, S.EMPTY, 0)
    rotated = await co.init_producer_id("a", 60_000, p.producer_id, MAX_EPOCH - 1)
    assert rotated.error is E.NONE and rotated.producer_id != p.producer_id and rotated.producer_epoch == 0
    # the retry of that rotation, with the old id and exhausted epoch, is recognised (not fenced)
    again = await co.init_producer_id("a", 60_000, p.producer_id, MAX_EPOCH - 1)
    assert again.error is E.NONE and again.producer_id == rotated.producer_id


async def test_a_transaction_past_its_timeout_is_aborted_with_its_producer_fenced() -> None:
    co, _, markers, clock = make_coordinator()
    p = await co.init_producer_id("a", 1000)
    await co.add_partitions("a", p.producer_id, 0, frozenset({TP}))
    clock.now += 1000
    assert await co.abort_timed_out() == []
    clock.now += 1
    assert await co.abort_timed_out() == ["a"]
    await co.wait_idle()
    assert markers.calls == [(p.producer_id, 1, 0, False, [TP])]
    assert co.get("a").state is S.COMPLETE_ABORT  # type: ignore[union-attr]
    assert (await co.end_txn("a", p.producer_id, 0, True)).error is E.PRODUCER_FENCED


async def test_idle_ids_expire_with_a_tombstone_but_not_while_a_transaction_is_open() -> None:
    co, txn_log, _, clock = make_coordinator(id_expiration_ms=5000)
    await co.init_producer_id("idle", 60_000)
    p = await co.init_producer_id("busy", 600_000)
    await co.add_partitions("busy", p.producer_id, 0, frozenset({TP}))
    clock.now += 5000
    assert await co.expire_idle() == ["idle"]
    assert co.get("idle") is None and co.get("busy") is not None
    assert txn_log.records[-1][1:] == ("idle", None)


async def test_a_failed_state_write_is_not_adopted() -> None:
    co, txn_log, _, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    txn_log.fail_with = E.KAFKA_STORAGE_ERROR
    assert await co.add_partitions("a", p.producer_id, 0, frozenset({TP})) is E.COORDINATOR_NOT_AVAILABLE
    assert co.get("a").state is S.EMPTY  # type: ignore[union-attr]


async def test_requests_meanwhile_a_write_is_in_flight_get_concurrent_transactions() -> None:
    co, txn_log, _, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    txn_log.gate = asyncio.Event()
    adding = asyncio.ensure_future(co.add_partitions("a", p.producer_id, 0, frozenset({TP})))
    await asyncio.sleep(0)
    assert await co.add_partitions("a", p.producer_id, 0, frozenset({TP2})) is E.CONCURRENT_TRANSACTIONS
    assert (await co.end_txn("a", p.producer_id, 0, True)).error is E.CONCURRENT_TRANSACTIONS
    txn_log.gate.set()
    assert await adding is E.NONE


async def test_produce_verification_per_version() -> None:
    co, _, _, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    assert co.check_produce("a", p.producer_id, 0, *TP, 10) is E.INVALID_TXN_STATE
    assert co.check_produce("a", p.producer_id, 0, *TP, 11) is E.TRANSACTION_ABORTABLE
    adding = co.check_produce("a", p.producer_id, 0, *TP, 12)
    assert inspect.isawaitable(adding)
    assert await adding is E.NONE
    assert co.check_produce("a", p.producer_id, 0, *TP, 11) is E.NONE
    assert co.get("a").partitions == {TP}  # type: ignore[union-attr]


async def test_verification_disabled_lets_unadded_partitions_through() -> None:
    co, _, _, _ = make_coordinator(partition_verification=False)
    p = await co.init_producer_id("a", 60_000)
    assert co.check_produce("a", p.producer_id, 0, *TP, 9) is E.NONE


async def test_txn_offset_commit_needs_the_offsets_partition_added() -> None:
    co, _, _, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    assert co.check_txn_offset_commit("a", p.producer_id, 0, "g", 3) is E.INVALID_TXN_STATE
    assert co.check_txn_offset_commit("a", p.producer_id, 0, "g", 3, api_version=4) is E.TRANSACTION_ABORTABLE
    await co.add_partitions("a", p.producer_id, 0, frozenset({("__consumer_offsets", 3)}))
    assert co.check_txn_offset_commit("a", p.producer_id, 0, "g", 3) is E.NONE
    assert co.check_txn_offset_commit("a", p.producer_id, 1, "g", 3) is E.PRODUCER_FENCED


async def test_transactions_v2_bump_the_epoch_at_every_end() -> None:
    co, _, markers, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    assert await co.check_produce("a", p.producer_id, 0, *TP, 12) is E.NONE  # type: ignore[misc]
    end = await co.end_txn("a", p.producer_id, 0, True, TV_2)
    assert (end.error, end.producer_id, end.producer_epoch) == (E.NONE, p.producer_id, 1)
    await co.wait_idle()
    assert markers.calls == [(p.producer_id, 1, 0, True, [TP])]  # the marker carries the bumped epoch
    retry = await co.end_txn("a", p.producer_id, 0, True, TV_2)  # a retry with the old epoch
    assert (retry.error, retry.producer_epoch) == (E.NONE, 1)
    # an abort with nothing open is allowed in v2 and bumps the epoch too
    abort = await co.end_txn("a", p.producer_id, 1, False, TV_2)
    assert (abort.error, abort.producer_epoch) == (E.NONE, 2)
    await co.wait_idle()
    assert (await co.end_txn("a", p.producer_id, 2, True, TV_2)).error is E.INVALID_TXN_STATE


async def test_transactions_v2_an_exhausted_epoch_ends_on_a_new_producer_id() -> None:
    co, _, _, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    co.entries["a"].meta = TxnMetadata("a", p.producer_id, MAX_EPOCH - 1, 60_000, S.ONGOING, 0,
                                       frozenset({TP}), start_ms=0)
    end = await co.end_txn("a", p.producer_id, MAX_EPOCH - 1, True, TV_2)
    assert end.error is E.NONE and end.producer_id != p.producer_id and end.producer_epoch == 0
    await co.wait_idle()
    assert co.get("a").producer_id == end.producer_id  # type: ignore[union-attr]


async def test_two_phase_commit_needs_the_broker_setting() -> None:
    co, _, _, _ = make_coordinator()
    result = await co.init_producer_id("a", 60_000, enable_2pc=True)
    assert result.error is E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


async def test_two_phase_commit_transactions_never_time_out() -> None:
    co, _, _, clock = make_coordinator(two_phase_commit_enabled=True)
    p = await co.init_producer_id("a", 5, enable_2pc=True)
    assert co.get("a").timeout_ms == NO_TIMEOUT_MS  # type: ignore[union-attr]
    await co.add_partitions("a", p.producer_id, 0, frozenset({TP}))
    clock.now += 10**9
    assert await co.abort_timed_out() == []


async def test_keep_prepared_hands_the_open_transaction_to_a_new_client_who_commits_it() -> None:
    co, txn_log, markers, _ = make_coordinator(two_phase_commit_enabled=True)
    p = await co.init_producer_id("a", 60_000, enable_2pc=True)
    await co.add_partitions("a", p.producer_id, 0, frozenset({TP}))
    # the producer "crashes"; a new one resumes the prepared transaction
    resumed = await co.init_producer_id("a", 60_000, enable_2pc=True, keep_prepared=True)
    assert resumed.error is E.NONE
    assert (resumed.ongoing_producer_id, resumed.ongoing_producer_epoch) == (p.producer_id, 0)
    assert resumed.producer_id != p.producer_id and resumed.producer_epoch == 0
    meta = co.get("a")
    assert meta is not None and meta.state is S.ONGOING and meta.partitions == {TP}
    # the old client is fenced everywhere; the new one may not add partitions, only end
    assert co.check_produce("a", p.producer_id, 0, *TP, 9) is E.INVALID_PRODUCER_EPOCH
    assert await co.add_partitions("a", p.producer_id, 0, frozenset({TP2})) is E.PRODUCER_FENCED
    assert await co.add_partitions("a", resumed.producer_id, 0, frozenset({TP2})) is \
        E.INVALID_PRODUCER_ID_MAPPING
    assert (await co.end_txn("a", p.producer_id, 0, True)).error is E.PRODUCER_FENCED
    # a restart in between keeps the hand-over
    assert txn_log.last("a").next_producer_id == resumed.producer_id  # type: ignore[union-attr]
    end = await co.end_txn("a", resumed.producer_id, 0, True)
    assert end.error is E.NONE
    await co.wait_idle()
    # markers keep the transaction's own id, with its epoch bumped to fence the old client's late writes
    assert markers.calls == [(p.producer_id, 1, 0, True, [TP])]
    meta = co.get("a")
    assert meta is not None and meta.state is S.COMPLETE_COMMIT
    assert (meta.producer_id, meta.producer_epoch) == (resumed.producer_id, 0)


async def test_keep_prepared_with_nothing_open_is_a_plain_init() -> None:
    co, _, _, _ = make_coordinator(two_phase_commit_enabled=True)
    await co.init_producer_id("a", 60_000, enable_2pc=True)
    again = await co.init_producer_id("a", 60_000, enable_2pc=True, keep_prepared=True)
    assert (again.error, again.producer_epoch, again.ongoing_producer_id) == (E.NONE, 1, -1)


async def test_a_transaction_found_prepared_at_load_is_completed() -> None:
    co, txn_log, markers, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    await co.add_partitions("a", p.producer_id, 0, frozenset({TP}))
    co.marker_delay_s = 3600  # the "crash" happens before any marker
    await co.end_txn("a", p.producer_id, 0, True)
    await co.shutdown()
    assert markers.calls == []
    restarted, _, markers2, _ = make_coordinator()
    restarted.log = txn_log
    restarted.begin_loading(range(5))
    assert (await restarted.init_producer_id("a", 60_000)).error is E.COORDINATOR_LOAD_IN_PROGRESS
    for partition in range(5):
        restarted.finish_loading(partition, {t: m for t, m in txn_log.replay().items()
                                             if restarted.partition_for(t) == partition})
    await restarted.wait_idle()
    assert markers2.calls == [(p.producer_id, 0, 0, True, [TP])]
    assert restarted.get("a").state is S.COMPLETE_COMMIT  # type: ignore[union-attr]
    assert txn_log.last("a").state is S.COMPLETE_COMMIT  # type: ignore[union-attr]


async def test_markers_failing_for_a_retriable_reason_are_retried() -> None:
    co, _, markers, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    await co.add_partitions("a", p.producer_id, 0, frozenset({TP, TP2}))
    markers.fail = {TP2: E.KAFKA_STORAGE_ERROR}
    await co.end_txn("a", p.producer_id, 0, True)
    await co.wait_idle()
    assert [c[4] for c in markers.calls] == [[TP, TP2], [TP2]]
    assert co.get("a").state is S.COMPLETE_COMMIT  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", ["", None])
async def test_empty_ids_are_invalid_requests(bad: str | None) -> None:
    co, _, _, _ = make_coordinator()
    assert await co.add_partitions(bad or "", 1, 0, frozenset({TP})) is E.INVALID_REQUEST
    assert (await co.end_txn(bad or "", 1, 0, True)).error is E.INVALID_REQUEST
    assert co.check_produce(bad, 1, 0, *TP, 9) is E.INVALID_REQUEST


async def test_txn_offset_commit_v5_adds_the_offsets_partition_itself() -> None:
    co, _, _, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    adding = co.check_txn_offset_commit("a", p.producer_id, 0, "g", 2, api_version=5)
    assert inspect.isawaitable(adding)
    assert await adding is E.NONE
    assert co.get("a").partitions == {("__consumer_offsets", 2)}  # type: ignore[union-attr]


async def test_a_prepared_two_phase_transaction_survives_a_restart_and_is_committed_by_a_new_client() -> None:
    co, txn_log, _, clock = make_coordinator(two_phase_commit_enabled=True)
    p = await co.init_producer_id("a", 60_000, enable_2pc=True)
    await co.add_partitions("a", p.producer_id, 0, frozenset({TP}))
    await co.shutdown()  # the broker goes down with the transaction open (prepared, in KIP-939's terms)
    restarted, _, markers, _ = make_coordinator(two_phase_commit_enabled=True)
    restarted.log = txn_log
    for partition in range(5):
        restarted.finish_loading(partition, {t: m for t, m in txn_log.replay().items()
                                             if restarted.partition_for(t) == partition})
    clock.now += 10**9
    assert await restarted.abort_timed_out() == []  # never timed out
    resumed = await restarted.init_producer_id("a", 60_000, enable_2pc=True, keep_prepared=True)
    assert (resumed.error, resumed.ongoing_producer_id, resumed.ongoing_producer_epoch) == (E.NONE, p.producer_id, 0)
    end = await restarted.end_txn("a", resumed.producer_id, resumed.producer_epoch, True, TV_2)
    assert (end.error, end.producer_id, end.producer_epoch) == (E.NONE, resumed.producer_id, 0)
    await restarted.wait_idle()
    assert markers.calls == [(p.producer_id, 1, 0, True, [TP])]


async def test_a_failing_producer_id_allocator_is_a_retriable_answer() -> None:
    co, _, _, _ = make_coordinator()

    def broken() -> int:
        raise OSError("disk full")

    co.new_producer_id = broken
    assert (await co.init_producer_id("a", 60_000)).error is E.COORDINATOR_NOT_AVAILABLE
    assert co.get("a") is None


async def test_a_v2_batch_of_the_next_transaction_waits_for_the_last_ones_markers() -> None:
    co, _, markers, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    assert await co.check_produce("a", p.producer_id, 0, *TP, 12) is E.NONE  # type: ignore[misc]
    co.marker_delay_s = 0.05
    end = await co.end_txn("a", p.producer_id, 0, True, TV_2)
    assert co.get("a").state is S.PREPARE_COMMIT  # type: ignore[union-attr]
    next_batch = co.check_produce("a", end.producer_id, end.producer_epoch, *TP2, 12)
    assert inspect.isawaitable(next_batch)
    assert await next_batch is E.NONE
    assert markers.calls and co.get("a").partitions == {TP2}  # type: ignore[union-attr]


async def test_produce_hears_not_enough_replicas_while_the_coordinator_cannot_tell() -> None:
    co, _, _, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    co.begin_loading(range(5))
    assert co.check_produce("a", p.producer_id, 0, *TP, 9) is E.NOT_ENOUGH_REPLICAS


async def test_a_client_fenced_by_an_init_cannot_end_the_aborted_transaction_as_a_v2_retry() -> None:
    """Found by the property test: a handed-over transaction aborted by a third InitProducerId bumps the epoch
    to fence; the original client's EndTxn v5 with the epoch before must not pass for a retry of its own end."""
    co, _, _, _ = make_coordinator(two_phase_commit_enabled=True)
    p = await co.init_producer_id("b", 1000)
    await co.add_partitions("b", p.producer_id, p.producer_epoch, frozenset({TP}))
    handed = await co.init_producer_id("b", 1000, keep_prepared=True)
    assert handed.error is E.NONE and handed.ongoing_producer_id == p.producer_id
    assert (await co.init_producer_id("b", 1000)).error is E.CONCURRENT_TRANSACTIONS  # fences and aborts it
    late = await co.end_txn("b", p.producer_id, p.producer_epoch, False, TV_2)
    assert late.error is E.PRODUCER_FENCED


async def test_a_v12_produce_to_several_partitions_adds_them_all_in_one_write() -> None:
    # franz-go's first transactional Produce v12 carries every partition of the batch: checked one by one,
    # concurrently, each must be added (not told CONCURRENT_TRANSACTIONS, i.e. NOT_ENOUGH_REPLICAS, while
    # another's add is in flight), and with one state write
    co, txn_log, _, _ = make_coordinator()
    p = await co.init_producer_id("a", 60_000)
    writes = len(txn_log.records)
    partitions = [("t", n) for n in range(4)]
    checks = [co.check_produce("a", p.producer_id, 0, *tp, 12) for tp in partitions]
    assert all(inspect.isawaitable(check) for check in checks)
    assert await asyncio.gather(*checks) == [E.NONE] * 4  # type: ignore[arg-type]
    assert co.get("a").partitions == set(partitions)  # type: ignore[union-attr]
    assert len(txn_log.records) - writes <= 2  # the first partition's write, then the rest together
