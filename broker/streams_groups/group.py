"""A streams group's membership as the coordinator holds it (KIP-1071): members, epochs, the topology,
targets, and the states of the group and of each member.

Plain data plus small queries. A streams group is a `Group` (broker/groups/group.py) whose `streams`
holds this, so its committed offsets, expiry, listing and deletion are those of any group. The decisions
live in `streams_groups.StreamsGroups`. Event loop's thread only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

from pybroker.broker.streams_groups.assignor import Target, Tasks, task_set
from pybroker.broker.streams_groups.topology import Configured, Topology

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class StreamsGroupState(StrEnum):
    """Kafka's names: no members; the topology cannot run yet (topics missing); a new target is due;
    members moving towards it; everyone at it."""

    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(IntEnum):
    """Kafka's member states, as the current-assignment record stores them."""

    STABLE = 0
    UNREVOKED_TASKS = 1
    UNRELEASED_TASKS = 2


@dataclass(slots=True)
class Endpoint:
    host: str
    port: int


@dataclass(slots=True)
class StreamsMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = 0
    process_id: str = ""
    user_endpoint: Endpoint | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Target = field(default_factory=Target)
    pending_revocation: Target = field(default_factory=Target)
    #: what the member last said it owns (its heartbeats send the lists only when they change)
    owned: Target | None = None
    task_offsets: list[tuple[str, int, int]] = field(default_factory=list)
    task_end_offsets: list[tuple[str, int, int]] = field(default_factory=list)
    last_heartbeat_ms: int = 0
    #: past this, a member that did not revoke what it was asked to is fenced (-1: not revoking)
    revocation_deadline_ms: int = -1
    #: a classic member in a streams group: never (streams groups take only streams members)
    classic: None = None


@dataclass(slots=True)
class StreamsGroupData:
    group_epoch: int = 0
    assignment_epoch: int = 0
    metadata_hash: int = 0
    topology: Topology | None = None
    members: dict[str, StreamsMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    targets: dict[str, Target] = field(default_factory=dict)
    #: the topology configured against the topic table it was computed from (identity of that table)
    configured: Configured | None = None
    configured_source: object = None
    #: a member asked the whole application to stop (SHUTDOWN_APPLICATION to everyone)
    shutdown_requested: bool = False
    #: bumped whenever a new target is computed: members with an endpoint learn where tasks run
    endpoint_epoch: int = 0
    #: no new target before this time (the initial rebalance delay of a first join; memory only, as Kafka's timer)
    assign_after_ms: int = -1
    state: StreamsGroupState = StreamsGroupState.EMPTY

    def active_owners(self, excluding: str) -> set[tuple[str, int]]:
        """Active tasks another member holds (assigned, or still to revoke): not to be given yet."""
        owned: set[tuple[str, int]] = set()
        for member_id, member in self.members.items():
            if member_id != excluding:
                owned |= task_set(member.assigned.active) | task_set(member.pending_revocation.active)
        return owned

    def refresh_state(self) -> None:
        if not self.members:
            self.state = StreamsGroupState.EMPTY
        elif self.configured is None or not self.configured.ready:
            self.state = StreamsGroupState.NOT_READY
        elif self.group_epoch > self.assignment_epoch:
            self.state = StreamsGroupState.ASSIGNING
        elif any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
                 for m in self.members.values()):
            self.state = StreamsGroupState.RECONCILING
        else:
            self.state = StreamsGroupState.STABLE


def tasks_size(tasks: Tasks) -> int:
    return sum(len(parts) for parts in tasks.values())
