"""`pybroker consume`: Fetch from chosen partitions and positions, alone or as a member of a group.

- `Consumer` keeps a position per partition and fetches from all of them in one request (long-poll
  `max_wait_ms`); a position outside the log moves to its start or end (the reset policy, as
  `auto.offset.reset`); control batches are skipped, and under read_committed so are the batches of
  aborted transactions (from the fetch answer's aborted list, as Kafka's consumer does).
- `GroupMember` joins a consumer group with the classic protocol (JoinGroup, SyncGroup, Heartbeat,
  LeaveGroup) as a `consumer` member offering the `range` assignor; when it leads, it computes the range
  assignment for every member. It commits the offsets of the records handed out, with its generation.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pybroker.clients.admin.formats import ConsumedRecord
from pybroker.clients.admin.groups import committed_offsets
from pybroker.clients.admin.topics import EARLIEST, LATEST, check, list_offsets, metadata
from pybroker.clients.wire import WireClient, WireError
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.member_assignment import decode_assignment
from pybroker.protocol.messages.consumer_protocol import (
    AssignedTopicPartition,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pybroker.protocol.messages.heartbeat import HeartbeatRequest
from pybroker.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from pybroker.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from pybroker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from pybroker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from pybroker.protocol.primitives import DecodeError
from pybroker.protocol.records.batch import LOG_APPEND_TIME, RecordsError, iter_batches
from pybroker.protocol.records.record import decode_records

Partition = tuple[str, int]
PARTITION_MAX_BYTES = 1 << 20
FETCH_MAX_BYTES = 16 << 20
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
_VERSION = struct.Struct(">h")
#: joins in a row that may end in "try again" (member id required, rebalance in progress) before giving up
JOIN_ATTEMPTS = 20
#: answers that mean "ask again in a moment" (a broker just started, its offsets topic loading)
COORDINATOR_NOT_READY = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                         ErrorCode.NOT_COORDINATOR)
RETRY_BACKOFF_S = 0.25


@dataclass(frozen=True, slots=True)
class StartAt:
    """Where reading starts: earliest, latest, an offset, `back` records before the end, or a time."""

    kind: str
    value: int = 0


def parse_start(text: str) -> StartAt:
    """`earliest`, `latest`, `N` (an offset), `-N` (N before the end) or `@MS` (a timestamp in ms)."""
    word = text.strip().lower()
    if word in ("earliest", "beginning", "start", "oldest"):
        return StartAt("earliest")
    if word in ("latest", "end", "newest"):
        return StartAt("latest")
    if word.startswith("@") and word[1:].isdigit():
        return StartAt("timestamp", int(word[1:]))
    if word.startswith("-") and word[1:].isdigit():
        return StartAt("back", int(word[1:]))
    if word.isdigit():
        return StartAt("offset", int(word))
    raise ValueError(f"expected earliest, latest, an offset, -N or @TIMESTAMP_MS, got {text!r}")


def start_positions(client: WireClient, keys: Sequence[Partition], start: StartAt) -> dict[Partition, int]:
    """The first offset to read in each partition, kept inside each log."""
    starts = list_offsets(client, keys, EARLIEST)
    ends = list_offsets(client, keys, LATEST)
    found = list_offsets(client, keys, start.value) if start.kind == "timestamp" else {}
    chosen = {}
    for key in keys:
        wanted = {"earliest": starts[key], "latest": ends[key], "offset": start.value,
                  "back": ends[key] - start.value,
                  "timestamp": found.get(key, -1) if found.get(key, -1) >= 0 else ends[key]}[start.kind]
        chosen[key] = min(max(wanted, starts[key]), ends[key])
    return chosen


def topic_partitions(client: WireClient, topics: Sequence[str], only: Sequence[int] = ()) -> list[Partition]:
    keys = []
    for topic in metadata(client, sorted(set(topics))):
        check(topic.error_code, None, f"topic {topic.name}")
        existing = sorted(p.partition_index for p in topic.partitions)
        for part in only or existing:
            if part not in existing:
                raise WireError(f"topic {topic.name} has no partition {part}", "UNKNOWN_TOPIC_OR_PARTITION")
            keys.append((topic.name, part))
    return keys


class Consumer:
    def __init__(self, client: WireClient, *, reset: str = "latest", isolation: int = READ_UNCOMMITTED,
                 max_wait_ms: int = 500) -> None:
        self.client, self.reset, self.isolation, self.max_wait_ms = client, reset, isolation, max_wait_ms
        self.positions: dict[Partition, int] = {}
        #: the offset after the last record handed out (or the start), per partition: what a group commits
        self.delivered: dict[Partition, int] = {}

    def assign(self, positions: Mapping[Partition, int]) -> None:
        """Read from these positions; until a record of a partition is handed out, what a group commits for
        it is where reading started (as a Kafka consumer commits its position, records or not)."""
        self.positions = dict(positions)
        self.delivered = dict(positions)

    def _reset(self, key: Partition) -> None:
        self.positions[key] = list_offsets(self.client, [key], EARLIEST if self.reset == "earliest" else LATEST)[key]

    def poll(self) -> list[ConsumedRecord]:
        """One Fetch of every assigned partition; the records at or after each position."""
        if not self.positions:
            time.sleep(self.max_wait_ms / 1000)
            return []
        by_topic: dict[str, list[FetchPartition]] = {}
        for (topic, partition), offset in sorted(self.positions.items()):
            by_topic.setdefault(topic, []).append(FetchPartition(
                partition=partition, fetch_offset=offset, partition_max_bytes=PARTITION_MAX_BYTES,
                log_start_offset=-1, current_leader_epoch=-1))
        request = FetchRequest(replica_id=-1, max_wait_ms=self.max_wait_ms, min_bytes=1, max_bytes=FETCH_MAX_BYTES,
                               isolation_level=self.isolation, session_id=0, session_epoch=-1,
                               topics=[FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
        with self.client.waiting(self.max_wait_ms / 1000 + self.client.timeout):
            response = self.client.call(request, max_version=12)
        check(response.error_code, None, "Fetch")
        out: list[ConsumedRecord] = []
        for topic in response.responses:
            for part in topic.partitions:
                key = (topic.topic, part.partition_index)
                if key not in self.positions:
                    continue
                if part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self._reset(key)
                    continue
                check(part.error_code, None, f"Fetch {key[0]}-{key[1]}")
                out += self._records(key, bytes(part.records or b""), part.aborted_transactions or [])
        return out

    def _records(self, key: Partition, data: bytes, aborted: Sequence[Any]) -> list[ConsumedRecord]:
        position = self.positions[key]
        pending = sorted((a.first_offset, a.producer_id) for a in aborted) if self.isolation else []
        aborting: set[int] = set()
        out = []
        for pos, header in iter_batches(data):
            while pending and pending[0][0] <= header.last_offset:
                aborting.add(pending.pop(0)[1])
            self.positions[key] = max(self.positions[key], header.next_offset)
            if header.is_control:
                aborting.discard(header.producer_id)
                continue
            if header.is_transactional and header.producer_id in aborting:
                continue
            try:
                records = decode_records(data, pos, header)
            except RecordsError as exc:
                raise WireError(f"a batch of {key[0]}-{key[1]} at offset {header.base_offset} "
                                f"cannot be decoded: {exc}") from None
            for record in records:
                offset = header.base_offset + record.offset_delta
                if offset < position:
                    continue
                stamp = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME \
                    else header.base_timestamp + record.timestamp_delta
                out.append(ConsumedRecord(key[0], key[1], offset, stamp, header.timestamp_type, record.key,
                                          record.value, tuple(record.headers)))
        return out

    def caught_up(self, ends: Mapping[Partition, int]) -> bool:
        return all(self.positions.get(key, 0) >= end for key, end in ends.items())


def _versioned(version: int, message: Any) -> bytes:
    return _VERSION.pack(version) + message.encode(version)


def range_assignment(subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, int]
                     ) -> dict[str, list[Partition]]:
    """Kafka's range assignor: per topic, its members in member-id order take consecutive ranges."""
    out: dict[str, list[Partition]] = {member: [] for member in subscriptions}
    for topic, count in sorted(partitions.items()):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        share, extra = divmod(count, len(members))
        first = 0
        for index, member in enumerate(members):
            size = share + (1 if index < extra else 0)
            out[member] += [(topic, p) for p in range(first, first + size)]
            first += size
    return out


