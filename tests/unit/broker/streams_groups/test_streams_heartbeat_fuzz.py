"""Arbitrary StreamsGroupHeartbeats (any epochs, ids, topologies, owned tasks, processes, in any order, with
topics appearing and time passing) never make the coordinator raise, always get one of the codes Kafka's spec
lists for the API, and never leave an active task with two members; the records they write always replay.
And the streams records' decoder, fed arbitrary bytes, only ever answers a record or DecodeError."""

from __future__ import annotations

import contextlib
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.broker.groups.offsets_topic import ReplayedPartition
from pybroker.broker.streams_groups.assignor import Target, task_set
from pybroker.broker.streams_groups.outcomes import StreamsHeartbeat
from pybroker.broker.streams_groups.records import restore_streams
from pybroker.broker.streams_groups.topology import Subtopology, TopicInfo, Topology
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.offsets_topic_records import decode_record
from pybroker.protocol.primitives import DecodeError
from pybroker.protocol.streams_offsets_records import STREAMS_RECORD_KINDS
from tests.unit.broker.streams_groups.test_streams_groups import TOPOLOGY, Kit

E = ErrorCode
ALLOWED = {E.NONE, E.INVALID_REQUEST, E.UNKNOWN_MEMBER_ID, E.FENCED_MEMBER_EPOCH, E.UNRELEASED_INSTANCE_ID,
           E.GROUP_MAX_SIZE_REACHED, E.GROUP_ID_NOT_FOUND, E.STREAMS_INVALID_TOPOLOGY,
           E.STREAMS_INVALID_TOPOLOGY_EPOCH}

OTHER = Topology(1, (Subtopology("0", source_topics=("in",), state_changelog_topics=(TopicInfo("app-other"),)),))
SAME_EPOCH_OTHER = Topology(0, (Subtopology("0", source_topics=("in",)),))
BROKEN = Topology(2, (Subtopology("0", source_topics=("in",)), Subtopology("0", source_topics=("in",))))
tasks = st.dictionaries(st.sampled_from(["0", "1", "9"]), st.frozensets(st.integers(-1, 5), min_size=1, max_size=4),
                        max_size=3)
owned = st.none() | st.builds(Target, tasks, tasks, tasks)
beat = st.fixed_dictionaries({
    "member": st.sampled_from(["", "a", "b", "c"]),
    "epoch": st.integers(-3, 6),
    "topology": st.sampled_from([None, TOPOLOGY, OTHER, SAME_EPOCH_OTHER, BROKEN]),
    "owned": owned,
    "process": st.none() | st.sampled_from(["p1", "p2"]),
    "instance": st.none() | st.sampled_from(["", "i1"]),
    "rebalance": st.sampled_from([-1, 0, 1000]),
    "shutdown": st.booleans(),
    "topics": st.booleans(),
    "advance": st.integers(0, 50_000),
})


@settings(max_examples=150, deadline=None)
@given(st.lists(beat, min_size=1, max_size=25), st.booleans())
def test_arbitrary_heartbeats(beats: list[dict], tick: bool) -> None:
    kit = Kit({"in": 3}, streams_max_size=3, streams_num_standby_replicas=1)
    now = 0
    for b in beats:
        now += b["advance"]
        if b["topics"]:
            kit.add_topics(**{"app-rep": 3, "app-store-changelog": 3, "app-other": 3})
        if tick:
            kit.co.tick(now)
        box: list = []
        kit.co.streams_heartbeat(StreamsHeartbeat(
            "app", b["member"], b["epoch"], topology=b["topology"], owned=b["owned"], process_id=b["process"],
            instance_id=b["instance"], rebalance_timeout_ms=b["rebalance"], shutdown_application=b["shutdown"]),
            now, box.append)
        assert len(box) == 1 and box[0].error in ALLOWED, box
        group = kit.co.groups.get("app")
        if group is not None and group.streams is not None:
            seen: set[tuple[str, int]] = set()
            for member in group.streams.members.values():
                for held in (member.assigned.active, member.pending_revocation.active):
                    for task in task_set(held):
                        assert task not in seen
                        seen.add(task)
    replayed = ReplayedPartition()
    for record in kit.log.decoded():
        replayed.apply(record)
    for group_id, found in replayed.streams.items():
        if found.exists:
            data = restore_streams(found, now)
            assert set(data.members) == set(kit.co.groups[group_id].streams.members)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(STREAMS_RECORD_KINDS)), st.binary(max_size=200), st.none() | st.binary(max_size=300))
def test_the_records_decoder_answers_a_record_or_decode_error(kind: int, key: bytes, value: bytes | None) -> None:
    with contextlib.suppress(DecodeError):  # any other exception fails the test
        decode_record(kind.to_bytes(2, "big") + key, value)


def test_a_key_of_a_known_kind_round_trips() -> None:
    from pybroker.protocol.streams_offsets_records import STREAMS_GROUP_MEMBER_METADATA, streams_key

    record = decode_record(streams_key(STREAMS_GROUP_MEMBER_METADATA, "g", str(uuid.UUID(int=1))), None)
    assert record is not None and (record.group, record.value) == ("g", None)  # type: ignore[union-attr]
