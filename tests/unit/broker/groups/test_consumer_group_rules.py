"""Kafka 4's finer rules of consumer groups (KIP-848) in the coordinator: which OffsetCommit versions a
member may use, the member ids a classic JoinGroup hands out, what a failed write leaves behind."""

from __future__ import annotations

from pybroker.broker.groups.outcomes import CommitRequest, JoinRequest, OffsetToCommit
from pybroker.protocol.errors import ErrorCode
from tests.unit.broker.groups.consumer_kit import T1, T2, heartbeat, make
from tests.unit.broker.groups.test_group_coordinator import Box
from tests.unit.broker.groups.test_mixed_groups import join, subscription

E = ErrorCode
OFFSETS = [OffsetToCommit("t1", 0, 5, -1, "")]


def commit(co, generation: int, member: str, version: int) -> ErrorCode:  # type: ignore[no-untyped-def]
    box = Box()
    co.commit_offsets(CommitRequest("g", generation, member, None, OFFSETS, version), 0, box)
    answer: ErrorCode = box.answers[0][("t1", 0)]
    return answer


def test_a_consumer_protocol_member_must_commit_with_v9() -> None:
    co, _, _ = make()
    epoch = heartbeat(co, 0, "m1", topics=["t1"]).member_epoch
    assert commit(co, epoch, "m1", 8) is E.UNSUPPORTED_VERSION
    assert commit(co, epoch, "m1", 2) is E.UNSUPPORTED_VERSION
    assert commit(co, epoch, "m1", 9) is E.NONE
    # an unknown member is told so first, at any version; a tool's commit is refused while members remain
    assert commit(co, epoch, "zz", 8) is E.UNKNOWN_MEMBER_ID
    assert commit(co, -1, "", 8) is E.UNKNOWN_MEMBER_ID


def test_a_classic_member_of_a_consumer_group_commits_with_any_version() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "c1", topics=["t1"])
    joined = join(co, "", 1)
    assert commit(co, joined.generation, joined.member_id, 8) is E.NONE
    assert commit(co, joined.generation + 1, joined.member_id, 8) is E.ILLEGAL_GENERATION


def test_an_empty_consumer_group_takes_a_tools_commit_at_any_version() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "m1", topics=["t1"])
    heartbeat(co, 1, "m1", -1)
    assert co.groups["g"].consumer is not None
    assert commit(co, -1, "", 2) is E.NONE
    # Kafka looks only at the epoch: an empty group takes a negative one whatever member id comes with it
    assert commit(co, -1, "gone", 8) is E.NONE


def state_of(co) -> tuple:  # type: ignore[no-untyped-def]
    data = co.groups["g"].consumer
    return (data.group_epoch, data.assignment_epoch, data.state, dict(data.targets), dict(data.partition_epochs),
            {m.member_id: (m.member_epoch, m.assigned, m.pending_revocation, m.state) for m in data.members.values()})


def test_a_failed_write_undoes_the_heartbeats_change() -> None:
    co, log, _ = make()
    first = heartbeat(co, 0, "m1", topics=["t1"])
    before = state_of(co)
    log.hold = True
    box = Box()
    from pybroker.broker.groups.consumer_outcomes import ConsumerHeartbeat
    co.consumer_heartbeat(ConsumerHeartbeat("g", "m2", 0, None, None, 30_000, ["t1", "t2"], None, None, {},
                                            "client", "/h"), 1, box)
    assert "m2" in co.groups["g"].consumer.members
    log.release(E.KAFKA_STORAGE_ERROR)
    assert box.answers[0].error is not E.NONE
    assert state_of(co) == before, "the change whose records were lost stayed in memory"
    # the group goes on from what was written: m1 heartbeats at its epoch, m2 joins again
    log.hold = False
    assert heartbeat(co, 2, "m1", first.member_epoch, owned=first.assignment).error is E.NONE
    assert heartbeat(co, 3, "m2", topics=["t1", "t2"]).error is E.NONE


def test_a_failed_write_of_a_new_group_forgets_it() -> None:
    co, log, _ = make()
    log.hold = True
    box = Box()
    from pybroker.broker.groups.consumer_outcomes import ConsumerHeartbeat
    co.consumer_heartbeat(ConsumerHeartbeat("g", "m1", 0, None, None, 30_000, ["t1"], None, None, {},
                                            "client", "/h"), 0, box)
    log.release(E.KAFKA_STORAGE_ERROR)
    assert "g" not in co.groups


