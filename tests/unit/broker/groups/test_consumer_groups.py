"""The consumer group protocol's rules (KIP-848) in the coordinator, driven with an injected clock."""

from __future__ import annotations

from typing import Any

import pytest

from pybroker.broker.groups.consumer_state_machine import (
    TRANSITIONS,
    ConsumerGroupState,
    IllegalConsumerTransition,
    MemberState,
    Observation,
    next_state,
)
from pybroker.broker.groups.offsets_topic import ReplayedPartition
from pybroker.broker.groups.outcomes import CommitRequest, JoinRequest, OffsetToCommit
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.offsets_topic_records import ConsumerRecord, decode_record
from tests.unit.broker.groups.consumer_kit import INTERVAL, SESSION, T1, T2, heartbeat, make
from tests.unit.broker.groups.test_group_coordinator import Box

E = ErrorCode
CS = ConsumerGroupState


def total(assignment: dict) -> int:
    return sum(len(p) for p in assignment.values())


def test_a_first_member_gets_every_partition_at_once() -> None:
    co, log, _ = make()
    answer = heartbeat(co, 0, "m1", topics=["t1", "t2"])
    assert answer.error is E.NONE and answer.member_id == "m1"
    assert answer.member_epoch == 1 and answer.heartbeat_interval_ms == INTERVAL
    assert answer.assignment == {T1: frozenset(range(4)), T2: frozenset(range(2))}
    group = co.groups["g"]
    assert group.group_type == "consumer" and group.state_name == "Stable"
    kinds = [r.kind for r in log.decoded() if isinstance(r, ConsumerRecord)]
    assert kinds == [5, 4, 3, 7, 6, 8]


def test_a_member_without_an_id_gets_one() -> None:
    co, _, _ = make()
    answer = heartbeat(co, 0, "", topics=["t1"])
    assert answer.error is E.NONE and answer.member_id


def test_partitions_move_only_after_their_owner_revoked_them() -> None:
    co, _, _ = make()
    first = heartbeat(co, 0, "m1", topics=["t1"])
    assert first.assignment == {T1: frozenset(range(4))}
    second = heartbeat(co, 10, "m2", topics=["t1"])
    # m2 is at the new epoch but gets nothing yet: m1 still owns everything
    assert second.member_epoch == 2 and second.assignment == {}
    assert co.groups["g"].state_name == "Reconciling"
    # m1 is asked to revoke: its answer drops two partitions, its epoch stays
    revoke = heartbeat(co, 20, "m1", 1, owned={T1: frozenset(range(4))})
    assert revoke.member_epoch == 1 and revoke.assignment is not None and total(revoke.assignment) == 2
    kept = revoke.assignment
    # m2 still waits while m1 owns them
    assert heartbeat(co, 30, "m2", 2, owned={}).assignment is None
    # m1 acknowledges: it moves to epoch 2
    ack = heartbeat(co, 40, "m1", 1, owned=kept)
    assert ack.member_epoch == 2
    got = heartbeat(co, 50, "m2", 2, owned={}).assignment
    assert got is not None and total(got) == 2 and not (got[T1] & kept[T1])
    heartbeat(co, 60, "m2", 2, owned=got)
    assert co.groups["g"].state_name == "Stable"


def test_a_heartbeat_with_an_unknown_epoch_is_fenced() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "m1", topics=["t1"])
    assert heartbeat(co, 1, "m1", 5, owned={}).error is E.FENCED_MEMBER_EPOCH
    assert heartbeat(co, 1, "nobody", 1, owned={}).error is E.UNKNOWN_MEMBER_ID


def test_the_previous_epoch_is_accepted_when_the_answer_was_lost() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "m1", topics=["t1"])
    heartbeat(co, 1, "m2", topics=["t1"])
    revoke = heartbeat(co, 2, "m1", 1, owned={T1: frozenset(range(4))})
    assert revoke.assignment is not None
    heartbeat(co, 3, "m1", 1, owned=revoke.assignment)  # now at epoch 2; suppose the answer was lost
    again = heartbeat(co, 4, "m1", 1, owned=revoke.assignment)
    assert again.error is E.NONE and again.member_epoch == 2


