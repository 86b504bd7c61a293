"""Fetch sessions (KIP-227): the broker remembers what a consumer fetches, so it need not resend it.

A fetch names a session id and an epoch (Kafka's `FetchMetadata`):
- epoch 0 (`INITIAL`) is a full fetch that asks for a new session: any session the request names is
  closed, the request's partitions are read, and, when the cache has room, a session holding them is
  created; the answer's `session_id` is its id (0 when the cache refused one: the client goes on with
  full fetches);
- epoch -1 (`FINAL`) is a full fetch without a session (closing the one it names);
- any other epoch is an incremental fetch on an existing session: the request lists only the partitions
  that are new or whose fetch position changed, and `forgotten_topics_data` those to drop. The broker
  reads every partition of the session at its remembered position and answers only the partitions that
  changed (Kafka's `CachedPartition.maybeUpdateResponseData`): records returned, a new high watermark, a
  new log start offset, or an error (after which the cached high watermark is reset to -1 so the
  partition is answered again once the error is gone). The last stable offset is not compared, as in
  Kafka: it only moves with a marker or an append, which move the high watermark too. Partitions that
  returned records move to the end of the session, so a `max_bytes` cut serves the others first.
  An unknown id is FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH, a session made
  with topic ids (Fetch v13+) used without them or the other way round FETCH_SESSION_TOPIC_ID_ERROR;
  the epoch then advances (after 2^31-1 it wraps to 1). An incremental fetch that forgets every
  partition closes the session and is answered as a sessionless one.

Sessions are not tied to connections (Kafka's are not either: a consumer may reconnect and go on); the
cache's eviction rules are Kafka's `FetchSessionCacheShard`: `max.incremental.fetch.session.cache.slots`
sessions at most; a new session may take the slot of one unused for more than 2 minutes (the least
recently used first), else a replica's (privileged) session may take an unprivileged one's, else a new
session may take that of one with fewer partitions which is more than 2 minutes old. The smallest such
victim goes first (privileged last, then fewer partitions, then the lower id).

Caps (the client is hostile): a session holds at most `max.partitions.per.request` partitions (a full
fetch above it gets no session; an incremental one that would grow past it closes the session and is
answered FETCH_SESSION_ID_NOT_FOUND, which every client answers with a full fetch) and the cache as a
whole at most `MAX_CACHED_PARTITIONS` (a new session evicts by the rules above to fit, or is not made).
A session answers only the principal that made it (Kafka re-authorizes every cached partition instead;
we refuse the session to anyone else, and the handler re-checks READ on the session's topics).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pybroker.broker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from pybroker.broker.security.authorizer import host_of
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.fetch import (
    FetchableTopicResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    PartitionData,
)

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
#: a session unused this long may be evicted by any new one; younger ones only by Kafka's value rules
EVICTION_MS = 120_000
#: every cached partition of every session together (about 330 bytes each, measured): 80 MB at most
MAX_CACHED_PARTITIONS = 250_000
FIRST_TOPIC_ID_VERSION = 13
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """Kafka's `FetchMetadata.nextEpoch`: -1 stays -1, the largest int32 wraps to 1 (0 means INITIAL)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


class CachedPartition:
    """What the session remembers of one partition: the client's last request for it, and what the
    last answer told the client (high watermark, log start offset) to see whether anything changed."""

    __slots__ = ("high_watermark", "log_start_offset", "name", "request", "topic_id")

    def __init__(self, name: str, topic_id: uuid.UUID, request: FetchPartition) -> None:
        self.name = name
        self.topic_id = topic_id
        self.request = request  # the client's FetchPartition: position, max bytes, epochs
        self.high_watermark = -1
        self.log_start_offset = -1

    def must_answer(self, data: Any, update: bool) -> bool:
        """Kafka's rule: records, a moved high watermark or log start offset, or an error."""
        must = bool(data.records is not None and len(data.records))
        if data.high_watermark != self.high_watermark:
            must = True
            if update:
                self.high_watermark = data.high_watermark
        if data.log_start_offset != self.log_start_offset:
            must = True
            if update:
                self.log_start_offset = data.log_start_offset
        if data.error_code:
            must = True
            if update:
                self.high_watermark = -1
        return must


#: a partition's key in a session: (topic id, partition) with topic ids, (topic name, partition) without
Key = tuple[Any, int]