def test_later_changes_undone_with_an_earlier_one_are_not_restored_again() -> None:
    co, log, _ = make()
    first = heartbeat(co, 0, "m1", topics=["t1"])
    before = state_of(co)
    log.hold = True
    from pybroker.broker.groups.consumer_outcomes import ConsumerHeartbeat
    for member, now in (("m2", 1), ("m3", 2)):
        co.consumer_heartbeat(ConsumerHeartbeat("g", member, 0, None, None, 30_000, ["t1"], None, None, {},
                                                "client", "/h"), now, Box())
    log.release(E.KAFKA_STORAGE_ERROR)
    assert state_of(co) == before
    log.hold = False
    assert heartbeat(co, 3, "m1", first.member_epoch, owned=first.assignment).error is E.NONE


def test_a_failed_write_undoes_a_classic_members_join() -> None:
    co, log, _ = make()
    heartbeat(co, 0, "c1", topics=["t1"])
    before = state_of(co)
    log.hold = True
    box = Box()
    co.join(JoinRequest("g", "", None, "classic-client", "/h", 10_000, 10_000, "consumer",
                        [("range", subscription(["t1"]))], False), 1, box)
    log.release(E.KAFKA_STORAGE_ERROR)
    assert box.answers[0].error is not E.NONE
    assert state_of(co) == before


def test_a_failed_write_undoes_a_leave() -> None:
    co, log, _ = make()
    first = heartbeat(co, 0, "m1", topics=["t1"])
    heartbeat(co, 1, "m2", topics=["t1"])
    heartbeat(co, 2, "m1", first.member_epoch, owned=first.assignment)
    before = state_of(co)
    log.hold = True
    box = Box()
    from pybroker.broker.groups.consumer_outcomes import ConsumerHeartbeat
    co.consumer_heartbeat(ConsumerHeartbeat("g", "m2", -1, None, None, -1, None, None, None, None,
                                            "client", "/h"), 3, box)
    log.release(E.KAFKA_STORAGE_ERROR)
    assert state_of(co) == before


def static_join(co, member_id: str, instance: str, now: int):  # type: ignore[no-untyped-def]
    box = Box()
    co.join(JoinRequest("g", member_id, instance, "classic-client", "/h", 10_000, 10_000, "consumer",
                        [("range", subscription(["t1"]))], True), now, box)
    return box.answers[0]


def test_a_static_classic_member_joins_a_consumer_group() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "c1", topics=["t1"])
    joined = static_join(co, "", "i1", 1)  # a static member needs no MEMBER_ID_REQUIRED round
    assert joined.error is E.NONE and joined.member_id
    data = co.groups["g"].consumer
    assert data.static_members["i1"] == joined.member_id and data.members[joined.member_id].classic is not None
    again = static_join(co, joined.member_id, "i1", 2)
    assert again.error is E.NONE and again.member_id == joined.member_id
    assert static_join(co, "made-up", "i1", 3).error is E.FENCED_INSTANCE_ID
    assert static_join(co, "made-up", "i9", 3).error is E.UNKNOWN_MEMBER_ID
    assert co.heartbeat("g", again.generation, "other", "i1", 4) is E.FENCED_INSTANCE_ID
    assert co.heartbeat("g", again.generation, joined.member_id, "i1", 4) in (E.NONE, E.REBALANCE_IN_PROGRESS)


def test_a_restarted_static_classic_member_takes_its_slot_back() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "c1", topics=["t1"])
    first = static_join(co, "", "i1", 1)
    data = co.groups["g"].consumer
    target = data.targets[first.member_id]
    restarted = static_join(co, "", "i1", 2)  # a new process, same instance id, no member id
    assert restarted.error is E.NONE and restarted.member_id != first.member_id
    assert first.member_id not in data.members and data.static_members["i1"] == restarted.member_id
    assert data.targets[restarted.member_id] == target
    assert static_join(co, first.member_id, "i1", 3).error is E.FENCED_INSTANCE_ID


def test_a_static_classic_member_leaves_by_its_instance_id() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "c1", topics=["t1"])
    joined = static_join(co, "", "i1", 1)
    _, codes = co.leave("g", [("someone-else", "i1"), ("", "i9"), ("", "i1")], 2)
    assert codes == [E.FENCED_INSTANCE_ID, E.UNKNOWN_MEMBER_ID, E.NONE]
    assert joined.member_id not in co.groups["g"].consumer.members
    assert "i1" not in co.groups["g"].consumer.static_members


