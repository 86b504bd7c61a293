"""The streams protocol's coordinator rules (KIP-1071) on a coordinator over a fake topic table and log:
topology configuration and internal topics, epochs, revocation before reassignment, leaving, sessions,
the validation answers, and the group rebuilt from its records."""

from __future__ import annotations

import uuid
from typing import Any

from pybroker.broker.groups.config import GroupConfig
from pybroker.broker.groups.coordinator import GroupCoordinator
from pybroker.broker.groups.offsets_topic import ReplayedPartition
from pybroker.broker.streams_groups.assignor import Target, task_set
from pybroker.broker.streams_groups.group import MemberState, StreamsGroupState
from pybroker.broker.streams_groups.outcomes import StreamsHeartbeat, StreamsHeartbeatOutcome
from pybroker.broker.streams_groups.topology import StatusCode, Subtopology, TopicInfo, Topology
from pybroker.protocol.errors import ErrorCode
from tests.unit.broker.groups.test_group_coordinator import Box, FakeLog

TOPOLOGY = Topology(0, (
    Subtopology("0", source_topics=("in",), repartition_sink_topics=("app-rep",)),
    Subtopology("1", repartition_source_topics=(TopicInfo("app-rep"),),
                state_changelog_topics=(TopicInfo("app-store-changelog", configs=(("cleanup.policy", "compact"),)),)),
))


class Kit:
    def __init__(self, topics: dict[str, int] | None = None, **config: Any) -> None:
        self.table = {name: (uuid.uuid4(), count) for name, count in (topics or {}).items()}
        self.log = FakeLog()
        config.setdefault("streams_initial_rebalance_delay_ms", 0)  # tests of the delay set their own
        self.co = GroupCoordinator(GroupConfig(num_partitions=1, **config), self.log,
                                   topic_metadata=lambda: self.table)
        self.created: list[dict[str, tuple[int, dict[str, str], int]]] = []
        self.co.streams.create_topics = self.created.append

    def add_topics(self, **counts: int) -> None:
        self.table = {**self.table, **{n: (uuid.uuid4(), c) for n, c in counts.items()}}

    def beat(self, member: str, epoch: int, now: int = 0, *, owned: Target | None = None, process: str | None = None,
             topology: Topology | None = None, group: str = "app", **extra: Any) -> StreamsHeartbeatOutcome:
        if epoch == 0:
            topology = TOPOLOGY if topology is None else topology
            owned = Target() if owned is None else owned
            process = process or f"proc-{member}"
            extra.setdefault("rebalance_timeout_ms", 30_000)
        box = Box()
        self.co.streams_heartbeat(StreamsHeartbeat(group, member, epoch, topology=topology, owned=owned,
                                                   process_id=process, **extra), now, box)
        assert len(box.answers) == 1
        answer: StreamsHeartbeatOutcome = box.answers[0]
        return answer

    def data(self, group: str = "app") -> Any:
        return self.co.groups[group].streams


def _active(outcome: StreamsHeartbeatOutcome) -> set[tuple[str, int]]:
    assert outcome.assignment is not None
    return task_set(outcome.assignment.active)


def test_a_missing_source_topic_is_a_status_and_the_group_is_not_ready() -> None:
    kit = Kit()
    answer = kit.beat("m1", 0)
    assert answer.error is ErrorCode.NONE and answer.member_epoch == 2  # a new group's first join counts two
    assert [s.code for s in answer.statuses] == [StatusCode.MISSING_SOURCE_TOPICS]
    assert answer.statuses[0].detail == "Source topics in are missing."
    assert answer.assignment == Target()
    assert kit.data().state is StreamsGroupState.NOT_READY and not kit.created


def test_internal_topics_are_created_with_the_partitions_of_their_inputs_then_tasks_are_assigned() -> None:
    kit = Kit({"in": 4})
    answer = kit.beat("m1", 0)
    assert [s.code for s in answer.statuses] == [StatusCode.MISSING_INTERNAL_TOPICS]
    assert kit.created == [{"app-rep": (4, {}, 0), "app-store-changelog": (4, {"cleanup.policy": "compact"}, 0)}]
    kit.beat("m1", answer.member_epoch, 100)
    assert len(kit.created) == 1  # asked for once
    kit.add_topics(**{"app-rep": 4, "app-store-changelog": 4})
    ready = kit.beat("m1", answer.member_epoch, 200)
    assert ready.statuses == () and ready.member_epoch == answer.member_epoch + 1
    assert _active(ready) == {(s, p) for s in "01" for p in range(4)}
    assert kit.data().state is StreamsGroupState.STABLE


