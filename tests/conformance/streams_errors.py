"""Error paths of the streams group protocol (KIP-1071): heartbeats Kafka refuses before any group is
made (no rebalance timeout, no topology, an unknown group, an empty member id, an invalid epoch) and describes
of groups that are not streams groups, at v0 and at Kafka 4.4's v1 (KIP-1331: the topology description asked
for), and StreamsGroupTopologyDescriptionUpdate, which Kafka refuses without a description plugin. A
successful join is not compared:
Kafka 4.4 delays a new streams group's first assignment (`group.streams.initial.rebalance.delay.ms`, a
status pybroker does not send), see docs/streams-groups.md.
"""

from __future__ import annotations

from pybroker.protocol.messages import streams_group_heartbeat as h
from pybroker.protocol.messages import streams_group_topology_description_update as u
from pybroker.protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
from tests.conformance.group_errors import joined
from tests.conformance.registry import scenario
from tests.conformance.side import Side

FAMILY = "streams_errors"


def _topology(side: Side) -> h.Topology:
    return h.Topology(epoch=0, subtopologies=[h.Subtopology(
        subtopology_id="0", source_topics=[side.name("in")], source_topic_regex=[], state_changelog_topics=[],
        repartition_sink_topics=[], repartition_source_topics=[], copartition_groups=[])])


def _join(side: Side, **fields: object) -> h.StreamsGroupHeartbeatRequest:
    request = h.StreamsGroupHeartbeatRequest(
        group_id=side.name("g"), member_id="member-1", member_epoch=0, endpoint_information_epoch=0,
        rebalance_timeout_ms=30_000, topology=_topology(side), process_id="process-1", client_tags=[],
        active_tasks=[], standby_tasks=[], warmup_tasks=[])
    for key, value in fields.items():
        setattr(request, key, value)
    return request


@scenario("streams/heartbeat-refused", FAMILY, "StreamsGroupHeartbeat v0 joins Kafka refuses: no rebalance "
          "timeout, no topology, an empty member id, an epoch below -2, and a heartbeat to a group nobody made")
async def _refused(side: Side) -> None:
    await side.call(_join(side, rebalance_timeout_ms=-1), 0)
    await side.call(_join(side, topology=None), 0)
    await side.call(_join(side, member_id=""), 0)
    await side.call(_join(side, member_epoch=-3), 0)
    await side.call(_join(side, member_epoch=3, topology=None), 0)


@scenario("streams/describe-not-streams", FAMILY, "StreamsGroupDescribe v0 of a group nobody made and of a "
          "classic group")
async def _describe(side: Side) -> None:
    await joined(side)
    await side.call(StreamsGroupDescribeRequest(group_ids=[side.name("none"), side.name("g")],
                                                include_authorized_operations=False), 0)


@scenario("streams/heartbeat-refused-v1", FAMILY, "StreamsGroupHeartbeat v1 (KIP-1331) joins Kafka refuses: no "
          "rebalance timeout, no topology, an empty member id, and a heartbeat to a group nobody made")
async def _refused_v1(side: Side) -> None:
    await side.call(_join(side, rebalance_timeout_ms=-1), 1)
    await side.call(_join(side, topology=None), 1)
    await side.call(_join(side, member_id=""), 1)
    await side.call(_join(side, member_epoch=3, topology=None), 1)


@scenario("streams/describe-not-streams-v1", FAMILY, "StreamsGroupDescribe v1 asking for the topology "
          "description, of a group nobody made and of a classic group: no status, no assignor name")
async def _describe_v1(side: Side) -> None:
    await joined(side)
    for include in (False, True):
        await side.call(StreamsGroupDescribeRequest(group_ids=[side.name("none"), side.name("g")],
                                                    include_authorized_operations=False,
                                                    include_topology_description=include), 1)


@scenario("streams/topology-description-update", FAMILY, "StreamsGroupTopologyDescriptionUpdate v0: refused "
          "UNSUPPORTED_VERSION without a topology description plugin (Kafka's default), whatever the group, "
          "member or description")
async def _description_update(side: Side) -> None:
    node = u.TopologyDescriptionNode(name="KSTREAM-SOURCE-0000000000", node_type=1, source_topics=[side.name("in")],
                                     sink_topic=None, stores=[], successors=[])
    description = u.TopologyDescription(subtopologies=[u.TopologyDescriptionSubtopology(subtopology_id="0",
                                                                                         nodes=[node])],
                                        global_stores=[])
    await side.call(u.StreamsGroupTopologyDescriptionUpdateRequest(
        group_id=side.name("g"), member_id="member-1", topology_epoch=0, topology_description=description), 0)
    await side.call(u.StreamsGroupTopologyDescriptionUpdateRequest(
        group_id="", member_id="", topology_epoch=-1, topology_description=u.TopologyDescription()), 0)