def test_leaving_frees_the_partitions_for_the_others() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "m1", topics=["t1"])
    heartbeat(co, 1, "m2", topics=["t1"])
    left = heartbeat(co, 2, "m1", -1)
    assert left.error is E.NONE and left.member_epoch == -1
    got = heartbeat(co, 3, "m2", 2, owned={})
    assert got.assignment == {T1: frozenset(range(4))}
    heartbeat(co, 4, "m2", got.member_epoch, owned=got.assignment)
    heartbeat(co, 5, "m2", -1)
    assert co.groups["g"].state_name == "Empty"


def test_a_silent_member_is_fenced_after_its_session() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "m1", topics=["t1"])
    heartbeat(co, 0, "m2", topics=["t1"])
    deadline = co.next_deadline()
    assert deadline == SESSION
    heartbeat(co, 30_000, "m2", 2, owned={})
    co.tick(SESSION)
    assert "m1" not in co.groups["g"].consumer.members  # type: ignore[union-attr]
    got = heartbeat(co, SESSION + 1, "m2", 2, owned={})
    assert got.assignment == {T1: frozenset(range(4))}


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "m1", topics=["t1"], rebalance=1000)
    heartbeat(co, 10, "m2", topics=["t1"])
    heartbeat(co, 20, "m1", 1, owned={T1: frozenset(range(4))})
    assert co.groups["g"].consumer.members["m1"].state is MemberState.UNREVOKED_PARTITIONS  # type: ignore[union-attr]
    heartbeat(co, 500, "m2", 2, owned={})
    co.tick(1020)
    assert "m1" not in co.groups["g"].consumer.members  # type: ignore[union-attr]


def test_a_static_member_rejoins_with_its_partitions() -> None:
    co, _, _ = make()
    first = heartbeat(co, 0, "a", topics=["t1"], instance="i1")
    assert heartbeat(co, 1, "b", topics=["t1"], instance="i1").error is E.UNRELEASED_INSTANCE_ID
    heartbeat(co, 2, "a", -2, instance="i1")
    back = heartbeat(co, 3, "b", topics=["t1"], instance="i1")
    assert back.error is E.NONE and back.assignment == first.assignment
    assert co.groups["g"].consumer.group_epoch == 1  # type: ignore[union-attr]  # no rebalance


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"topics": None}, E.INVALID_REQUEST),
    ({"topics": ["t1"], "owned": {T1: frozenset({0})}}, E.INVALID_REQUEST),
    ({"topics": ["t1"], "assignor": "sticky"}, E.UNSUPPORTED_ASSIGNOR),
    ({"topics": None, "regex": "(a)\\1"}, E.INVALID_REGULAR_EXPRESSION),
    ({"topics": None, "regex": "["}, E.INVALID_REGULAR_EXPRESSION),
    ({"topics": ["t1"], "group": ""}, E.INVALID_REQUEST),
])
def test_bad_heartbeats_get_kafkas_errors(kwargs: dict, error: ErrorCode) -> None:
    co, _, _ = make()
    assert heartbeat(co, 0, "m1", **kwargs).error is error


def test_the_group_size_is_capped() -> None:
    co, _, _ = make(consumer_max_size=1)
    heartbeat(co, 0, "m1", topics=["t1"])
    assert heartbeat(co, 0, "m2", topics=["t1"]).error is E.GROUP_MAX_SIZE_REACHED


def test_a_regex_subscription_picks_up_new_topics() -> None:
    co, _, table = make()
    first = heartbeat(co, 0, "m1", regex="t.*")
    assert first.assignment == {T1: frozenset(range(4)), T2: frozenset(range(2))}
    import uuid
    t3 = uuid.UUID(int=3)
    table["t3"] = (t3, 1)
    got = heartbeat(co, 10, "m1", first.member_epoch, owned=first.assignment)
    assert got.assignment is not None and got.assignment[t3] == frozenset({0})


def test_a_regex_matches_internal_topics_too() -> None:
    # Kafka's coordinator matches every topic name, internal ones included (franz-go's
    # Test848RegexBrokerResolves subscribes to `__consumer_offsets` by its quoted name and expects it)
    import uuid
    co, _, table = make()
    offsets = uuid.UUID(int=50)
    table["__consumer_offsets"] = (offsets, 3)
    got = heartbeat(co, 0, "m1", regex="__consumer_offsets")
    assert got.assignment == {offsets: frozenset(range(3))}