def test_a_task_moves_only_after_its_owner_revoked_it() -> None:
    kit = Kit({"in": 2, "app-rep": 2, "app-store-changelog": 2})
    first = kit.beat("m1", 0)
    assert len(_active(first)) == 4
    second = kit.beat("m2", 0, 10)
    assert second.assignment is not None and not _active(second)  # its tasks are still m1's
    assert kit.data().members["m2"].state is MemberState.UNRELEASED_TASKS
    revoking = kit.beat("m1", first.member_epoch, 20)
    assert revoking.member_epoch == first.member_epoch and len(_active(revoking)) == 2
    assert kit.data().members["m1"].state is MemberState.UNREVOKED_TASKS
    still = kit.beat("m2", second.member_epoch, 30)
    assert still.assignment is None or not _active(still)
    kept = revoking.assignment
    assert kept is not None
    done = kit.beat("m1", first.member_epoch, 40, owned=Target(kept.active))  # m1 gave them up
    assert done.member_epoch == second.member_epoch
    moved = kit.beat("m2", second.member_epoch, 50)
    assert len(_active(moved)) == 2 and not _active(moved) & task_set(kept.active)
    assert kit.data().state is StreamsGroupState.STABLE


def test_a_member_that_leaves_or_times_out_hands_its_tasks_to_the_others() -> None:
    kit = Kit({"in": 2, "app-rep": 2, "app-store-changelog": 2}, streams_session_timeout_ms=1000)
    a = kit.beat("m1", 0)
    b = kit.beat("m2", 0)
    kit.beat("m1", a.member_epoch, owned=Target())
    kit.beat("m2", b.member_epoch)
    left = kit.beat("m2", -1, 10)
    assert left.error is ErrorCode.NONE and "m2" not in kit.data().members
    epoch = kit.data().assignment_epoch
    assert len(task_set(kit.data().targets["m1"].active)) == 4
    kit.beat("m3", 0, 20)
    kit.co.tick(2000)  # both sessions ran out
    assert not kit.data().members and kit.data().state is StreamsGroupState.EMPTY
    assert kit.data().group_epoch > epoch


def test_refusals_say_why_as_kafka_does() -> None:
    kit = Kit({"in": 1})
    box = Box()
    kit.co.streams_heartbeat(StreamsHeartbeat("app", "m1", 0, topology=TOPOLOGY), 0, box)
    assert box.answers[0].error is ErrorCode.INVALID_REQUEST
    assert box.answers[0].message == "RebalanceTimeoutMs must be provided in first request."
    box = Box()
    kit.co.streams_heartbeat(StreamsHeartbeat("app", "m1", 0, rebalance_timeout_ms=1), 0, box)
    assert box.answers[0].message == "Topology must be non-null when (re-)joining."
    assert kit.beat("m1", 3).error is ErrorCode.GROUP_ID_NOT_FOUND
    joined = kit.beat("m1", 0)
    assert kit.beat("nobody", 1).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert kit.beat("m1", joined.member_epoch + 5).error is ErrorCode.FENCED_MEMBER_EPOCH
    changed = Topology(0, (Subtopology("0", source_topics=("other",)),))
    assert kit.beat("m2", 0, topology=changed).error is ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH
    broken = Topology(1, (Subtopology("0", source_topics=("in", "bad name")),))
    assert kit.beat("m2", 0, topology=broken).error is ErrorCode.STREAMS_INVALID_TOPOLOGY
    duplicate = Topology(1, (Subtopology("0", source_topics=("in",)), Subtopology("0", source_topics=("in",))))
    assert kit.beat("m2", 0, topology=duplicate).error is ErrorCode.STREAMS_INVALID_TOPOLOGY
    assert kit.beat("", 0).message == "MemberId can't be empty."
    many = Topology(1, (Subtopology("0", source_topics=("in",), state_changelog_topics=tuple(
        TopicInfo(f"c{i}") for i in range(1001))),))
    assert kit.beat("m2", 0, topology=many).message == "At most 1000 internal topics."
    ours = Topology(1, (Subtopology("0", source_topics=("in",), state_changelog_topics=(
        TopicInfo("__transaction_state"),)),))
    assert kit.beat("m2", 0, topology=ours).error is ErrorCode.STREAMS_INVALID_TOPOLOGY


def test_a_newer_topology_replaces_the_groups_and_stale_members_are_told() -> None:
    kit = Kit({"in": 1, "app-rep": 1, "app-store-changelog": 1})
    old = kit.beat("m1", 0)
    newer = Topology(1, (Subtopology("0", source_topics=("in",)),))
    kit.beat("m2", 0, topology=newer)
    assert kit.data().topology == newer
    stale = kit.beat("m1", old.member_epoch)
    assert stale.error in (ErrorCode.NONE, ErrorCode.FENCED_MEMBER_EPOCH)
    if stale.error is ErrorCode.NONE:
        assert StatusCode.STALE_TOPOLOGY in [s.code for s in stale.statuses]