@dataclass(eq=False)
class FetchSession:
    id: int
    privileged: bool
    uses_topic_ids: bool
    principal: str
    creation_ms: int
    last_used_ms: int
    epoch: int
    #: in session order (insertion; a partition that returned records moves to the end)
    partitions: dict[Key, CachedPartition] = field(default_factory=dict)
    #: the size the cache last accounted for, and where `touch` filed it (Kafka's evictable sets)
    cached_size: int = 0
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)


def _key(uses_topic_ids: bool, topic: FetchTopic, partition: int) -> Key:
    return (topic.topic_id if uses_topic_ids else topic.topic, partition)


def _cached_key(uses_topic_ids: bool, cached: CachedPartition) -> Key:
    return (cached.topic_id if uses_topic_ids else cached.name, cached.request.partition)


class FetchSessionCache:
    """All sessions of the broker (Kafka's cache, one shard): sessions by id, least recently used first."""

    def __init__(self, max_slots: int, max_session_partitions: int,
                 max_cached_partitions: int = MAX_CACHED_PARTITIONS, eviction_ms: int = EVICTION_MS,
                 rng: random.Random | None = None) -> None:
        self.max_slots = max_slots
        self.max_session_partitions = max_session_partitions
        self.max_cached_partitions = max_cached_partitions
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        #: by last use, oldest first (a touch moves a session to the end)
        self._sessions: dict[int, FetchSession] = {}
        #: partitions of every session, as last accounted by `touch`
        self.total_partitions = 0
        self.evictions = 0
        #: fetches served by kind (the metrics): full (epoch 0), incremental, sessionless (epoch -1), error
        self.fetches: dict[str, int] = {"full": 0, "incremental": 0, "sessionless": 0, "error": 0}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def sessions(self) -> Iterable[FetchSession]:
        return self._sessions.values()

    def remove(self, session_id: int) -> FetchSession | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self.total_partitions -= session.cached_size
        return session

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Kafka's `touch`: last used now (the end of the LRU order); size and evictability re-filed."""
        self._sessions.pop(session.id, None)
        self._sessions[session.id] = session
        session.last_used_ms = now_ms
        self.total_partitions += len(session.partitions) - session.cached_size
        session.cached_size = len(session.partitions)
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old
        session.evictable_by_all = old

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Kafka's `tryEvict`: a stale session first, else the least valuable one the new one outranks."""
        oldest = next(iter(self._sessions.values()), None)
        if oldest is None:
            return False
        if now_ms - oldest.last_used_ms > self.eviction_ms:
            self.remove(oldest.id)
            self.evictions += 1
            return True
        candidates = [s for s in self._sessions.values()
                      if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not candidates:
            return False
        victim = min(candidates, key=FetchSession.evictable_key)
        if (privileged, size, 0) < victim.evictable_key():
            return False
        self.remove(victim.id)
        self.evictions += 1
        return True

    def maybe_create(self, *, now_ms: int, privileged: bool, uses_topic_ids: bool, principal: str,
                     partitions: dict[Key, CachedPartition]) -> int:
        """A new session holding `partitions`, or INVALID_SESSION_ID when the cache has no room for it."""
        size = len(partitions)
        if size > self.max_session_partitions or size > self.max_cached_partitions:
            return INVALID_SESSION_ID
        while len(self._sessions) >= self.max_slots or self.total_partitions + size > self.max_cached_partitions:
            if not self._try_evict(privileged, size, now_ms):
                return INVALID_SESSION_ID
        session_id = self._new_id()
        session = FetchSession(id=session_id, privileged=privileged, uses_topic_ids=uses_topic_ids,
                               principal=principal, creation_ms=now_ms, last_used_ms=now_ms,
                               epoch=next_epoch(INITIAL_EPOCH), partitions=partitions)
        self.touch(session, now_ms)
        return session_id

    def _new_id(self) -> int:
        while True:
            candidate = self._rng.randint(1, _MAX_EPOCH)
            if candidate not in self._sessions:
                return candidate

    def plan(self, request: FetchRequest, api_version: int, now_ms: int, principal: str,
             may_read: Callable[[CachedPartition], bool] | None = None) -> FetchPlan:
        """Kafka's `FetchManager.newContext`: which partitions this fetch reads, and how to answer it.

        `may_read` (None: no authorizer) is asked about every partition an incremental fetch would read
        from its session; the refused ones are answered TOPIC_AUTHORIZATION_FAILED, not read."""
        uses_ids = api_version >= FIRST_TOPIC_ID_VERSION
        session_id, epoch = request.session_id, request.session_epoch
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            named = self._sessions.get(session_id)
            if named is not None and named.principal == principal:  # only its owner may close a session
                self.remove(session_id)
            if epoch == FINAL_EPOCH:
                self.fetches["sessionless"] += 1
                return FetchPlan(request.topics)
            self.fetches["full"] += 1
            privileged = max(request.replica_id, request.replica_state.replica_id) >= 0
            return _FullPlan(request.topics, self, now_ms, privileged, uses_ids, principal)
        session = self._sessions.get(session_id)
        if session is None or session.principal != principal:
            return self._error(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return self._error(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_ids:
            return self._error(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        if not _update(session, request, uses_ids, self.max_session_partitions):
            self.remove(session.id)
            return self._error(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if not session.partitions:
            self.remove(session.id)
            self.fetches["sessionless"] += 1
            return FetchPlan(request.topics)
        self.touch(session, now_ms)
        if self.total_partitions > self.max_cached_partitions:  # it grew past what the cache may hold
            self.remove(session.id)
            self.evictions += 1
            return self._error(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        session.epoch = next_epoch(session.epoch)
        self.fetches["incremental"] += 1
        return _IncrementalPlan(session, may_read)

    def _error(self, code: ErrorCode) -> FetchPlan:
        self.fetches["error"] += 1
        return FetchPlan([], error=code)


def _update(session: FetchSession, request: FetchRequest, uses_ids: bool, cap: int) -> bool:
    """Kafka's `FetchSession.update`: add or update the request's partitions, drop the forgotten ones.
    False when the session would hold more than `cap` partitions."""
    partitions = session.partitions
    for topic in request.topics:
        for part in topic.partitions:
            key = _key(uses_ids, topic, part.partition)
            cached = partitions.get(key)
            if cached is None:
                if len(partitions) >= cap:
                    return False
                partitions[key] = CachedPartition(topic.topic, topic.topic_id, part)
            else:
                cached.request = part
    for forgotten in request.forgotten_topics_data:
        name_or_id = forgotten.topic_id if uses_ids else forgotten.topic
        for index in forgotten.partitions:
            partitions.pop((name_or_id, index), None)
    return True


class FetchPlan:
    """A sessionless fetch (or a session error): read the request's partitions, answer them all."""

    def __init__(self, topics: list[FetchTopic], error: ErrorCode = ErrorCode.NONE) -> None:
        self.topics = topics
        self.error = error

    def error_response(self) -> FetchResponse:
        """Kafka's `SessionErrorContext`: the error, session id 0, no partitions."""
        return FetchResponse(throttle_time_ms=0, error_code=self.error, session_id=INVALID_SESSION_ID, responses=[])

    def finish(self, response: FetchResponse) -> FetchResponse:
        response.session_id = INVALID_SESSION_ID
        return response

    def throttled_response(self, throttle_ms: int) -> FetchResponse:
        """Kafka's `getThrottledResponse` (KAFKA-6946): a fetch over its quota answers nothing and leaves
        the session as it was (no partition's cached state moves, a full fetch makes no session), so the
        client's next incremental fetch still agrees with the broker about what it was told."""
        return FetchResponse(throttle_time_ms=throttle_ms, error_code=ErrorCode.NONE, session_id=INVALID_SESSION_ID,
                             responses=[])


class _FullPlan(FetchPlan):
    """A full fetch asking for a session: answered whole, then cached if the cache makes room."""

    def __init__(self, topics: list[FetchTopic], cache: FetchSessionCache, now_ms: int, privileged: bool,
                 uses_ids: bool, principal: str) -> None:
        super().__init__(topics)
        self._cache = cache
        self._now_ms = now_ms
        self._privileged = privileged
        self._uses_ids = uses_ids
        self._principal = principal

    def finish(self, response: FetchResponse) -> FetchResponse:
        partitions: dict[Key, CachedPartition] = {}
        for topic, answered in zip(self.topics, response.responses, strict=False):
            for part, data in zip(topic.partitions, answered.partitions, strict=False):
                cached = CachedPartition(answered.topic or topic.topic, topic.topic_id, part)
                cached.must_answer(data, True)
                partitions[_key(self._uses_ids, topic, part.partition)] = cached
        response.session_id = self._cache.maybe_create(
            now_ms=self._now_ms, privileged=self._privileged, uses_topic_ids=self._uses_ids,
            principal=self._principal, partitions=partitions)
        return response


class _IncrementalPlan(FetchPlan):
    """An incremental fetch: every partition of the session is read; only the changed ones are answered."""

    def __init__(self, session: FetchSession, may_read: Callable[[CachedPartition], bool] | None) -> None:
        self.session = session
        self._epoch = session.epoch  # advanced for this fetch: another fetch that advanced it again wins
        self._order: list[CachedPartition] = list(session.partitions.values())
        self._refused: list[CachedPartition] = []
        if may_read is not None:  # ACLs may have changed since the partitions joined the session
            verdicts: dict[tuple[str, uuid.UUID], bool] = {}
            allowed: list[CachedPartition] = []
            for cached in self._order:
                topic = (cached.name, cached.topic_id)
                if topic not in verdicts:
                    verdicts[topic] = may_read(cached)
                (allowed if verdicts[topic] else self._refused).append(cached)
            self._order = allowed
        super().__init__(_as_topics(self._order))

    def finish(self, response: FetchResponse) -> FetchResponse:
        session = self.session
        cached_parts = iter(self._order)
        moved: list[Key] = []
        for answered in response.responses:
            kept = []
            for data in answered.partitions:
                cached = next(cached_parts)
                if cached.must_answer(data, True):
                    kept.append(data)
                    if data.records is not None and len(data.records):
                        moved.append(_cached_key(session.uses_topic_ids, cached))
            answered.partitions = kept
        response.responses = [t for t in response.responses if t.partitions]
        for cached in self._refused:
            response.responses.append(FetchableTopicResponse(topic=cached.name, topic_id=cached.topic_id, partitions=[
                PartitionData(partition_index=cached.request.partition, high_watermark=-1, last_stable_offset=-1,
                              log_start_offset=-1, records=b"", error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)]))
            cached.high_watermark = -1  # answered again once allowed
        for key in moved:  # Kafka's fairness: partitions that were served go to the back of the line
            served = session.partitions.pop(key, None)
            if served is not None:
                session.partitions[key] = served
        response.session_id = session.id
        return response

    def throttled_response(self, throttle_ms: int) -> FetchResponse:
        code = ErrorCode.NONE if self.session.epoch == self._epoch else ErrorCode.INVALID_FETCH_SESSION_EPOCH
        return FetchResponse(throttle_time_ms=throttle_ms, error_code=code, session_id=self.session.id, responses=[])


def _as_topics(order: list[CachedPartition]) -> list[FetchTopic]:
    """The session's partitions as request topics, in session order: consecutive runs of one topic."""
    topics: list[FetchTopic] = []
    current: FetchTopic | None = None
    for cached in order:
        if current is None or current.topic_id != cached.topic_id or current.topic != cached.name:
            current = FetchTopic(topic=cached.name, topic_id=cached.topic_id, partitions=[])
            topics.append(current)
        current.partitions.append(cached.request)
    return topics


def read_check(state: Any, principal: str, peer: str, api_version: int,
               request: FetchRequest) -> Callable[[CachedPartition], bool] | None:
    """The READ check an incremental fetch's session partitions get (None: no authorizer, or a replica
    allowed CLUSTER_ACTION, which reads everything); a topic id that names no topic passes (it is answered
    UNKNOWN_TOPIC_ID by the read)."""
    authorizer = state.authorizer
    if authorizer is None:
        return None
    host = host_of(peer)
    if max(request.replica_id, request.replica_state.replica_id) >= 0 and authorizer.allowed(
            principal, host, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME, log_denial=False):
        return None
    by_id = api_version >= FIRST_TOPIC_ID_VERSION

    def may_read(cached: CachedPartition) -> bool:
        name: str | None = cached.name
        if by_id:
            info = state.logs.topic_by_id(cached.topic_id)
            name = None if info is None else str(info.name)
        return name is None or bool(authorizer.allowed(principal, host, AclOperation.READ, ResourceType.TOPIC, name,
                                                       api="Fetch"))

    return may_read


def from_config(config: Any) -> FetchSessionCache:
    return FetchSessionCache(int(config.get("max.incremental.fetch.session.cache.slots")),
                             int(config.get("max.partitions.per.request")))


__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "INVALID_SESSION_ID", "CachedPartition", "FetchPlan",
           "FetchSession", "FetchSessionCache", "from_config", "next_epoch"]