class GroupMember:
    """One consumer in a classic group: join, sync, heartbeat, commit, leave."""

    def __init__(self, client: WireClient, group: str, topics: Sequence[str], *,
                 session_timeout_ms: int = 10_000, rebalance_timeout_ms: int = 30_000) -> None:
        self.client, self.group, self.topics = client, group, sorted(set(topics))
        self.session_timeout_ms, self.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
        self.member_id, self.generation = "", -1
        self.heartbeat_every = session_timeout_ms / 3000
        self.last_heartbeat = time.monotonic()

    def join(self) -> list[Partition]:
        """Join (or rejoin) the group and return this member's partitions."""
        metadata_bytes = _versioned(0, ConsumerProtocolSubscription(topics=self.topics, user_data=None))
        for _attempt in range(JOIN_ATTEMPTS):
            request = JoinGroupRequest(group_id=self.group, session_timeout_ms=self.session_timeout_ms,
                                       rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
                                       group_instance_id=None, protocol_type="consumer",
                                       protocols=[JoinGroupRequestProtocol(name="range", metadata=metadata_bytes)])
            with self.client.waiting(self.rebalance_timeout_ms / 1000 + 5):
                joined = self.client.call(request, max_version=7)
            if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = joined.member_id
                continue
            if joined.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if joined.error_code in COORDINATOR_NOT_READY:  # the offsets topic is still loading: a moment
                time.sleep(RETRY_BACKOFF_S)
                continue
            check(joined.error_code, None, f"JoinGroup {self.group}")
            self.member_id, self.generation = joined.member_id, joined.generation_id
            assignments = self._assign(joined.members) if joined.leader == self.member_id else []
            sync = SyncGroupRequest(group_id=self.group, generation_id=self.generation, member_id=self.member_id,
                                    group_instance_id=None, protocol_type="consumer",
                                    protocol_name=joined.protocol_name, assignments=assignments)
            with self.client.waiting(self.rebalance_timeout_ms / 1000 + 5):
                synced = self.client.call(sync, max_version=5)
            if synced.error_code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION):
                continue
            check(synced.error_code, None, f"SyncGroup {self.group}")
            self.last_heartbeat = time.monotonic()
            return decode_assignment(bytes(synced.assignment)) or []
        raise WireError(f"could not join group {self.group}: it kept rebalancing through {JOIN_ATTEMPTS} attempts")

    def _assign(self, members: Sequence[Any]) -> list[SyncGroupRequestAssignment]:
        subscriptions: dict[str, list[str]] = {}
        for member in members:
            data = bytes(member.metadata)
            try:
                version = min(_VERSION.unpack_from(data)[0], ConsumerProtocolSubscription.MAX_VERSION)
                subscriptions[member.member_id] = list(
                    ConsumerProtocolSubscription.decode(data, version, _VERSION.size, strict=False).topics)
            except (struct.error, DecodeError):
                subscriptions[member.member_id] = []
        wanted = sorted({t for topics in subscriptions.values() for t in topics})
        counts = {t.name: len(t.partitions) for t in metadata(self.client, wanted) if not t.error_code}
        out = []
        for member, parts in range_assignment(subscriptions, counts).items():
            by_topic: dict[str, list[int]] = {}
            for topic, partition in parts:
                by_topic.setdefault(topic, []).append(partition)
            assignment = ConsumerProtocolAssignment(user_data=None, assigned_partitions=[
                AssignedTopicPartition(topic=t, partitions=ps) for t, ps in sorted(by_topic.items())])
            out.append(SyncGroupRequestAssignment(member_id=member, assignment=_versioned(0, assignment)))
        return out

    def starting_positions(self, keys: Sequence[Partition], reset: str) -> dict[Partition, int]:
        """The group's committed offsets, else the reset policy's end of each log."""
        committed = committed_offsets(self.client, self.group)
        missing = [key for key in keys if key not in committed]
        fallback = list_offsets(self.client, missing, EARLIEST if reset == "earliest" else LATEST)
        return {key: committed[key] if key in committed else fallback[key] for key in keys}

    def heartbeat_due(self) -> bool:
        return time.monotonic() - self.last_heartbeat >= self.heartbeat_every

    def heartbeat(self) -> bool:
        """True while the membership holds; False when the group rebalances (the caller rejoins)."""
        answer = self.client.call(HeartbeatRequest(group_id=self.group, generation_id=self.generation,
                                                   member_id=self.member_id, group_instance_id=None), max_version=4)
        self.last_heartbeat = time.monotonic()
        if answer.error_code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION,
                                 ErrorCode.UNKNOWN_MEMBER_ID):
            if answer.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            return False
        check(answer.error_code, None, f"Heartbeat {self.group}")
        return True

    def commit(self, offsets: Mapping[Partition, int]) -> bool:
        """Commit with this generation; False when the group has moved on (the offsets were not taken)."""
        if not offsets:
            return True
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=""))
        request = OffsetCommitRequest(group_id=self.group, generation_id_or_member_epoch=self.generation,
                                      member_id=self.member_id, retention_time_ms=-1,
                                      topics=[OffsetCommitRequestTopic(name=t, partitions=ps)
                                              for t, ps in by_topic.items()])
        response = self.client.call(request, max_version=7)
        stale = (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID)
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code in stale:
                    return False
                check(part.error_code, None, f"OffsetCommit {self.group} {topic.name}-{part.partition_index}")
        return True

    def leave(self) -> None:
        if not self.member_id:
            return
        request = LeaveGroupRequest(group_id=self.group, member_id=self.member_id,
                                    members=[MemberIdentity(member_id=self.member_id, group_instance_id=None)])
        self.client.call(request, max_version=4)
        self.member_id = ""
