"""Transactional offsets in the group coordinator (TxnOffsetCommit), driven with the fake log and clock.

Pending per (group, producer id) until `complete_transaction`; commit makes them visible where they
were written after the committed offset (Kafka's rule), abort drops them; require_stable sees them; the
member checks, write failures, expiry, DeleteGroups, OffsetDelete and loading all respect them.
"""

from __future__ import annotations

from pybroker.broker.groups.group import CommittedOffset
from pybroker.broker.groups.outcomes import OffsetToCommit, TxnCommitRequest
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.offsets_topic_records import OffsetRecord
from tests.unit.broker.groups.test_group_coordinator import Box, FakeLog, commit, join, make, sync

PID, EPOCH = 7000, 3
NONE = ErrorCode.NONE


def txn_commit(co: object, now: int, *offsets: tuple[str, int, int], group: str = "g", pid: int = PID,
               generation: int = -1, member: str = "", instance: str | None = None
               ) -> dict[tuple[str, int], ErrorCode]:
    box = Box()
    request = TxnCommitRequest(group, pid, EPOCH, generation, member, instance,
                               [OffsetToCommit(t, p, o, 5, "txn") for t, p, o in offsets])
    co.commit_txn_offsets(request, now, box)  # type: ignore[attr-defined]
    return box.one  # type: ignore[no-any-return]


def committed(co: object, key: tuple[str, int], group: str = "g") -> int | None:
    found: CommittedOffset | None = co.fetch_offsets(group, [key])[1][key]  # type: ignore[attr-defined]
    return None if found is None else found.offset


def test_pending_until_commit_then_visible() -> None:
    co, log = make()
    assert txn_commit(co, 1, ("t", 0, 10), ("t", 1, 20)) == {("t", 0): NONE, ("t", 1): NONE}
    assert log.producers == [(PID, EPOCH)]  # one transactional batch under the producer's id and epoch
    assert {(r.topic, r.partition, r.value.offset) for r in log.decoded() if isinstance(r, OffsetRecord)} == {
        ("t", 0, 10), ("t", 1, 20)}
    assert committed(co, ("t", 0)) is None
    assert co.unstable_offsets("g") == {("t", 0), ("t", 1)}
    co.complete_transaction(co.partition_for("g"), PID, commit=True)
    assert (committed(co, ("t", 0)), committed(co, ("t", 1))) == (10, 20)
    assert co.unstable_offsets("g") == set()
    assert not co.offsets.txn_groups


def test_abort_drops_them_and_keeps_what_was_committed() -> None:
    co, _ = make()
    commit(co, 1, ("t", 0, 5))
    txn_commit(co, 2, ("t", 0, 10))
    co.complete_transaction(co.partition_for("g"), PID, commit=False)
    assert committed(co, ("t", 0)) == 5
    assert co.unstable_offsets("g") == set()


def test_a_plain_commit_written_after_the_transactional_one_wins() -> None:
    co, _ = make()
    txn_commit(co, 1, ("t", 0, 10), ("t", 1, 10))
    commit(co, 2, ("t", 0, 99))  # written later than the pending offset of t-0
    co.complete_transaction(co.partition_for("g"), PID, commit=True)
    assert committed(co, ("t", 0)) == 99
    assert committed(co, ("t", 1)) == 10


def test_a_transactional_offset_written_after_the_plain_commit_wins() -> None:
    co, _ = make()
    commit(co, 1, ("t", 0, 99))
    txn_commit(co, 2, ("t", 0, 10))
    co.complete_transaction(co.partition_for("g"), PID, commit=True)
    assert committed(co, ("t", 0)) == 10


def test_two_producers_complete_independently() -> None:
    co, _ = make()
    txn_commit(co, 1, ("t", 0, 10), pid=1)
    txn_commit(co, 1, ("t", 1, 20), pid=2)
    co.complete_transaction(co.partition_for("g"), 2, commit=True)
    assert (committed(co, ("t", 0)), committed(co, ("t", 1))) == (None, 20)
    assert co.unstable_offsets("g") == {("t", 0)}
    co.complete_transaction(co.partition_for("g"), 1, commit=False)
    assert co.unstable_offsets("g") == set() and committed(co, ("t", 0)) is None


def test_completion_only_touches_the_groups_of_that_partition() -> None:
    co, _ = make()
    other = next(g for g in (f"g{i}" for i in range(200)) if co.partition_for(g) != co.partition_for("g"))
    txn_commit(co, 1, ("t", 0, 10))
    txn_commit(co, 1, ("t", 0, 30), group=other)
    co.complete_transaction(co.partition_for("g"), PID, commit=True)
    assert committed(co, ("t", 0)) == 10
    assert committed(co, ("t", 0), other) is None and co.unstable_offsets(other) == {("t", 0)}
    co.complete_transaction(co.partition_for(other), PID, commit=True)
    assert committed(co, ("t", 0), other) == 30