def test_range_assignor_on_request() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "a", topics=["t1"], assignor="range")
    heartbeat(co, 0, "b", topics=["t1"], assignor="range")
    data = co.groups["g"].consumer
    assert data is not None and data.assignor == "range"
    assert data.targets == {"a": {T1: frozenset({0, 1})}, "b": {T1: frozenset({2, 3})}}


def test_an_empty_classic_group_is_converted_and_a_busy_one_refused() -> None:
    co, _, _ = make()
    box = Box()
    co.commit_offsets(CommitRequest("g", -1, "", None, [OffsetToCommit("t1", 0, 5, -1, "")]), 0, box)
    assert heartbeat(co, 0, "m1", topics=["t1"]).error is E.NONE
    assert co.groups["g"].offsets[("t1", 0)].offset == 5
    join = JoinRequest("classic", "", None, "c", "/h", 10_000, 10_000, "consumer", [("range", b"")], False)
    co.join(join, 0, Box())
    assert heartbeat(co, 0, "m1", group="classic", topics=["t1"]).error is E.GROUP_ID_NOT_FOUND
    refused = Box()
    co.join(JoinRequest("g", "", None, "c", "/h", 10_000, 10_000, "consumer", [("range", b"")], False), 0, refused)
    assert refused.answers[0].error is E.INCONSISTENT_GROUP_PROTOCOL


def test_offset_commits_check_the_member_epoch() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "m1", topics=["t1"])
    offsets = [OffsetToCommit("t1", 0, 5, -1, "")]
    for generation, member, error in [(1, "m1", E.NONE), (0, "m1", E.STALE_MEMBER_EPOCH),
                                      (1, "zz", E.UNKNOWN_MEMBER_ID), (-1, "", E.UNKNOWN_MEMBER_ID)]:
        box = Box()
        co.commit_offsets(CommitRequest("g", generation, member, None, offsets), 0, box)
        assert box.answers[0] == {("t1", 0): error}


def _commit(co: Any, member: str, epoch: int, partitions: list[int]) -> dict:
    box = Box()
    co.commit_offsets(CommitRequest("g", epoch, member, None, [OffsetToCommit("t1", p, 5, -1, "") for p in partitions]),
                      0, box)
    answer: dict = box.answers[0]
    return answer


def test_a_commit_at_an_older_epoch_is_accepted_for_partitions_held_since_then() -> None:
    """KIP-1251 (Kafka 4.3+). The race franz-go's TestGroupETL/range/848 lost: m1, asked to revoke at epoch 1,
    acknowledges, and is at once asked to revoke partition 1 too, at epoch 2; its commit of 0 and 1, sent at
    epoch 1, arrives after. Kafka 4.4 accepts it; answered STALE_MEMBER_EPOCH, franz-go retried at epoch 2
    without partition 1 (no longer its own) and answered that one REBALANCE_IN_PROGRESS itself."""
    co, _, _ = make()
    everything = heartbeat(co, 0, "m1", topics=["t1"]).assignment
    heartbeat(co, 1, "m2", topics=["t1"])
    first = heartbeat(co, 2, "m1", 1, owned=everything)  # revoke 2 and 3, still at epoch 1
    heartbeat(co, 3, "m3", topics=["t1"])
    heartbeat(co, 4, "m4", topics=["t1"])  # the target moves on: m1 keeps only 0
    second = heartbeat(co, 5, "m1", 1, owned=first.assignment)
    m1 = co.groups["g"].consumer.members["m1"]  # type: ignore[union-attr]
    assert second.member_epoch == 2 and m1.assigned == {T1: frozenset({0})}
    assert m1.pending_revocation == {T1: frozenset({1})}
    assert _commit(co, "m1", 1, [0, 1]) == {("t1", 0): E.NONE, ("t1", 1): E.NONE}
    assert _commit(co, "m1", 1, [2]) == {("t1", 2): E.STALE_MEMBER_EPOCH}  # not its own any more
    assert _commit(co, "m1", 3, [0]) == {("t1", 0): E.STALE_MEMBER_EPOCH}  # an epoch it never had
    heartbeat(co, 6, "m1", 2, owned={T1: frozenset({0})})
    m2 = co.groups["g"].consumer.members["m2"]  # type: ignore[union-attr]
    joined_at = m2.member_epoch
    got = heartbeat(co, 7, "m2", joined_at, owned={})  # its partition was released: it gets it now
    assert got.member_epoch > joined_at and got.assignment
    (partition,) = got.assignment[T1]
    # a partition is committed at an older epoch only if it was already the member's then
    assert _commit(co, "m2", joined_at, [partition]) == {("t1", partition): E.STALE_MEMBER_EPOCH}
    assert _commit(co, "m2", got.member_epoch, [partition]) == {("t1", partition): E.NONE}


