"""StreamsGroupTopologyDescriptionUpdate (key 93), version 0 (KIP-1331, Kafka 4.4): refused as Kafka refuses it
without a topology description plugin.

Kafka 4.4 stores a streams group's topology description only through a plugin
(`group.streams.topology.description.plugin.class`, none by default); without one it answers every push
UNSUPPORTED_VERSION with the message below, before looking at the group or member, and its heartbeats never ask
for a push (TopologyDescriptionRequired stays false). pybroker serves no plugin, so it answers the same, and
StreamsGroupDescribe v1 reports NOT_STORED. Served so that the version list matches Kafka 4.4's, which
advertises the key.

Authorizes READ on the GROUP (GROUP_AUTHORIZATION_FAILED), checked first, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_check import GROUP, GROUP_DENIED, Check, Op, Outcome
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.streams_group_topology_description_update import (
    StreamsGroupTopologyDescriptionUpdateRequest,
    StreamsGroupTopologyDescriptionUpdateResponse,
)

#: Kafka 4.4's message (its UnsupportedVersionException) when no description plugin is configured
NO_PLUGIN = "The broker has no streams group topology description plugin configured."


def topology_description_update_rule(check: Check, r: StreamsGroupTopologyDescriptionUpdateRequest) -> Outcome:
    if not check.ok(Op.READ, GROUP, r.group_id):
        return StreamsGroupTopologyDescriptionUpdateResponse(error_code=GROUP_DENIED, error_message=None)
    return None


@handler(ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE, versions=(0, 0), authorize=topology_description_update_rule)
def handle_streams_group_topology_description_update(ctx: RequestContext,
                                                     r: StreamsGroupTopologyDescriptionUpdateRequest) -> Any:
    return StreamsGroupTopologyDescriptionUpdateResponse(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION,
                                                         error_message=NO_PLUGIN)