def test_the_group_comes_back_from_its_records() -> None:
    kit = Kit({"in": 2, "app-rep": 2, "app-store-changelog": 2})
    a = kit.beat("m1", 0, instance_id=None)
    kit.beat("m2", 0)
    kit.beat("m1", a.member_epoch)
    replayed = ReplayedPartition()
    for record in kit.log.decoded():
        replayed.apply(record)
    fresh = GroupCoordinator(GroupConfig(num_partitions=1), FakeLog(), topic_metadata=lambda: kit.table)
    fresh.begin_loading([0])
    fresh.finish_loading(0, replayed.groups, replayed.offsets, 1000, replayed.pending, replayed.consumer,
                         replayed.streams)
    before, after = kit.data(), fresh.groups["app"].streams
    assert after is not None and fresh.groups["app"].group_type == "streams"
    assert (after.group_epoch, after.assignment_epoch, after.metadata_hash, after.topology) == \
        (before.group_epoch, before.assignment_epoch, before.metadata_hash, before.topology)
    for member_id, member in before.members.items():
        restored = after.members[member_id]
        assert (restored.member_epoch, restored.state, restored.assigned, restored.pending_revocation,
                restored.process_id) == (member.member_epoch, member.state, member.assigned,
                                         member.pending_revocation, member.process_id)
    assert after.targets == before.targets
    # and the group goes on: a heartbeat at the restored epoch is accepted
    box = Box()
    fresh.streams_heartbeat(StreamsHeartbeat("app", "m2", after.members["m2"].member_epoch), 1000, box)
    assert box.answers[0].error is ErrorCode.NONE


def test_deleting_an_empty_streams_group_writes_its_tombstones() -> None:
    kit = Kit({"in": 1, "app-rep": 1, "app-store-changelog": 1})
    joined = kit.beat("m1", 0)
    box = Box()
    kit.co.delete_groups(["app"], 0, box)
    assert box.answers[0] == {"app": ErrorCode.NON_EMPTY_GROUP}
    kit.beat("m1", -1)
    assert joined.error is ErrorCode.NONE
    box = Box()
    kit.co.delete_groups(["app"], 0, box)
    assert box.answers[0] == {"app": ErrorCode.NONE} and "app" not in kit.co.groups
    replayed = ReplayedPartition()
    for record in kit.log.decoded():
        replayed.apply(record)
    assert not replayed.streams["app"].exists


def test_a_static_member_that_left_comes_back_under_a_new_id_without_a_rebalance() -> None:
    kit = Kit({"in": 2, "app-rep": 2, "app-store-changelog": 2})
    a = kit.beat("m1", 0, instance_id="i1")
    b = kit.beat("m2", 0)
    kit.beat("m1", a.member_epoch, owned=Target())
    kit.beat("m2", b.member_epoch)
    assert kit.beat("m3", 0, instance_id="i1").error is ErrorCode.UNRELEASED_INSTANCE_ID
    epoch, target = kit.data().group_epoch, kit.data().targets["m1"]
    assert kit.beat("m1", -2, instance_id="i1").error is ErrorCode.NONE
    back = kit.beat("m1-new", 0, instance_id="i1", process="proc-m1")
    assert back.error is ErrorCode.NONE and "m1" not in kit.data().members
    assert kit.data().group_epoch == epoch and kit.data().targets["m1-new"] == target
    assert back.assignment == target


def test_a_heartbeat_whose_records_were_not_written_changes_nothing() -> None:
    kit = Kit({"in": 2, "app-rep": 2, "app-store-changelog": 2})
    a = kit.beat("m1", 0)
    before = (kit.data().group_epoch, set(kit.data().members), kit.data().targets)
    kit.log.hold = True
    box = Box()
    kit.co.streams_heartbeat(StreamsHeartbeat("app", "m2", 0, topology=TOPOLOGY, owned=Target(), process_id="p2",
                                              rebalance_timeout_ms=30_000), 0, box)
    kit.log.release(ErrorCode.KAFKA_STORAGE_ERROR)
    assert box.answers[0].error is not ErrorCode.NONE
    assert (kit.data().group_epoch, set(kit.data().members), kit.data().targets) == before
    kit.log.hold = False
    again = kit.beat("m1", a.member_epoch)
    assert again.error is ErrorCode.NONE and again.member_epoch == a.member_epoch
    box = Box()
    kit.log.hold = True
    kit.co.streams_heartbeat(StreamsHeartbeat("other", "m1", 0, topology=TOPOLOGY, owned=Target(), process_id="p",
                                              rebalance_timeout_ms=30_000), 0, box)
    kit.log.release(ErrorCode.KAFKA_STORAGE_ERROR)
    assert "other" not in kit.co.groups  # a group its first heartbeat made is gone with it