def _replay_into_a_new_coordinator(log: Any, table: Any) -> Any:
    replayed = ReplayedPartition()
    for record in log.decoded():
        replayed.apply(record)
    restarted, _, _ = make(table)
    restarted.begin_loading([0])
    restarted.finish_loading(0, replayed.groups, replayed.offsets, 100, replayed.pending, replayed.consumer)
    return restarted


def test_the_group_comes_back_from_its_records() -> None:
    co, log, table = make()
    heartbeat(co, 0, "m1", topics=["t1"])
    heartbeat(co, 1, "m2", topics=["t1"], instance="i2")
    revoke = heartbeat(co, 2, "m1", 1, owned={T1: frozenset(range(4))})
    restarted = _replay_into_a_new_coordinator(log, table)
    before, after = co.groups["g"].consumer, restarted.groups["g"].consumer
    assert after is not None and before is not None
    for field in ("group_epoch", "assignment_epoch", "targets", "static_members", "partition_owners"):
        assert getattr(after, field) == getattr(before, field), field
    for member_id, member in before.members.items():
        again = after.members[member_id]
        assert (again.member_epoch, again.state, again.assigned, again.pending_revocation) == (
            member.member_epoch, member.state, member.assigned, member.pending_revocation)
    assert revoke.assignment is not None
    assert heartbeat(restarted, 200, "m1", 1, owned=revoke.assignment).member_epoch == 2


def test_a_deleted_group_leaves_tombstones() -> None:
    co, log, _ = make()
    heartbeat(co, 0, "m1", topics=["t1"])
    heartbeat(co, 1, "m1", -1)
    box = Box()
    co.delete_groups(["g"], 2, box)
    assert box.answers == [{"g": E.NONE}]
    replayed = ReplayedPartition()
    for record in log.decoded():
        replayed.apply(record)
    assert not replayed.consumer["g"].exists


def test_every_state_and_observation_has_a_transition() -> None:
    live = [s for s in CS if s is not CS.DEAD]
    for state in live:
        for observation in Observation:
            assert (state, observation) in TRANSITIONS
    with pytest.raises(IllegalConsumerTransition):
        next_state(CS.DEAD, Observation.EPOCH_BUMPED)


def test_consumer_records_round_trip() -> None:
    from pybroker.protocol.messages.consumer_group_records import ConsumerGroupMetadataValue
    from pybroker.protocol.offsets_topic_records import consumer_key, consumer_value
    record = decode_record(consumer_key(3, "g"), consumer_value(ConsumerGroupMetadataValue(epoch=7)))
    assert isinstance(record, ConsumerRecord) and record.value.epoch == 7 and record.group == "g"


def test_offset_fetches_of_members_check_the_epoch() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "m1", topics=["t1"])
    assert co.fetch_member_error("g", "m1", 1) is E.NONE
    assert co.fetch_member_error("g", "m1", 0) is E.STALE_MEMBER_EPOCH
    assert co.fetch_member_error("g", "zz", 1) is E.UNKNOWN_MEMBER_ID
    assert co.fetch_member_error("g", None, -1) is E.NONE


def test_a_deleted_topic_does_not_hold_a_member_in_revocation() -> None:
    co, _, table = make()
    first = heartbeat(co, 0, "m1", topics=["t1", "t2"])
    del table["t2"]
    step = heartbeat(co, 1, "m1", first.member_epoch, owned=first.assignment)
    assert step.assignment == {T1: frozenset(range(4))}
    # the client still lists the deleted topic's partitions (it cannot name them any more): no matter
    done = heartbeat(co, 2, "m1", step.member_epoch, owned=first.assignment)
    assert done.error is E.NONE and co.groups["g"].state_name == "Stable"


