"""Classic members in a consumer group, and groups changing protocol (Kafka 4's mixed groups), driven with an
injected clock."""

from __future__ import annotations

from pybroker.broker.groups.mixed_groups import parse_assignment
from pybroker.broker.groups.outcomes import JoinRequest, SyncRequest
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.consumer_protocol import ConsumerProtocolSubscription, OwnedTopicPartition
from tests.unit.broker.groups.consumer_kit import T1, heartbeat, make
from tests.unit.broker.groups.test_group_coordinator import Box

E = ErrorCode


def subscription(topics: list[str], owned: dict[str, list[int]] | None = None) -> bytes:
    value = ConsumerProtocolSubscription(topics=topics, owned_partitions=[
        OwnedTopicPartition(topic=t, partitions=p) for t, p in (owned or {}).items()])
    return (1).to_bytes(2, "big") + value.encode(1)


def join(co, member_id: str, now: int, owned: dict[str, list[int]] | None = None):  # type: ignore[no-untyped-def]
    box = Box()
    co.join(JoinRequest("g", member_id, None, "classic-client", "/h", 10_000, 10_000, "consumer",
                        [("cooperative-sticky", subscription(["t1"], owned))], False), now, box)
    assert len(box.answers) == 1
    return box.answers[0]


def sync(co, member_id: str, generation: int, now: int,  # type: ignore[no-untyped-def]
         protocol: str = "cooperative-sticky") -> dict[str, list[int]]:
    box = Box()
    co.sync(SyncRequest("g", generation, member_id, None, "consumer", protocol, {}), now, box)
    outcome = box.answers[0]
    assert outcome.error is E.NONE, outcome
    parsed = parse_assignment(outcome.assignment)
    assert parsed is not None
    return {a.topic: sorted(a.partitions) for a in parsed.assigned_partitions}


def test_a_classic_member_joins_a_consumer_group_and_shares_its_partitions() -> None:
    co, _, _ = make()
    first = heartbeat(co, 0, "c1", topics=["t1"])
    assert first.assignment == {T1: frozenset(range(4))}
    joined = join(co, "", 1)
    assert joined.error is E.NONE and joined.leader == "" and joined.protocol_name == "cooperative-sticky"
    classic_id, generation = joined.member_id, joined.generation
    assert sync(co, classic_id, generation, 2) == {}  # c1 still owns everything
    assert co.heartbeat("g", generation, classic_id, None, 3) is E.REBALANCE_IN_PROGRESS
    revoke = heartbeat(co, 4, "c1", first.member_epoch, owned=first.assignment)
    assert revoke.assignment is not None and len(revoke.assignment[T1]) == 2
    heartbeat(co, 5, "c1", first.member_epoch, owned=revoke.assignment)
    again = join(co, classic_id, 6)
    got = sync(co, classic_id, again.generation, 7)
    assert set(got["t1"]) == set(range(4)) - set(revoke.assignment[T1])
    assert co.heartbeat("g", again.generation, classic_id, None, 8) is E.NONE
    assert co.groups["g"].state_name == "Stable"
    assert co.heartbeat("g", again.generation - 1, classic_id, None, 8) is E.ILLEGAL_GENERATION


def test_the_last_consumer_member_leaving_turns_the_group_classic() -> None:
    co, _, _ = make()
    heartbeat(co, 0, "c1", topics=["t1"])
    classic_id = join(co, "", 1).member_id
    heartbeat(co, 2, "c1", -1)
    group = co.groups["g"]
    assert group.consumer is None and group.group_type == "classic"
    assert list(group.members) == [classic_id] and group.state_name == "PreparingRebalance"
    assert co.heartbeat("g", group.generation, classic_id, None, 3) is E.REBALANCE_IN_PROGRESS


def test_a_stable_classic_group_upgrades_when_a_consumer_member_joins() -> None:
    co, _, _ = make(initial_rebalance_delay_ms=0)
    box = Box()
    co.join(JoinRequest("g", "", None, "old", "/h", 10_000, 10_000, "consumer",
                        [("range", subscription(["t1"]))], False), 0, box)
    joined = box.answers[0]
    from pybroker.protocol.messages.consumer_protocol import (
        AssignedTopicPartition,
        ConsumerProtocolAssignment,
    )
    assignment = (0).to_bytes(2, "big") + ConsumerProtocolAssignment(
        assigned_partitions=[AssignedTopicPartition(topic="t1", partitions=[0, 1, 2, 3])]).encode(0)
    synced = Box()
    co.sync(SyncRequest("g", joined.generation, joined.member_id, None, "consumer", "range",
                        {joined.member_id: assignment}), 1, synced)
    assert synced.answers[0].error is E.NONE
    answer = heartbeat(co, 2, "new", topics=["t1"])
    assert answer.error is E.NONE
    group = co.groups["g"]
    assert group.consumer is not None and set(group.consumer.members) == {joined.member_id, "new"}
    # the old member still owns its partitions until it rejoins
    assert answer.assignment == {}
    assert co.heartbeat("g", joined.generation, joined.member_id, None, 3) is E.REBALANCE_IN_PROGRESS
    rejoined = join_as(co, joined.member_id, 4)
    kept = sync(co, joined.member_id, rejoined.generation, 5, "range")
    assert len(kept.get("t1", [])) == 2


def join_as(co, member_id: str, now: int):  # type: ignore[no-untyped-def]
    box = Box()
    co.join(JoinRequest("g", member_id, None, "old", "/h", 10_000, 10_000, "consumer",
                        [("range", subscription(["t1"], {"t1": [0, 1, 2, 3]}))], False), now, box)
    return box.answers[0]


def test_the_migration_policy_can_forbid_the_downgrade() -> None:
    co, _, _ = make(consumer_migration_policy="upgrade")
    heartbeat(co, 0, "c1", topics=["t1"])
    join(co, "", 1)
    heartbeat(co, 2, "c1", -1)
    assert co.groups["g"].group_type == "consumer"


def test_a_classic_member_of_a_consumer_group_comes_back_after_a_restart() -> None:
    from pybroker.broker.groups.offsets_topic import ReplayedPartition

    co, log, table = make()
    heartbeat(co, 0, "c1", topics=["t1"])
    classic_id = join(co, "", 1).member_id
    replayed = ReplayedPartition()
    for record in log.decoded():
        replayed.apply(record)
    restarted, _, _ = make(table)
    restarted.begin_loading([0])
    restarted.finish_loading(0, replayed.groups, replayed.offsets, 100, replayed.pending, replayed.consumer)
    data = restarted.groups["g"].consumer
    assert data is not None and data.members[classic_id].classic is not None
    assert data.members[classic_id].classic.session_timeout_ms == 10_000


def test_a_classic_rejoin_that_changes_nothing_writes_nothing() -> None:
    co, log, _ = make()
    heartbeat(co, 0, "c1", topics=["t1"])
    joined = join(co, "", 1)
    again = join(co, joined.member_id, 2)
    assert again.error is E.NONE and again.generation == joined.generation
    assert all(records for _, records in log.written), "an empty batch was appended"
