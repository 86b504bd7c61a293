"""The group coordinator's offsets: commits (plain and transactional), fetches, deletes and expiry.

One part of the group coordinator (`coordinator.GroupCoordinator`), handed the store (the groups, the log,
the settings) and the classic part (whose membership checks a classic member's commit); offsets are their
own responsibility. Event loop's thread only. Offsets a transaction commits (TxnOffsetCommit) are kept per
(group, producer id), pending, until the transaction's marker is in the group's partition
(`complete_transaction`); every offset remembers where its record sits in `__consumer_offsets`, because
Kafka's rule for a commit marker is that the offset written later wins, whether it was the transaction's
or a plain commit's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from pybroker.broker.groups.consumer_groups import consumer_commit_error
from pybroker.broker.groups.consumer_records import group_tombstones as consumer_group_tombstones
from pybroker.broker.groups.expiry import expired_offsets
from pybroker.broker.groups.group import CommittedOffset, Group
from pybroker.broker.groups.group_log import NOT_WRITTEN, Records, client_error
from pybroker.broker.groups.group_store import GroupStore
from pybroker.broker.groups.outcomes import UNKNOWN_MEMBER_ID, CommitRequest, OffsetToCommit, TxnCommitRequest
from pybroker.broker.groups.state_machine import Event, GroupState
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.streams_groups.records import group_tombstones as streams_group_tombstones
from pybroker.broker.streams_groups.streams_groups import streams_commit_error
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.coordinator_records import OffsetCommitValue
from pybroker.protocol.offsets_topic_records import group_metadata_key, offset_commit_key, offset_commit_value

if TYPE_CHECKING:
    from pybroker.broker.groups.classic_groups import ClassicGroups

log = get_logger("pybroker.groups")

S = GroupState


class OffsetCommits:
    """Offset operations over the store's groups."""

    def __init__(self, store: GroupStore, classic: ClassicGroups) -> None:
        self.store = store
        #: the classic part: a commit from a classic member is checked as its other requests are
        self.classic = classic
        #: producer id -> the groups its open transaction committed offsets to (TxnOffsetCommit)
        self.txn_groups: dict[int, set[str]] = {}
        #: transaction completions for partitions still loading: applied once their replay is in
        self.deferred_completions: dict[int, list[tuple[int, bool]]] = {}

    # -- offsets -----------------------------------------------------------------------------------
    def commit_offsets(self, req: CommitRequest, now: int,
                       respond: Callable[[dict[tuple[str, int], ErrorCode]], None]) -> None:
        keys = [(o.topic, o.partition) for o in req.offsets]
        error = self.store.availability(req.group_id)
        group = self.store.groups.get(req.group_id)
        if error is ErrorCode.NONE:
            error = self._commit_error(group, req)
        if error is not ErrorCode.NONE:
            respond(dict.fromkeys(keys, error))
            return
        if group is None:  # a simple consumer's first commit creates an empty group for its offsets
            group = self.store.groups[req.group_id] = Group(req.group_id, state_timestamp_ms=now, protocol_type="")
        elif req.member_id in group.members:
            group.members[req.member_id].last_heartbeat_ms = now  # a commit counts as a heartbeat
        codes, accepted = self._accept_offsets(req.offsets, now)
        if not accepted:
            respond(codes)
            return
        records = _offset_records(req.group_id, accepted)

        def written(code: ErrorCode) -> None:
            if code is ErrorCode.NONE and not group.is_(S.DEAD):
                group.offsets.update(accepted)
            for key in accepted:
                codes[key] = client_error(code)
            respond(codes)

        position = self.store.append(req.group_id, records, now, written)
        _place(accepted.values(), position)

    # -- transactional offsets (TxnOffsetCommit) ----------------------------------------------------
    def commit_txn_offsets(self, req: TxnCommitRequest, now: int,
                           respond: Callable[[dict[tuple[str, int], ErrorCode]], None]) -> None:
        """Write a transaction's offsets as one transactional batch; they stay pending under the
        producer id (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for them) until
        `complete_transaction`. Kafka's checks: no group state is enforced, but a request naming a member
        or generation must match them (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID)."""
        keys = [(o.topic, o.partition) for o in req.offsets]
        error = self.store.availability(req.group_id)
        group = self.store.groups.get(req.group_id)
        if error is ErrorCode.NONE:
            error = _producer_error(req.producer_id, req.producer_epoch) or self._txn_commit_error(group, req)
        if error is not ErrorCode.NONE:
            respond(dict.fromkeys(keys, error))
            return
        if group is None:  # as for a simple consumer's commit: an empty group holds the offsets
            group = self.store.groups[req.group_id] = Group(req.group_id, state_timestamp_ms=now, protocol_type="")
        codes, accepted = self._accept_offsets(req.offsets, now)
        if not accepted:
            respond(codes)
            return
        producer_id = req.producer_id
        pending = group.pending_txn.setdefault(producer_id, {})
        pending.update(accepted)
        self.txn_groups.setdefault(producer_id, set()).add(req.group_id)

        def written(code: ErrorCode) -> None:
            if code is not ErrorCode.NONE:  # nothing was written: what it put in pending goes again
                mine = group.pending_txn.get(producer_id, {})
                for key, offset in accepted.items():
                    if mine.get(key) is offset:
                        del mine[key]
                if not mine:
                    group.pending_txn.pop(producer_id, None)
            for key in accepted:
                codes[key] = client_error(code)
            respond(codes)

        position = self.store.append(req.group_id, _offset_records(req.group_id, accepted),
                                   now, written, producer=(producer_id, req.producer_epoch))
        _place(accepted.values(), position)

    def _txn_commit_error(self, group: Group | None, req: TxnCommitRequest) -> ErrorCode:
        if group is None:
            return ErrorCode.NONE if req.generation < 0 else ErrorCode.ILLEGAL_GENERATION
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.consumer is not None:
            if req.generation < 0 and not req.member_id and req.group_instance_id is None:
                return ErrorCode.NONE  # a transaction's commit from outside group management
            return consumer_commit_error(group.consumer, req.member_id, req.generation,
                                         partitions=self._committed_partitions(req.offsets))
        if group.streams is not None:
            if req.generation < 0 and not req.member_id and req.group_instance_id is None:
                return ErrorCode.NONE
            return streams_commit_error(group.streams, req.member_id, req.generation)
        if req.generation < 0 and group.is_(S.EMPTY):
            return ErrorCode.NONE
        if req.generation >= 0 or req.member_id != UNKNOWN_MEMBER_ID or req.group_instance_id is not None:
            return self.classic.member_error(group, req.member_id, req.group_instance_id, req.generation)
        return ErrorCode.NONE  # v0-2 carry no member: the transaction is the producer's own

    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """The marker of `producer_id`'s transaction is in `offsets_partition`: its pending offsets in
        that partition's groups become committed (where written after the committed ones), or go."""
        if offsets_partition in self.store.loading:
            self.deferred_completions.setdefault(offsets_partition, []).append((producer_id, commit))
            return
        group_ids = self.txn_groups.get(producer_id)
        if not group_ids:
            return
        for group_id in [g for g in group_ids if self.store.partition_for(g) == offsets_partition]:
            group_ids.discard(group_id)
            group = self.store.groups.get(group_id)
            if group is not None and producer_id in group.pending_txn:
                applied = group.complete_txn(producer_id, commit)
                log.debug("transactional offsets completed", group=group_id, producer_id=producer_id,
                          commit=commit, applied=applied)
        if not group_ids:
            del self.txn_groups[producer_id]

    def unstable_offsets(self, group_id: str) -> set[tuple[str, int]]:
        """The partitions of a group with offsets an open transaction committed (require_stable)."""
        group = self.store.groups.get(group_id)
        return group.pending_txn_keys() if group is not None else set()

    def _accept_offsets(self, offsets: Iterable[OffsetToCommit], now: int
                        ) -> tuple[dict[tuple[str, int], ErrorCode], dict[tuple[str, int], CommittedOffset]]:
        codes: dict[tuple[str, int], ErrorCode] = {}
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        for o in offsets:
            key = (o.topic, o.partition)
            metadata = o.metadata or ""
            if len(metadata.encode()) > self.store.config.metadata_max_bytes:
                codes[key] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            elif not self.store.partition_exists(o.topic, o.partition):
                codes[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                accepted[key] = CommittedOffset(o.offset, o.leader_epoch, metadata,
                                                o.commit_timestamp if o.commit_timestamp >= 0 else now,
                                                o.expire_timestamp)
        return codes, accepted

    def _commit_error(self, group: Group | None, req: CommitRequest) -> ErrorCode:
        if group is None:
            return ErrorCode.NONE if req.generation < 0 else ErrorCode.ILLEGAL_GENERATION
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.consumer is not None:  # KIP-848: the generation field carries the member epoch
            return consumer_commit_error(group.consumer, req.member_id, req.generation, req.api_version,
                                         self._committed_partitions(req.offsets))
        if group.streams is not None:  # KIP-1071: likewise
            return streams_commit_error(group.streams, req.member_id, req.generation, req.api_version)
        if req.generation < 0 and group.is_(S.EMPTY):
            return ErrorCode.NONE  # a commit from outside group management (a simple consumer, a tool)
        error = self.classic.member_error(group, req.member_id, req.group_instance_id, req.generation)
        if error is ErrorCode.NONE and group.is_(S.COMPLETING_REBALANCE):
            error = ErrorCode.REBALANCE_IN_PROGRESS
        return error

    def _committed_partitions(self, offsets: Iterable[OffsetToCommit]) -> Iterator[tuple[uuid.UUID, int]]:
        """The partitions a commit names that exist, by topic id (a consumer group's assignments are by id),
        read only if a member's commit at an older epoch needs them (KIP-1251): the others are answered
        UNKNOWN_TOPIC_OR_PARTITION whatever the epoch, as Kafka answers them before its coordinator sees them."""
        topics = self.store.topic_metadata()
        for o in offsets:
            if o.topic in topics and self.store.partition_exists(o.topic, o.partition):
                yield topics[o.topic][0], o.partition

    def fetch_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None
                      ) -> tuple[ErrorCode, dict[tuple[str, int], CommittedOffset | None]]:
        error = self.store.availability(group_id)
        if error is not ErrorCode.NONE:
            return error, {}
        group = self.store.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if partitions is None:
            return ErrorCode.NONE, dict(sorted(offsets.items()))
        return ErrorCode.NONE, {key: offsets.get(key) for key in partitions}

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]], now: int,
                       respond: Callable[[ErrorCode, dict[tuple[str, int], ErrorCode]], None]) -> None:
        error = self.store.availability(group_id)
        group = self.store.groups.get(group_id)
        if error is ErrorCode.NONE and (group is None or group.is_(S.DEAD)):
            error = ErrorCode.GROUP_ID_NOT_FOUND
        if error is not ErrorCode.NONE:
            respond(error, {})
            return
        assert group is not None
        subscribed: set[str] = set()
        if not group.is_(S.EMPTY):
            found = group.subscribed_topics()
            if found is None:
                respond(ErrorCode.NON_EMPTY_GROUP, {})
                return
            subscribed = found
        codes = {key: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if key[0] in subscribed else ErrorCode.NONE
                 for key in partitions}
        # Kafka writes the tombstone for an offset an open transaction committed too; it ends both
        doomed = [key for key, code in codes.items() if code is ErrorCode.NONE
                  and (key in group.offsets or group.has_pending_txn_offset(key))]
        if not doomed:
            respond(ErrorCode.NONE, codes)
            return

        def written(code: ErrorCode) -> None:
            if code is not ErrorCode.NONE:
                respond(client_error(code), {})
                return
            for key in doomed:
                group.forget_offset(key)
            respond(ErrorCode.NONE, codes)

        self.store.append(group_id, offset_tombstones(group_id, doomed), now, written)

    def expire_offsets(self, now: int) -> None:
        """Drop offsets kept longer than `offsets.retention.ms` (Kafka's rules), and empty groups with them."""
        for group in list(self.store.groups.values()):
            if group.is_(S.DEAD) or self.store.partition_for(group.group_id) in self.store.loading:
                continue
            # an offset an open transaction is replacing is kept until the transaction ends (Kafka)
            expired = [key for key in expired_offsets(group, now, self.store.config.offsets_retention_ms)
                       if not group.has_pending_txn_offset(key)]
            records = offset_tombstones(group.group_id, expired)
            for key in expired:
                del group.offsets[key]
            # nor is a group removed while a transaction has offsets in it
            if group.is_(S.EMPTY) and not group.offsets and not group.pending_members and not group.pending_txn \
                    and not group.has_members:
                if group.consumer is not None:
                    group.consumer.remove()
                    records += consumer_group_tombstones(group.group_id, group.consumer)
                if group.streams is not None:
                    records += streams_group_tombstones(group.group_id, group.streams)
                group.transition(Event.REMOVED, now)
                del self.store.groups[group.group_id]
                records.append((group_metadata_key(group.group_id), None))
            if records:
                self.store.append(group.group_id, records, now, lambda _code: None)


def _producer_error(producer_id: int, producer_epoch: int) -> ErrorCode:
    """A transactional batch needs a real producer id and epoch (else it could never be completed)."""
    if producer_id < 0:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if producer_epoch < 0:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return ErrorCode.NONE


def _place(offsets: Iterable[CommittedOffset], position: int) -> None:
    """Note where each offset's record went (record i of a batch written at `position` is at position + i)."""
    if position == NOT_WRITTEN:
        return
    for i, offset in enumerate(offsets):
        offset.record_offset = position + i


def _offset_records(group_id: str, accepted: dict[tuple[str, int], CommittedOffset]) -> Records:
    return [(offset_commit_key(group_id, topic, partition), offset_commit_value(
        OffsetCommitValue(offset=c.offset, leader_epoch=c.leader_epoch, metadata=c.metadata,
                          commit_timestamp=c.commit_timestamp, expire_timestamp=c.expire_timestamp)))
        for (topic, partition), c in accepted.items()]


def offset_tombstones(group_id: str, keys: Iterable[tuple[str, int]]) -> Records:
    return [(offset_commit_key(group_id, topic, partition), None) for topic, partition in keys]
