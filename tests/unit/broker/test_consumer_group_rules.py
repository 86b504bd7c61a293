"""Kafka 4's finer rules of consumer groups (KIP-848) in the coordinator: which OffsetCommit versions a
member may use, the member ids a classic JoinGroup hands out, what a failed write leaves behind."""

from __future__ import annotations

from pybroker.broker.groups.outcomes import CommitRequest, JoinRequest, OffsetToCommit
from pybroker.protocol.errors import ErrorCode
from tests.unit.broker.consumer_kit import heartbeat, make
from tests.unit.broker.test_group_coordinator import Box
from tests.unit.broker.test_mixed_groups import join, subscription

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
