"""Share fetch sessions (KIP-932): which share-partitions a member's ShareFetch reads, by session epoch.

A session is keyed by (group id, member id). Epoch 0 opens it with the request's partitions (replacing an
older one of the same member); each later request carries the next epoch and may add partitions (its
topics) or drop them (its forgotten topics, applied after the added ones, as Kafka); -1 closes it. A
request with an epoch the session does not expect is INVALID_SHARE_SESSION_EPOCH, one for a session that is
not there SHARE_SESSION_NOT_FOUND (but a final one, -1, is served without it: a client may leave its group
before it sends its last acknowledgements, as librdkafka's close does), and a new session past `group.share.max.share.sessions` SHARE_SESSION_LIMIT_REACHED. A session holds at most
`MAX_SESSION_PARTITIONS` partitions (INVALID_REQUEST beyond), so a request cannot make it grow unbounded.

Threads: the event loop only.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from pybroker.protocol.errors import ErrorCode

OPEN_EPOCH = 0
FINAL_EPOCH = -1
MAX_SESSION_PARTITIONS = 10_000
#: the epoch after 2**31 - 1 (Kafka's `ShareRequestMetadata.nextEpoch` wraps to 1, never back to 0)
_MAX_EPOCH = 2**31 - 1

SessionKey = tuple[str, str]
TopicPartition = tuple[uuid.UUID, int]


@dataclass(slots=True)
class ShareSession:
    key: SessionKey
    next_epoch: int = 1
    partitions: dict[TopicPartition, None] = field(default_factory=dict)  # ordered set


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """What a request may do: its error (then nothing else), the session, and whether it closes it."""

    error: ErrorCode
    session: ShareSession | None = None
    closing: bool = False
    #: the session this request's epoch 0 replaced (the member's records on it are released)
    replaced: ShareSession | None = None


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[SessionKey, ShareSession] = {}

    def plan(self, key: SessionKey, epoch: int, added: list[TopicPartition],
             forgotten: list[TopicPartition]) -> SessionPlan:
        """Check the epoch and bring the session up to this request (ShareFetch)."""
        if epoch == OPEN_EPOCH:
            replaced = self.sessions.pop(key, None)
            if len(self.sessions) >= self.max_sessions:
                if replaced is not None:
                    self.sessions[key] = replaced
                return SessionPlan(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
            if len(added) > MAX_SESSION_PARTITIONS:
                return SessionPlan(ErrorCode.INVALID_REQUEST)
            opened = ShareSession(key, 1, dict.fromkeys(added))
            self.sessions[key] = opened
            return SessionPlan(ErrorCode.NONE, opened, replaced=replaced)
        session = self.sessions.get(key)
        if epoch == FINAL_EPOCH:  # acknowledged and closed even when the session is gone (the member left first)
            self.sessions.pop(key, None)
            return SessionPlan(ErrorCode.NONE, session if session is not None else ShareSession(key), closing=True)
        if session is None:
            return SessionPlan(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch != session.next_epoch:
            return SessionPlan(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        for tp in added:
            if tp not in session.partitions and len(session.partitions) >= MAX_SESSION_PARTITIONS:
                return SessionPlan(ErrorCode.INVALID_REQUEST)
            session.partitions[tp] = None
        # added first, then forgotten, as Kafka's session does: a partition named in both (a client sending its
        # last acknowledgements for a partition it no longer reads, as franz-go does after a revocation) leaves
        # the session; kept, the member would go on acquiring records it discards (a suspect in issue 32)
        for tp in forgotten:
            session.partitions.pop(tp, None)
        session.next_epoch = 1 if epoch >= _MAX_EPOCH else epoch + 1
        return SessionPlan(ErrorCode.NONE, session)

    def acknowledge(self, key: SessionKey, epoch: int) -> SessionPlan:
        """Check the epoch of a ShareAcknowledge (which never opens a session)."""
        if epoch == OPEN_EPOCH:
            return SessionPlan(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        return self.plan(key, epoch, [], [])

    def drop_member(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)


def fetch_order(session: ShareSession, epoch: int) -> list[TopicPartition]:
    """The session's partitions in the order a fetch of `epoch` reads them: rotated by the epoch, as Kafka
    rotates a share fetch's partitions round-robin. A fetch stops reading once `max_records` is met, so in a
    fixed order the first partitions, while they keep records available (a backlog, records released again),
    would take every fetch and a later partition would never be read (a suspect in issue 32, franz-go's
    TestShareGroupETL stalling on its one-partition topic, listed after a three-partition one)."""
    order = list(session.partitions)
    if not order:
        return order
    at = epoch % len(order) if epoch > 0 else 0
    return order[at:] + order[:at]
