"""The membership rules both epoch-based protocols share: KIP-848's consumer groups (`consumer_groups.py`)
and KIP-1071's streams groups (`broker/streams_groups/streams_groups.py`).

Both keep, per group, members with a member epoch, static members by instance id, a target per member at an
assignment epoch and a group epoch; both write a member's metadata, its target and its current assignment as
records in `__consumer_offsets`, answer a heartbeat only once its records are durable (undoing the change
when they are not), hand a static member's slot to its instance when it comes back, and fence a member past
its session or its revocation deadline. Kafka writes the two with one set of rules; so do we, here. What
differs (what a member asks for, how targets are computed, which records carry the epoch) each protocol
hands in: its record writers (`MemberRecords`) and small callbacks.

Event loop's thread only, like the whole coordinator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pybroker.broker.groups.group import Group
from pybroker.broker.groups.group_log import Records, client_error
from pybroker.broker.groups.group_store import GroupStore
from pybroker.broker.groups.group_timers import GroupTimers
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.offsets_topic_records import group_metadata_key

log = get_logger("pybroker.groups")

Outcome = TypeVar("Outcome")


class Refused(Exception):
    """A heartbeat refused with `error` (and Kafka's message): nothing it asked for changes the group."""

    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message


class EpochMember(Protocol):
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    last_heartbeat_ms: int
    revocation_deadline_ms: int


class EpochGroupData(Protocol):
    group_epoch: int
    assignment_epoch: int
    members: Any  # dict[str, the protocol's member]
    static_members: dict[str, str]
    targets: Any  # dict[str, the protocol's target]

    def refresh_state(self) -> None: ...


class HeartbeatFields(Protocol):
    """What every heartbeat of both protocols carries (the `ConsumerHeartbeat` and `StreamsHeartbeat` outcomes),
    read only."""

    @property
    def group_id(self) -> str: ...
    @property
    def instance_id(self) -> str | None: ...
    @property
    def rack_id(self) -> str | None: ...
    @property
    def rebalance_timeout_ms(self) -> int: ...
    @property
    def client_id(self) -> str: ...
    @property
    def client_host(self) -> str: ...


@dataclass(frozen=True, slots=True)
class MemberRecords:
    """One protocol's record writers (its records module): a member's metadata, the tombstones of a member
    that goes, the changed targets with the assignment epoch, and the group epoch."""

    member: Callable[[str, Any], tuple[bytes, bytes]]
    tombstones: Callable[[str, str], Records]
    targets: Callable[[str, Any, list[str]], Records]
    epoch: Callable[[str, Any], Records]


# -- one heartbeat -----------------------------------------------------------------------------------
def answer_when_written(store: GroupStore, timers: GroupTimers, group_id: str, now: int,
                        step: Callable[[], tuple[Records, Outcome]], respond: Callable[[Outcome], None], *,
                        refused: Callable[[Refused], Outcome],
                        failed: Callable[[ErrorCode, Outcome], tuple[Outcome, bool]]) -> None:
    """Run one heartbeat's `step`; answer `refused(...)` if it refused, else write its records and answer its
    outcome once they are durable. A write that failed is answered with `failed(code, outcome)`, which
    undoes the change (as Kafka, the group goes back to what its records say) and says whether it did."""
    try:
        records, outcome = step()
    except Refused as refusal:
        respond(refused(refusal))
        return
    finally:
        timers.schedule_id(group_id)
    if not records:
        respond(outcome)
        return

    def written(code: ErrorCode) -> None:
        if code is ErrorCode.NONE:
            respond(outcome)
            return
        answer, undone = failed(client_error(code), outcome)
        if undone:
            log.warning("group change undone: its records were not written", group=group_id, error=code.name)
            timers.schedule_id(group_id)
        respond(answer)

    store.append(group_id, records, now, written)


def check_group(store: GroupStore, group_id: str, *, enabled: bool, protocol: str) -> None:
    """The first checks of a heartbeat: the protocol is enabled, the group id is not empty, its partition
    is ours and loaded."""
    if not enabled:
        raise Refused(ErrorCode.UNSUPPORTED_VERSION, f"The {protocol} group protocol is not enabled on this "
                      "broker (group.coordinator.rebalance.protocols).")
    if not group_id:
        raise Refused(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    availability = store.availability(group_id)
    if availability is not ErrorCode.NONE:
        raise Refused(availability)


def check_optional_ids(req: HeartbeatFields) -> None:
    """An instance id or rack id, when sent, is not empty."""
    if req.instance_id is not None and not req.instance_id:
        raise Refused(ErrorCode.INVALID_REQUEST, "InstanceId can't be empty.")
    if req.rack_id is not None and not req.rack_id:
        raise Refused(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")


def update_common(member: EpochMember, req: HeartbeatFields) -> None:
    """Take what every heartbeat may set and that never moves the group epoch."""
    if req.rebalance_timeout_ms > 0:
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
    if req.client_id:
        member.client_id = req.client_id
    if req.client_host:
        member.client_host = req.client_host


def take_empty_classic(group: Group, protocol: str, records: Records) -> None:
    """An empty classic group (none but its offsets, say from an application run with the classic protocol)
    becomes a group of `protocol` (the caller sets its data): its classic metadata is tombstoned, as Kafka's
    conversion does."""
    group.protocol_type = protocol
    group.protocol_name = group.leader_id = None
    group.generation = 0
    records.append((group_metadata_key(group.group_id), None))
    log.info(f"group converted to the {protocol} protocol", group=group.group_id)


# -- static members ----------------------------------------------------------------------------------
def take_static_slot(group_id: str, data: EpochGroupData, old: EpochMember, member: EpochMember,
                     records: Records, writers: MemberRecords, *,
                     release: Callable[[Any], None] | None = None) -> Any:
    """`member` (a new object, joining with epoch 0) replaces the static member `old` of its instance id:
    `old` goes (`release` frees what it owned), and its target, now free, becomes `member`'s at once: the
    group does not rebalance (Kafka's static membership)."""
    assert member.instance_id is not None
    if release is not None:
        release(old)
    del data.members[old.member_id]
    if member.member_id != old.member_id:
        records += writers.tombstones(group_id, old.member_id)
    data.members[member.member_id] = member
    data.static_members[member.instance_id] = member.member_id
    target = data.targets.pop(old.member_id, None)
    if target is not None:
        data.targets[member.member_id] = target
        records += writers.targets(group_id, data, [member.member_id])
    records.append(writers.member(group_id, member))
    log.info("static member rejoined", group=group_id, instance=member.instance_id, member=member.member_id,
             replaced=old.member_id)
    return member


# -- members that go ---------------------------------------------------------------------------------
def remove_member(group: Group, data: EpochGroupData, member: EpochMember, reason: str, writers: MemberRecords,
                  *, compute_target: Callable[[], Records], release: Callable[[Any], None] | None = None,
                  before_epoch: Callable[[], None] | None = None,
                  when_empty: Callable[[], None] | None = None) -> Records:
    """`member` leaves (or is fenced): its records are tombstoned, the group epoch moves, and the others get
    a new target; the last member leaving empties the targets (`when_empty` resets what else the protocol
    keeps). `before_epoch` refreshes what the epoch record carries."""
    log.info("member removed", group=group.group_id, member=member.member_id, reason=reason,
             epoch=data.group_epoch)
    if release is not None:
        release(member)
    del data.members[member.member_id]
    data.targets.pop(member.member_id, None)
    if member.instance_id is not None and data.static_members.get(member.instance_id) == member.member_id:
        del data.static_members[member.instance_id]
    records = writers.tombstones(group.group_id, member.member_id)
    data.group_epoch += 1
    if before_epoch is not None:
        before_epoch()
    records += writers.epoch(group.group_id, data)
    if data.members:
        records += compute_target()
    else:
        data.targets.clear()
        data.assignment_epoch = data.group_epoch
        if when_empty is not None:
            when_empty()
        records += writers.targets(group.group_id, data, [])
        group.state_timestamp_ms = max(group.state_timestamp_ms, member.last_heartbeat_ms)
    data.refresh_state()
    return records


def fence_expired(data: EpochGroupData, now: int, session_ms: Callable[[Any], int],
                  remove: Callable[[Any, str], Records], *, owns: str,
                  still_current: Callable[[], bool] = lambda: True) -> Records:
    """Remove every member past its session or past its revocation deadline (`owns`: what it was to revoke,
    for the log); stop when `still_current` says the group changed protocol on the way."""
    records: Records = []
    for member in list(data.members.values()):
        if not still_current():
            break
        if now >= member.last_heartbeat_ms + session_ms(member):
            records += remove(member, "session timed out")
        elif 0 <= member.revocation_deadline_ms <= now:
            records += remove(member, f"did not revoke its {owns} within its rebalance timeout")
    return records


def next_deadline(data: EpochGroupData, session_ms: Callable[[Any], int]) -> int | None:
    """When the group timers must next look at the group: the first session or revocation deadline."""
    deadlines = [m.last_heartbeat_ms + session_ms(m) for m in data.members.values()]
    deadlines += [m.revocation_deadline_ms for m in data.members.values() if m.revocation_deadline_ms >= 0]
    return min(deadlines, default=None)