def test_hostile_heartbeats_are_capped() -> None:
    co, _, _ = make()
    assert heartbeat(co, 0, "m1", topics=[f"t{i}" for i in range(10_001)]).error is E.INVALID_REQUEST
    assert heartbeat(co, 0, "m1", regex="a" * 256).error is E.INVALID_REGULAR_EXPRESSION
    assert heartbeat(co, 0, "m" * 256, topics=["t1"]).error is E.INVALID_REQUEST
    assert heartbeat(co, 0, "m1", topics=["t1"]).error is E.NONE
    huge = {T1: frozenset(range(100_001))}
    assert heartbeat(co, 1, "m1", 1, owned=huge).error is E.INVALID_REQUEST
    assert heartbeat(co, 1, "m1", -3).error is E.INVALID_REQUEST
    assert heartbeat(co, 1, "", 1).error is E.INVALID_REQUEST


def test_assignment_epochs_come_back_from_the_records() -> None:
    """KIP-1251's `AssignmentEpochs` (tag 0 of each topic in the current-assignment record, Kafka 4.3+):
    after a restart, the commit of the race above at the older epoch is still accepted."""
    co, log, table = make()
    everything = heartbeat(co, 0, "m1", topics=["t1"]).assignment
    heartbeat(co, 1, "m2", topics=["t1"])
    first = heartbeat(co, 2, "m1", 1, owned=everything)
    heartbeat(co, 3, "m3", topics=["t1"])
    heartbeat(co, 4, "m4", topics=["t1"])
    heartbeat(co, 5, "m1", 1, owned=first.assignment)
    restarted = _replay_into_a_new_coordinator(log, table)
    for member_id, member in co.groups["g"].consumer.members.items():  # type: ignore[union-attr]
        again = restarted.groups["g"].consumer.members[member_id]
        assert again.assignment_epochs == member.assignment_epochs, member_id
    assert restarted.groups["g"].consumer.members["m1"].assignment_epochs == {(T1, 0): 1, (T1, 1): 1}
    assert _commit(restarted, "m1", 1, [0, 1]) == {("t1", 0): E.NONE, ("t1", 1): E.NONE}
    assert _commit(restarted, "m1", 1, [2]) == {("t1", 2): E.STALE_MEMBER_EPOCH}


def test_the_current_assignment_record_carries_the_epochs_as_kafka_lays_them_out() -> None:
    """Each topic's partitions, then its tagged fields: one field, tag 0, 9 bytes: a compact array of two
    int32 (length + 1 = 3), the epochs in the order of the partitions (the spec's `AssignmentEpochs`)."""
    import struct

    from pybroker.broker.groups.consumer_group import ConsumerMember
    from pybroker.broker.groups.consumer_records import current_record

    member = ConsumerMember("m", member_epoch=5)
    member.assigned = {T1: frozenset({1, 0})}
    member.assignment_epochs = {(T1, 0): 3, (T1, 1): 5}
    _, value = current_record("g", member)
    partitions = b"\x03" + struct.pack(">ii", 0, 1)
    assert T1.bytes + partitions + b"\x01\x00\x09\x03" + struct.pack(">ii", 3, 5) in value


def test_a_record_without_epochs_or_with_the_wrong_count_reads_as_the_members_epoch() -> None:
    """As Kafka reads one (a record written before KIP-1251, or a list that does not match its partitions,
    which Kafka logs as an error): every partition at the member's epoch, never below 0."""
    from pybroker.broker.groups.consumer_records import ReplayedConsumerGroup, restore_consumer
    from pybroker.protocol.messages.consumer_group_records import (
        ConsumerGroupCurrentMemberAssignmentValue,
        ConsumerGroupMemberMetadataValue,
        ConsumerGroupMetadataValue,
        CurrentTopicPartitions,
    )

    for member_epoch, epochs, expected in ((7, None, 7), (7, [], 7), (7, [1], 7), (-2, None, 0), (7, [1, 2], 1)):
        current = ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=member_epoch, previous_member_epoch=member_epoch, state=0,
            assigned_partitions=[CurrentTopicPartitions(topic_id=T1, partitions=[0, 1], assignment_epochs=epochs)])
        replayed = ReplayedConsumerGroup(epoch=ConsumerGroupMetadataValue(epoch=7),
                                         members={"m": ConsumerGroupMemberMetadataValue()}, current={"m": current})
        member = restore_consumer(replayed, 0).members["m"]
        assert member.assignment_epochs[(T1, 0)] == expected, (member_epoch, epochs)