def test_a_marker_for_a_producer_with_nothing_pending_changes_nothing() -> None:
    co, _ = make()
    commit(co, 1, ("t", 0, 5))
    co.complete_transaction(co.partition_for("g"), PID, commit=True)
    assert committed(co, ("t", 0)) == 5


def test_a_failed_write_leaves_nothing_pending() -> None:
    co, log = make()
    log.hold = True
    box = Box()
    co.commit_txn_offsets(TxnCommitRequest("g", PID, EPOCH, -1, "", None, [OffsetToCommit("t", 0, 1, -1, None)]),
                          1, box)
    assert co.unstable_offsets("g") == {("t", 0)}  # pending from the moment it is written
    log.release(ErrorCode.KAFKA_STORAGE_ERROR)
    assert box.one == {("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
    assert co.unstable_offsets("g") == set() and not co.groups["g"].pending_txn


def test_a_fenced_producer_is_told_so() -> None:
    co, log = make()
    log.hold = True
    box = Box()
    co.commit_txn_offsets(TxnCommitRequest("g", PID, EPOCH, -1, "", None, [OffsetToCommit("t", 0, 1, -1, None)]),
                          1, box)
    log.release(ErrorCode.INVALID_PRODUCER_EPOCH)
    assert box.one == {("t", 0): ErrorCode.INVALID_PRODUCER_EPOCH}


def test_metadata_too_large_and_unknown_partitions_answer_alone() -> None:
    co, _ = make(metadata_max_bytes=4)
    co.partition_exists = lambda topic, partition: topic != "gone"
    box = Box()
    co.commit_txn_offsets(TxnCommitRequest("g", PID, EPOCH, -1, "", None, [
        OffsetToCommit("t", 0, 1, -1, "too long"), OffsetToCommit("gone", 0, 1, -1, None),
        OffsetToCommit("t", 1, 1, -1, "ok")]), 1, box)
    assert box.one == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE, ("gone", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       ("t", 1): NONE}
    assert co.unstable_offsets("g") == {("t", 1)}


# -- Kafka's member checks (v3+ carries them) ------------------------------------------------------

def test_member_generation_and_instance_checks() -> None:
    co, _ = make()
    member = join(co, 0).one.member_id
    sync(co, 0, member, 1, {member: b"a"})
    key = ("t", 0)
    assert txn_commit(co, 1, ("t", 0, 1), generation=1, member=member) == {key: NONE}
    assert txn_commit(co, 1, ("t", 0, 1), generation=2, member=member) == {key: ErrorCode.ILLEGAL_GENERATION}
    assert txn_commit(co, 1, ("t", 0, 1), generation=1, member="stranger") == {key: ErrorCode.UNKNOWN_MEMBER_ID}
    # v0-2 name no member: the transaction is the producer's, whatever the group's state
    assert txn_commit(co, 1, ("t", 0, 1)) == {key: NONE}
    # a group that does not exist: a generation is wrong, none creates a simple group
    assert txn_commit(co, 1, ("t", 0, 1), group="new", generation=1, member="m") == {
        key: ErrorCode.ILLEGAL_GENERATION}
    assert txn_commit(co, 1, ("t", 0, 1), group="new") == {key: NONE}
    assert co.groups["new"].protocol_type == ""


def test_a_static_member_replaced_by_a_newer_instance_is_fenced() -> None:
    co, _ = make()
    first = join(co, 0, instance="i-1").one.member_id
    sync(co, 0, first, 1, {first: b"a"})
    second = join(co, 1, instance="i-1").one.member_id  # the instance restarted: the old id is fenced
    assert second != first
    assert txn_commit(co, 2, ("t", 0, 1), generation=1, member=first, instance="i-1") == {
        ("t", 0): ErrorCode.FENCED_INSTANCE_ID}


def test_a_transactional_commit_is_allowed_while_the_group_rebalances() -> None:
    co, _ = make()
    a = join(co, 0, client="a").one.member_id
    sync(co, 0, a, 1, {a: b"x"})
    join(co, 1, client="b")  # the group is rebalancing now
    assert txn_commit(co, 2, ("t", 0, 1), generation=1, member=a) == {("t", 0): NONE}


def test_a_loading_partition_answers_load_in_progress() -> None:
    co, _ = make()
    co.begin_loading([co.partition_for("g")])
    assert txn_commit(co, 1, ("t", 0, 1)) == {("t", 0): ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}


# -- expiry, deletes and loading -------------------------------------------------------------------

def test_an_offset_with_a_pending_replacement_does_not_expire_and_the_group_stays() -> None:
    co, _ = make(offsets_retention_ms=1000)
    commit(co, 0, ("t", 0, 5), ("t", 1, 6))
    txn_commit(co, 10, ("t", 0, 50))
    co.expire_offsets(5000)
    assert committed(co, ("t", 0)) == 5 and committed(co, ("t", 1)) is None
    assert "g" in co.groups  # not removed mid-transaction
    co.complete_transaction(co.partition_for("g"), PID, commit=False)
    co.expire_offsets(6000)
    assert "g" not in co.groups


def test_a_group_with_only_pending_offsets_is_not_removed_by_expiry() -> None:
    co, _ = make(offsets_retention_ms=1000)
    txn_commit(co, 0, ("t", 0, 5))
    co.expire_offsets(10_000)
    assert "g" in co.groups
    co.complete_transaction(co.partition_for("g"), PID, commit=True)
    assert committed(co, ("t", 0)) == 5


def test_delete_groups_tombstones_pending_offsets_too() -> None:
    co, log = make()
    commit(co, 0, ("t", 0, 5))
    txn_commit(co, 1, ("t", 0, 6), ("t", 1, 7))
    box = Box()
    co.delete_groups(["g"], 2, box)
    assert box.one == {"g": NONE}
    tombstones = [(r.topic, r.partition) for r in log.decoded()[-3:] if isinstance(r, OffsetRecord)]
    assert sorted(tombstones) == [("t", 0), ("t", 1)]  # one each, though t-0 is both committed and pending
    co.complete_transaction(co.partition_for("g"), PID, commit=True)
    assert "g" not in co.groups


def test_offset_delete_removes_a_pending_offset() -> None:
    co, log = make()
    txn_commit(co, 1, ("t", 0, 6), ("u", 0, 7))
    results: list[tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]] = []
    co.delete_offsets("g", [("t", 0)], 2, lambda e, c: results.append((e, c)))
    assert results == [(NONE, {("t", 0): NONE})]
    assert isinstance(log.decoded()[-1], OffsetRecord) and log.decoded()[-1].value is None
    assert co.unstable_offsets("g") == {("u", 0)}
    co.complete_transaction(co.partition_for("g"), PID, commit=True)
    assert committed(co, ("t", 0)) is None and committed(co, ("u", 0)) == 7


def test_a_completion_while_the_partition_loads_waits_for_the_replay() -> None:
    co, _ = make()
    partition = co.partition_for("g")
    co.begin_loading([partition])
    co.complete_transaction(partition, PID, commit=True)  # the marker was written after replay read its end
    pending = {"g": {PID: {("t", 0): CommittedOffset(10, -1, "", 0, -1, record_offset=3)}}}
    co.finish_loading(partition, {}, {"g": {("t", 0): CommittedOffset(5, -1, "", 0, -1, record_offset=1)}}, 100,
                      pending)
    assert committed(co, ("t", 0)) == 10 and co.unstable_offsets("g") == set()


def test_loaded_pending_offsets_complete_later() -> None:
    co, _ = make()
    partition = co.partition_for("g")
    co.begin_loading([partition])
    co.finish_loading(partition, {}, {}, 100, {"g": {PID: {("t", 0): CommittedOffset(10, -1, "", 0, -1, 3)}}})
    assert co.groups["g"].protocol_type == "" and co.unstable_offsets("g") == {("t", 0)}
    co.complete_transaction(partition, PID, commit=True)
    assert committed(co, ("t", 0)) == 10


def test_fake_log_positions_follow_the_records() -> None:
    co, log = make()
    commit(co, 0, ("t", 0, 1), ("t", 1, 2))
    txn_commit(co, 1, ("t", 0, 3))
    group = co.groups["g"]
    assert [group.offsets[("t", 0)].record_offset, group.offsets[("t", 1)].record_offset] == [0, 1]
    assert group.pending_txn[PID][("t", 0)].record_offset == 2
    assert isinstance(log, FakeLog)


def test_a_commit_without_a_real_producer_is_refused() -> None:
    co, log = make()
    assert txn_commit(co, 1, ("t", 0, 1), pid=-1) == {("t", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    box = Box()
    co.commit_txn_offsets(TxnCommitRequest("g", PID, -1, -1, "", None, [OffsetToCommit("t", 0, 1, -1, None)]), 1, box)
    assert box.one == {("t", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    assert not log.written and co.unstable_offsets("g") == set()
