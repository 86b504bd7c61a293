"""Error paths of the streams group protocol (KIP-1071): heartbeats Kafka refuses before any group is
made (no rebalance timeout, no topology, an unknown group, an empty member id, an invalid epoch) and describes
of groups that are not streams groups, at v0 and at Kafka 4.4's v1 (KIP-1331: the topology description asked
for), and StreamsGroupTopologyDescriptionUpdate, which Kafka refuses without a description plugin. Then a
group's streams configs (IncrementalAlterConfigs/DescribeConfigs on a GROUP, good and refused values) and the
epochs of a new group's first join, with and without the initial rebalance delay
(`streams.initial.rebalance.delay.ms`): Kafka 4.4 counts two group epochs there (docs/streams-groups.md).
The joins name a source topic that does not exist, so that no answer depends on when Kafka's group
coordinator sees a new topic.
"""

from __future__ import annotations

from pybroker.protocol.messages import streams_group_heartbeat as h
from pybroker.protocol.messages import streams_group_topology_description_update as u
from pybroker.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from pybroker.protocol.messages.incremental_alter_configs import (
    AlterableConfig as IncrementalConfig,
)
from pybroker.protocol.messages.incremental_alter_configs import (
    AlterConfigsResource as IncrementalResource,
)
from pybroker.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
)
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


GROUP = 32
SET, DELETE = 0, 1
STREAMS_KEYS = ["streams.session.timeout.ms", "streams.heartbeat.interval.ms", "streams.num.standby.replicas",
                "streams.initial.rebalance.delay.ms"]


def _alter(side: Side, *changes: tuple[str, int, str | None]) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(resources=[IncrementalResource(
        resource_type=GROUP, resource_name=side.name("g"),
        configs=[IncrementalConfig(key, operation, value) for key, operation, value in changes])],
        validate_only=False)


def _describe_group(side: Side) -> DescribeConfigsRequest:
    return DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=GROUP, resource_name=side.name("g"), configuration_keys=list(STREAMS_KEYS))])


@scenario("streams/group-configs", FAMILY, "IncrementalAlterConfigs v1 of a group's streams configs (session "
          "timeout, heartbeat interval, standby replicas, initial rebalance delay) and DescribeConfigs v4 of them: "
          "set, described, one deleted")
async def _group_configs(side: Side) -> None:
    await side.call(_describe_group(side), 4)
    await side.call(_alter(side, ("streams.session.timeout.ms", SET, "50000"),
                           ("streams.heartbeat.interval.ms", SET, "6000"),
                           ("streams.num.standby.replicas", SET, "1"),
                           ("streams.initial.rebalance.delay.ms", SET, "0")), 1)
    await side.call(_describe_group(side), 4)
    await side.call(_alter(side, ("streams.session.timeout.ms", DELETE, None)), 1)
    await side.call(_describe_group(side), 4)


@scenario("streams/group-configs-refused", FAMILY, "IncrementalAlterConfigs v1 of a group's streams configs Kafka "
          "refuses: out of the broker's bounds, below the least value, not a number; nothing changes")
async def _group_configs_refused(side: Side) -> None:
    for key, value in (("streams.session.timeout.ms", "30000"), ("streams.session.timeout.ms", "0"),
                       ("streams.heartbeat.interval.ms", "20000"), ("streams.num.standby.replicas", "3"),
                       ("streams.num.standby.replicas", "-1"), ("streams.initial.rebalance.delay.ms", "soon"),
                       ("streams.initial.rebalance.delay.ms", "-5")):
        await side.call(_alter(side, (key, SET, value)), 1)
    await side.call(_describe_group(side), 4)


@scenario("streams/group-configs-used", FAMILY, "A streams group's own heartbeat interval, told to a member that "
          "joins, and its initial rebalance delay of 0: the first join's epochs")
async def _group_configs_used(side: Side) -> None:
    await side.call(_alter(side, ("streams.heartbeat.interval.ms", SET, "7000"),
                           ("streams.initial.rebalance.delay.ms", SET, "0")), 1)
    await side.call(_join(side), 0)


@scenario("streams/first-join-epochs", FAMILY, "A new streams group's first member (no initial rebalance delay for "
          "the group): the epochs its join and its next heartbeat carry, and the group's epochs described")
async def _first_join_epochs(side: Side) -> None:
    await side.call(_alter(side, ("streams.initial.rebalance.delay.ms", SET, "0")), 1)
    first = await side.call(_join(side), 0)
    await side.call(_describe_streams(side), 0)
    await side.call(h.StreamsGroupHeartbeatRequest(group_id=side.name("g"), member_id="member-1",
                                                   member_epoch=first.member_epoch, endpoint_information_epoch=0), 0)
    await side.call(_describe_streams(side), 0)
    # the group empties and a member joins again: one epoch, as for any join
    await side.call(h.StreamsGroupHeartbeatRequest(group_id=side.name("g"), member_id="member-1", member_epoch=-1,
                                                   endpoint_information_epoch=0), 0)
    await side.call(_join(side, member_id="member-2", process_id="process-2"), 0)
    await side.call(_describe_streams(side), 0)


def _describe_streams(side: Side) -> StreamsGroupDescribeRequest:
    return StreamsGroupDescribeRequest(group_ids=[side.name("g")], include_authorized_operations=False)


@scenario("streams/initial-rebalance-delay", FAMILY, "A new streams group with Kafka's default initial rebalance "
          "delay (3 s): the first join is answered at the first epoch with ASSIGNMENT_DELAYED, the group counts a "
          "second epoch whose target waits, and a heartbeat within the delay is told so again")
async def _initial_delay(side: Side) -> None:
    first = await side.call(_join(side), 0)
    await side.call(_describe_streams(side), 0)
    await side.call(h.StreamsGroupHeartbeatRequest(group_id=side.name("g"), member_id="member-1",
                                                   member_epoch=first.member_epoch, endpoint_information_epoch=0), 0)


@scenario("streams/missing-client-tags", FAMILY, "A group's streams.rack.aware.assignment.tags (set, described, a "
          "duplicate refused) and members joining three such groups: a v1 member lacking one of the tags is told "
          "MISSING_CLIENT_TAGS, a v0 member is not, a v1 member with them all is not")
async def _missing_client_tags(side: Side) -> None:
    groups = {"g": (1, [h.KeyValue(key="zone", value="a")]), "h": (0, [h.KeyValue(key="zone", value="b")]),
              "k": (1, [h.KeyValue(key="zone", value="c"), h.KeyValue(key="rack", value="r")])}
    for suffix in groups:
        await side.call(IncrementalAlterConfigsRequest(resources=[IncrementalResource(
            resource_type=GROUP, resource_name=side.name(suffix), configs=[
                IncrementalConfig("streams.rack.aware.assignment.tags", SET, "zone, rack"),
                IncrementalConfig("streams.initial.rebalance.delay.ms", SET, "0")])], validate_only=False), 1)
    await side.call(_alter(side, ("streams.rack.aware.assignment.tags", SET, "zone,zone")), 1)
    await side.call(DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=GROUP, resource_name=side.name("g"),
        configuration_keys=["streams.rack.aware.assignment.tags"])]), 4)
    for suffix, (version, tags) in groups.items():
        await side.call(_join(side, group_id=side.name(suffix), client_tags=tags), version)