def test_a_consumer_protocol_static_member_replaces_a_classic_one() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "c1", topics=["t1"])
    joined = static_join(co, "", "i1", 1)
    answer = heartbeat(co, 2, "n1", topics=["t1"], instance="i1")
    assert answer.error is E.NONE
    data = co.groups["g"].consumer
    assert data.static_members["i1"] == "n1" and joined.member_id not in data.members


def test_static_members_survive_the_downgrade() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "c1", topics=["t1"])
    joined = static_join(co, "", "i1", 1)
    heartbeat(co, 2, "c1", -1)
    group = co.groups["g"]
    assert group.consumer is None and group.static_members == {"i1": joined.member_id}
    assert group.members[joined.member_id].group_instance_id == "i1"


def stable_classic_group(co):  # type: ignore[no-untyped-def]
    from pybroker.broker.groups.outcomes import SyncRequest
    from pybroker.protocol.messages.consumer_protocol import (
        AssignedTopicPartition,
        ConsumerProtocolAssignment,
    )
    box = Box()
    co.join(JoinRequest("g", "", None, "old", "/h", 10_000, 10_000, "consumer",
                        [("range", subscription(["t1"]))], False), 0, box)
    joined = box.answers[0]
    assignment = (0).to_bytes(2, "big") + ConsumerProtocolAssignment(
        assigned_partitions=[AssignedTopicPartition(topic="t1", partitions=[0, 1, 2, 3])]).encode(0)
    synced = Box()
    co.sync(SyncRequest("g", joined.generation, joined.member_id, None, "consumer", "range",
                        {joined.member_id: assignment}), 1, synced)
    assert synced.answers[0].error is E.NONE
    return joined


def classic_join(co, member_id: str, now: int, topics: list[str] | None = None) -> Box:  # type: ignore[no-untyped-def]
    box = Box()
    co.join(JoinRequest("g", member_id, None, "old", "/h", 10_000, 10_000, "consumer",
                        [("range", subscription(topics or ["t1"]))], False), now, box)
    return box


def classic_sync(co, member_id: str, generation: int, now: int, parts: dict[str, list[int]]) -> Box:  # type: ignore[no-untyped-def]
    from pybroker.broker.groups.outcomes import SyncRequest
    from pybroker.protocol.messages.consumer_protocol import (
        AssignedTopicPartition,
        ConsumerProtocolAssignment,
    )
    assignments = {m: (0).to_bytes(2, "big") + ConsumerProtocolAssignment(assigned_partitions=[
        AssignedTopicPartition(topic="t1", partitions=p)]).encode(0) for m, p in parts.items()}
    box = Box()
    co.sync(SyncRequest("g", generation, member_id, None, "consumer", "range", assignments), now, box)
    return box


def test_a_rebalancing_classic_group_is_upgraded_and_its_waiting_members_told_to_rejoin() -> None:
    co, _, _ = make(initial_rebalance_delay_ms=0)
    a = stable_classic_group(co).member_id
    b_join = classic_join(co, "", 2)
    # b has no assignment yet: Kafka cannot read one, and does not upgrade
    assert heartbeat(co, 3, "new", topics=["t1"]).error is E.GROUP_ID_NOT_FOUND
    assert co.groups["g"].consumer is None and not b_join.answered
    a_join = classic_join(co, a, 4)
    b = b_join.answers[0].member_id
    generation = a_join.answers[0].generation
    classic_sync(co, b, generation, 5, {})
    classic_sync(co, a, generation, 5, {a: [0, 1], b: [2, 3]})
    assert co.groups["g"].state_name == "Stable"
    # a rejoins (a new subscription): the group rebalances, a waits for b
    waiting = classic_join(co, a, 6, ["t1", "t2"])
    assert co.groups["g"].state_name == "PreparingRebalance" and not waiting.answered
    answer = heartbeat(co, 7, "new", topics=["t1"])
    assert answer.error is E.NONE
    group = co.groups["g"]
    assert group.consumer is not None and set(group.consumer.members) == {a, b, "new"}
    assert waiting.answers[0].error is E.REBALANCE_IN_PROGRESS
    assert group.consumer.members[b].assigned == {T1: frozenset({2, 3})}


