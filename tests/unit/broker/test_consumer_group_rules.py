"""Kafka 4's finer rules of consumer groups (KIP-848) in the coordinator: which OffsetCommit versions a
member may use, the member ids a classic JoinGroup hands out, what a failed write leaves behind."""

from __future__ import annotations

from pybroker.broker.groups.outcomes import CommitRequest, OffsetToCommit
from pybroker.protocol.errors import ErrorCode
from tests.unit.broker.consumer_kit import heartbeat, make
from tests.unit.broker.test_group_coordinator import Box
from tests.unit.broker.test_mixed_groups import join

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
