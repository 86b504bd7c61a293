"""kafka-streams-groups (Kafka 4.4's StreamsGroupCommand) against pybroker, compared with Kafka.

A streams group of two members is made on both brokers with the same raw StreamsGroupHeartbeats (a
one-subtopology topology with a changelog), heartbeated until both members reached their target; then the
tool lists it, describes its members, state and offsets, refuses to delete it while it has members, and
deletes it once they left. The tool's admin client negotiates StreamsGroupDescribe v1 with both, so the
--state line shows the assignor's name ("sticky") on both.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from pybroker.clients.wire import Connection, parse_bootstrap
from pybroker.protocol.messages import streams_group_heartbeat as h
from pybroker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pybroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from tests.kafka_tools.normalize import normalize
from tests.kafka_tools.runner import BOOTSTRAP as B
from tests.kafka_tools.runner import Targets

Names = Callable[[str], str]


def _topology(source: str, changelog: str) -> h.Topology:
    return h.Topology(epoch=0, subtopologies=[h.Subtopology(
        subtopology_id="0", source_topics=[source], source_topic_regex=[], repartition_sink_topics=[],
        state_changelog_topics=[h.TopicInfo(name=changelog, partitions=0, replication_factor=0, topic_configs=[])],
        repartition_source_topics=[], copartition_groups=[])])


def _group(bootstrap: str, group: str, source: str, leave: bool = False) -> None:
    """Two members join (or, with `leave`, leave) and heartbeat until each owns its target (Stable)."""
    host, port = parse_bootstrap(bootstrap)
    connection = Connection(host, port, timeout_s=30)
    try:
        if leave:
            for member in ("m1", "m2"):
                connection.request(h.StreamsGroupHeartbeatRequest(
                    group_id=group, member_id=member, member_epoch=-1, endpoint_information_epoch=0), 0)
            return
        topology = _topology(source, f"{group}-store-changelog")
        # Kafka makes __consumer_offsets when a coordinator is first looked for (NOT_COORDINATOR until then)
        connection.request(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
        epochs: dict[str, int] = {}
        owned: dict[str, list[h.StreamsGroupHeartbeatRequestTaskIds]] = {}
        deadline = time.monotonic() + 60
        while True:
            for member in ("m1", "m2"):
                request = h.StreamsGroupHeartbeatRequest(
                    group_id=group, member_id=member, member_epoch=epochs.get(member, 0), endpoint_information_epoch=0)
                if member not in epochs:
                    request.rebalance_timeout_ms, request.topology = 30_000, topology
                    request.process_id, request.client_tags = f"p-{member}", []
                    request.active_tasks, request.standby_tasks, request.warmup_tasks = [], [], []
                elif member in owned:
                    request.active_tasks, request.standby_tasks, request.warmup_tasks = owned[member], [], []
                answer = connection.request(request, 0)
                assert answer.error_code in (0, 14, 15, 16), answer  # a coordinator still loading: again
                if answer.error_code == 0:
                    epochs[member] = answer.member_epoch
                    if answer.active_tasks is not None:
                        owned[member] = [h.StreamsGroupHeartbeatRequestTaskIds(
                            subtopology_id=t.subtopology_id, partitions=t.partitions) for t in answer.active_tasks]
            tasks = sorted(p for m in owned.values() for t in m for p in t.partitions)
            if len(epochs) == 2 and len(set(epochs.values())) == 1 and tasks == [0, 1] and all(owned.values()):
                return
            assert time.monotonic() < deadline, (epochs, owned, answer)
            time.sleep(0.2)
    finally:
        connection.close()


def _members(text: str) -> list[tuple[str, ...]]:
    """--members --verbose rows without the epochs (Kafka counts its group epoch on a different step) and
    without which member got which task (either split is right); `_active` checks the split."""
    rows = []
    for line in text.splitlines()[1:]:
        cells = line.split()
        if cells:
            rows.append((cells[0], cells[2], cells[3], cells[4], cells[6], cells[7]))
    return sorted(rows)


def _active(text: str) -> list[str]:
    """Every member's current active tasks ("0:[1]"), sorted: each task once when the group is stable."""
    return sorted(task for line in text.splitlines()[1:] for task in re.findall(r"(?<!TARGET-)ACTIVE: (\S+);", line))


def test_kafka_streams_groups_list_describe_delete(targets: Targets, names: Names) -> None:
    group, source = names("app"), names("in")
    for bootstrap in (targets.ours, targets.kafkas):
        host, port = parse_bootstrap(bootstrap)
        connection = Connection(host, port, timeout_s=30)
        try:
            for topic in (source, f"{group}-store-changelog"):
                created = connection.request(CreateTopicsRequest(topics=[CreatableTopic(
                    name=topic, num_partitions=2, replication_factor=1)], timeout_ms=10_000), 4)
                assert created.topics[0].error_code == 0, created
        finally:
            connection.close()
    time.sleep(1)  # Kafka's metadata reaches its group coordinator asynchronously
    for bootstrap in (targets.ours, targets.kafkas):
        _group(bootstrap, group, source)
    g = ["--bootstrap-server", B, "--group", group]
    mine, theirs = targets.both("kafka-streams-groups", "--bootstrap-server", B, "--list")
    assert group in mine.lines and group in theirs.lines
    mine, theirs = targets.both("kafka-streams-groups", *g, "--describe", "--members", "--verbose")
    assert mine.check().lines and _members(mine.stdout) == _members(theirs.check().stdout), (mine.stdout, theirs.stdout)
    assert _active(mine.stdout) == _active(theirs.stdout) == ["0:[0]", "0:[1]"], (mine.stdout, theirs.stdout)
    mine, theirs = targets.both("kafka-streams-groups", *g, "--describe", "--state")
    assert normalize(theirs.check().stdout).split() == normalize(mine.check().stdout).split()
    assert "sticky" in mine.stdout.split()
    targets.same("kafka-streams-groups", *g, "--describe", "--offsets", normalize=normalize)
    mine, theirs = targets.both("kafka-streams-groups", *g, "--delete")
    assert "is not EMPTY" in mine.stdout and mine.stdout == theirs.stdout
    for bootstrap in (targets.ours, targets.kafkas):
        _group(bootstrap, group, source, leave=True)
    targets.same("kafka-streams-groups", *g, "--delete", normalize=normalize)
    mine, theirs = targets.both("kafka-streams-groups", "--bootstrap-server", B, "--list")
    assert group not in mine.lines and group not in theirs.lines