def test_a_refused_heartbeat_leaves_no_converted_group_behind() -> None:
    co, _, _ = make(initial_rebalance_delay_ms=0, consumer_max_size=1)
    stable_classic_group(co)
    assert heartbeat(co, 2, "new", topics=["t1"]).error is E.GROUP_MAX_SIZE_REACHED
    assert co.groups["g"].consumer is None and co.groups["g"].state_name == "Stable"


def test_a_classic_member_id_is_not_remembered_as_in_kafka() -> None:
    """Kafka 4's classicGroupJoinToConsumerGroup hands out an id with MEMBER_ID_REQUIRED and then creates a
    member for whatever id a JoinGroup carries: there are no pending members in a consumer group."""
    co, _, _ = make()
    heartbeat(co, 0, "c1", topics=["t1"])
    box = Box()
    co.join(JoinRequest("g", "", None, "classic-client", "/h", 10_000, 10_000, "consumer",
                        [("range", subscription(["t1"]))], True), 1, box)
    assert box.answers[0].error is E.MEMBER_ID_REQUIRED and box.answers[0].member_id
    made_up = Box()
    co.join(JoinRequest("g", "made-up", None, "classic-client", "/h", 10_000, 10_000, "consumer",
                        [("range", subscription(["t1"]))], True), 2, made_up)
    assert made_up.answers[0].error is E.NONE and "made-up" in co.groups["g"].consumer.members


def regex_heartbeat(co, now: int, member: str, regex: str, hidden: set[str], principal: str = "User:alice"):  # type: ignore[no-untyped-def]
    from pybroker.broker.groups.consumer_outcomes import ConsumerHeartbeat
    from pybroker.broker.groups.topic_regex import TopicFilter
    box = Box()
    co.consumer_heartbeat(ConsumerHeartbeat(
        "g", member, 0, None, None, 30_000, [], regex, None, {}, "client", "/h",
        TopicFilter((principal, "h"), lambda topic: topic not in hidden)), now, box)
    return box.answers[0]


def test_a_regex_brings_only_the_topics_the_member_may_describe() -> None:
    co, _, _ = make()
    answer = regex_heartbeat(co, 0, "m1", "t.*", hidden={"t2"})
    assert answer.error is E.NONE and set(answer.assignment) == {T1}
    # another principal allowed to see both gets t2 (and shares t1)
    other = regex_heartbeat(co, 1, "m2", "t.*", hidden=set(), principal="User:bob")
    data = co.groups["g"].consumer
    assert set(data.subscription_metadata) == {"t1", "t2"}
    assert T2 in data.targets["m2"] and T2 not in data.targets["m1"]
    assert other.error is E.NONE


def test_a_group_deleted_while_its_write_was_in_flight_stays_deleted() -> None:
    from pybroker.broker.groups.consumer_outcomes import ConsumerHeartbeat
    co, log, _ = make()
    first = heartbeat(co, 0, "m1", topics=["t1"])
    log.hold = True
    box = Box()
    co.consumer_heartbeat(ConsumerHeartbeat("g", "m1", -1, None, None, -1, None, None, None, None,
                                            "client", "/h"), 1, box)
    deleted = Box()
    co.delete_groups(["g"], 2, deleted)
    log.release(E.KAFKA_STORAGE_ERROR)
    assert "g" not in co.groups
    log.hold = False
    # the group is gone: a heartbeat that is not a join finds no group (GROUP_ID_NOT_FOUND, as Kafka 4.4)
    assert heartbeat(co, 3, "m1", first.member_epoch).error is E.GROUP_ID_NOT_FOUND


def test_a_static_classic_member_replacing_the_last_consumer_member_turns_the_group_classic() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "c1", topics=["t1"])
    classic = join(co, "", 1).member_id
    heartbeat(co, 2, "s1", topics=["t1"], instance="i1")
    heartbeat(co, 3, "c1", -1)
    assert co.groups["g"].consumer is not None  # s1 still speaks the consumer protocol
    joined = static_join(co, "", "i1", 4)
    assert joined.error is E.NONE
    group = co.groups["g"]
    assert group.consumer is None and group.group_type == "classic"
    assert set(group.members) == {classic, joined.member_id}
    assert group.static_members == {"i1": joined.member_id}
