"""A group rebuilt from its last metadata record in `__consumer_offsets` (at startup, after replay).

A group that had a generation of members comes back Stable with those members, each given a fresh
session from the load time: live clients heartbeat on as if nothing happened, and members whose
clients died expire after their session timeout, as Kafka does after a coordinator move.
"""

from __future__ import annotations

from pybroker.broker.groups.group import Group, Member
from pybroker.broker.groups.state_machine import Event
from pybroker.protocol.messages.coordinator_records import GroupMetadataValue


def restore_group(group: Group, value: GroupMetadataValue, now: int) -> None:
    group.generation = value.generation
    group.protocol_type = value.protocol_type
    group.protocol_name = value.protocol
    group.leader_id = value.leader
    if value.current_state_timestamp >= 0:
        group.state_timestamp_ms = value.current_state_timestamp
    for m in value.members:
        protocols = [(value.protocol, m.subscription)] if value.protocol is not None else []
        group.members[m.member_id] = Member(
            m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout,
            m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout, value.protocol_type,
            protocols, m.assignment, last_heartbeat_ms=now)
        if m.group_instance_id is not None:
            group.static_members[m.group_instance_id] = m.member_id
    if group.members and value.protocol is not None:
        group.transition(Event.LOADED_STABLE, now)
    else:
        group.leader_id = None
