"""Kafka's transaction coordinator rules: InitProducerId, AddPartitionsToTxn, EndTxn, produce verification,
timeouts and expiry.

Everything runs on the event loop's thread; the time comes from an injected clock, so tests drive
timeouts by moving it. A request that changes a transactional id's state computes the new `TxnMetadata`
(a pure transition, `metadata.py`), writes it to `__transaction_state` through a `TxnLog`, and adopts it
only once the write is durable; while that write is in flight the id is "pending" and other requests
get CONCURRENT_TRANSACTIONS (Kafka's `pendingState`). EndTxn answers once PrepareCommit/PrepareAbort is
durable; the markers are then written by a background task, after which CompleteCommit/CompleteAbort is
written. A request that finds the transaction still completing waits briefly for it instead of bouncing
the client with CONCURRENT_TRANSACTIONS at once.

Error codes are those clients react to, as Kafka's `TransactionCoordinator` answers them.

For tests only, `PYBROKER_TEST_TXN_MARKER_DELAY_MS` in the environment delays every transaction's markers
after its Prepare record is durable, so a test can kill the broker in that window deterministically.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from pybroker.broker.groups.offsets_topic import OFFSETS_TOPIC
from pybroker.broker.groups.placement import partition_for_group
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.transactions import metadata as md
from pybroker.broker.transactions.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_TIMEOUT_MS,
    TV_2,
    TopicPartition,
    TxnError,
    TxnMetadata,
    epoch_exhausted,
)
from pybroker.broker.transactions.state_machine import TxnState
from pybroker.broker.transactions.txn_log import MarkerWriter, TxnLog, client_error
from pybroker.protocol.errors import ErrorCode

log = get_logger("pybroker.transactions")

S = TxnState
#: how long a request waits for a transaction that is writing its markers before CONCURRENT_TRANSACTIONS
COMPLETION_WAIT_S = 1.0
#: backoff between attempts at markers (or at the Complete record) that failed for a retriable reason
RETRY_BACKOFF_S = 0.2
MAX_RETRY_BACKOFF_S = 5.0
#: marker outcomes after which a partition needs no further attempt (the partition is gone, or a newer
#: producer epoch or coordinator already wrote past this transaction)
MARKER_DONE = frozenset({ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_PRODUCER_EPOCH,
                         ErrorCode.TRANSACTION_COORDINATOR_FENCED})
#: test-only: milliseconds to wait before writing markers (lets a test kill the broker in between)
MARKER_DELAY_ENV = "PYBROKER_TEST_TXN_MARKER_DELAY_MS"


@dataclass(frozen=True, slots=True)
class TxnConfig:
    num_partitions: int = 50
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    two_phase_commit_enabled: bool = False
    partition_verification: bool = True


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    ongoing_producer_id: int = NO_PRODUCER_ID
    ongoing_producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class EndResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(slots=True)
class Entry:
    """A transactional id's adopted state, and what is in flight for it."""

    meta: TxnMetadata
    #: the state a write in flight will move to (Kafka's `pendingState`); None when none is
    pending: TxnState | None = None
    #: a fence whose write failed: the next fence does not bump the epoch again (Kafka's hasFailedEpochFence)
    failed_fence: bool = False
    #: resolved when the markers of the prepared transaction are written and its Complete record is durable
    completion: asyncio.Future[None] | None = None
    #: partitions that transactions v2 requests (Produce v12, TxnOffsetCommit v5) want added, by producer id
    #: and epoch, not yet written: one state write adds all that arrived while the last one was in flight
    implicit_wanted: dict[tuple[int, int], set[TopicPartition]] = field(default_factory=dict)
    #: one implicit add in flight per transactional id (a second would find the first pending and be told
    #: CONCURRENT_TRANSACTIONS: a multi-partition Produce v12 would then add one partition per round trip)
    implicit_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class TransactionCoordinator:
    def __init__(self, config: TxnConfig, txn_log: TxnLog, markers: MarkerWriter, *,
                 new_producer_id: Callable[[], int], clock_ms: Callable[[], int],
                 partition_exists: Callable[[str, int], bool] = lambda topic, partition: True) -> None:
        self.config = config
        self.log = txn_log
        self.markers = markers
        self.new_producer_id = new_producer_id
        self.clock_ms = clock_ms
        self.partition_exists = partition_exists
        self.entries: dict[str, Entry] = {}
        #: `__transaction_state` partitions still being replayed: their ids answer COORDINATOR_LOAD_IN_PROGRESS
        self.loading: set[int] = set()
        #: Kafka's coordinator epoch (the state partition's leader epoch): one node, never moved
        self.coordinator_epoch = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False
        self.marker_delay_s = int(os.environ.get(MARKER_DELAY_ENV, "0") or 0) / 1000

    # -- the read API (DescribeTransactions, ListTransactions, metrics) -----------------------------
    def get(self, transactional_id: str) -> TxnMetadata | None:
        entry = self.entries.get(transactional_id)
        return None if entry is None or entry.meta.state is S.DEAD else entry.meta

    def all(self) -> list[TxnMetadata]:
        return [e.meta for e in self.entries.values() if e.meta.state is not S.DEAD]

    def partition_for(self, transactional_id: str) -> int:
        return partition_for_group(transactional_id, self.config.num_partitions)

    def availability(self, transactional_id: str) -> ErrorCode:
        if self.partition_for(transactional_id) in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if self._stopping:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE

    # -- loading ------------------------------------------------------------------------------------
    def begin_loading(self, partitions: Iterable[int]) -> None:
        self.loading.update(partitions)

    def finish_loading(self, partition: int, replayed: dict[str, TxnMetadata | None]) -> None:
        """Adopt a replayed partition; a transaction caught between prepare and complete is completed."""
        for transactional_id, meta in replayed.items():
            if meta is None or meta.state is S.DEAD:
                self.entries.pop(transactional_id, None)
                continue
            if meta.state is S.PREPARE_EPOCH_FENCE:  # never written by Kafka; treat as the abort it began
                meta = md.prepare_end(meta, False, meta.client_version, NO_PRODUCER_ID, meta.last_update_ms)
            entry = Entry(meta)
            self.entries[transactional_id] = entry
            if meta.state.is_prepared:
                log.info("completing transaction found prepared at load", transactional_id=transactional_id,
                         state=meta.state.value)
                self._start_completion(entry)
        self.loading.discard(partition)

    # -- InitProducerId -----------------------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = NO_PRODUCER_ID,
                               producer_epoch: int = NO_PRODUCER_EPOCH, *, enable_2pc: bool = False,
                               keep_prepared: bool = False) -> InitResult:
        if not transactional_id:
            return InitResult(ErrorCode.INVALID_REQUEST)
        if enable_2pc and not self.config.two_phase_commit_enabled:
            return InitResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if enable_2pc:
            timeout_ms = NO_TIMEOUT_MS
        elif not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return InitResult(ErrorCode.INVALID_REQUEST)
        code = self.availability(transactional_id)
        if code is not ErrorCode.NONE:
            return InitResult(code)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        entry = self.entries.get(transactional_id)
        if entry is None:
            try:
                producer_id = self._allocate_id()
            except TxnError as exc:
                return InitResult(exc.code)
            entry = Entry(md.new_metadata(transactional_id, producer_id, timeout_ms, self.clock_ms()))
            self.entries[transactional_id] = entry
        await self._await_completion(entry)
        meta = entry.meta
        if entry.pending is not None:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected is not None and not _valid_expected_id(meta, *expected):
            return InitResult(ErrorCode.PRODUCER_FENCED)
        now = self.clock_ms()
        try:
            if meta.state.is_prepared:
                return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
            if meta.state is S.ONGOING and keep_prepared:
                new = md.keep_prepared(meta, self._allocate_id(), now)
                code = await self._write(entry, new)
                if code is not ErrorCode.NONE:
                    return InitResult(code)
                return InitResult(ErrorCode.NONE, new.next_producer_id, 0, new.producer_id, new.producer_epoch)
            if meta.state is S.ONGOING:
                # abort it first, with the epoch fenced; the client retries on CONCURRENT_TRANSACTIONS and
                # the retry bumps the epoch again (or rotates the id when that exhausts it)
                code = await self._fence_and_abort(entry)
                return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS if code is ErrorCode.NONE else code)
            if epoch_exhausted(meta.producer_epoch) and (expected is None or expected[1] == meta.producer_epoch):
                new = md.rotate_producer_id(meta, self._allocate_id(), timeout_ms, now, expected is not None)
            else:
                new = md.increment_epoch(meta, timeout_ms, None if expected is None else expected[1], now)
        except TxnError as exc:
            return InitResult(exc.code)
        code = await self._write(entry, new)
        if code is not ErrorCode.NONE:
            return InitResult(code)
        log.info("initialized transactional id", transactional_id=transactional_id, producer_id=new.producer_id,
                 producer_epoch=new.producer_epoch)
        return InitResult(ErrorCode.NONE, new.producer_id, new.producer_epoch)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------------
    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: frozenset[TopicPartition], client_version: int = 1) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        code = self.availability(transactional_id)
        if code is not ErrorCode.NONE:
            return code
        entry = self.entries.get(transactional_id)
        if entry is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        await self._await_completion(entry)
        meta = entry.meta
        if meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch or meta.recovering:
            return ErrorCode.PRODUCER_FENCED
        if entry.pending is not None or meta.state.is_prepared:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if meta.state is S.ONGOING and partitions <= meta.partitions:
            return ErrorCode.NONE
        if meta.state is S.DEAD or meta.state is S.PREPARE_EPOCH_FENCE:
            return ErrorCode.INVALID_TXN_STATE
        if meta.state is S.ONGOING:  # a transaction keeps the highest protocol version it was seen with
            client_version = max(client_version, meta.client_version)
        new = md.add_partitions(meta, partitions, client_version, self.clock_ms())
        return await self._write(entry, new)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Kafka's `handleVerifyPartitionsInTransaction`: which partitions are in the open transaction."""
        wanted = list(partitions)
        code = self._verify_identity(transactional_id, producer_id, producer_epoch)
        if code is not ErrorCode.NONE:
            return dict.fromkeys(wanted, code)
        meta = self.entries[transactional_id].meta
        return {tp: ErrorCode.NONE if tp in meta.partitions else ErrorCode.TRANSACTION_ABORTABLE for tp in wanted}

    def _verify_identity(self, transactional_id: str | None, producer_id: int, producer_epoch: int) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        code = self.availability(transactional_id)
        if code is not ErrorCode.NONE:
            return code
        entry = self.entries.get(transactional_id)
        if entry is None or entry.meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if entry.meta.producer_epoch != producer_epoch or entry.meta.recovering:
            return ErrorCode.PRODUCER_FENCED
        if entry.meta.state.is_prepared:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.NONE

    # -- produce and TxnOffsetCommit verification (KIP-890 part 1; part 2's implicit add) -------------
    def check_produce(self, transactional_id: str | None, producer_id: int, producer_epoch: int, topic: str,
                      partition: int, api_version: int) -> ErrorCode | Awaitable[ErrorCode]:
        """May this transactional batch be appended? An error code, or (Produce v12+, a partition not yet
        in the transaction) an awaitable that adds it first. Codes are mapped for the request version as
        Kafka maps them: PRODUCER_FENCED is INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE is
        INVALID_TXN_STATE before Produce v11, and the retriable coordinator answers (loading, unavailable,
        CONCURRENT_TRANSACTIONS) are NOT_ENOUGH_REPLICAS, which every producer retries."""
        code = self._verify_identity(transactional_id, producer_id, producer_epoch)
        if code is ErrorCode.CONCURRENT_TRANSACTIONS and api_version >= 12:
            # v2: the next transaction's first batch may come while the last one writes its markers
            assert transactional_id is not None
            return self._add_for_produce(transactional_id, producer_id, producer_epoch, topic, partition)
        if code is ErrorCode.NONE:
            assert transactional_id is not None
            meta = self.entries[transactional_id].meta
            if meta.state is S.ONGOING and (topic, partition) in meta.partitions:
                return ErrorCode.NONE
            if api_version >= 12:
                return self._add_for_produce(transactional_id, producer_id, producer_epoch, topic, partition)
            if not self.config.partition_verification:
                return ErrorCode.NONE
            code = ErrorCode.TRANSACTION_ABORTABLE
        elif not self.config.partition_verification and api_version < 12 and code not in (
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            return ErrorCode.NONE
        return _produce_code(code, api_version)

    async def _add_for_produce(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                               partition: int) -> ErrorCode:
        code = await self._add_implicitly(transactional_id, producer_id, producer_epoch, (topic, partition))
        return _produce_code(code, 12)

    async def _add_implicitly(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partition: TopicPartition) -> ErrorCode:
        """Transactions v2's add of one partition, coalesced: the partitions of one request (and of
        concurrent ones) are checked one by one but written together, as Kafka's broker sends one add per
        request. Each caller puts its partition in the wanted set and takes the lock; whoever holds it
        writes every partition wanted under its producer id and epoch, so the others find theirs added."""
        entry = self.entries.get(transactional_id)
        if entry is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        key = (producer_id, producer_epoch)
        entry.implicit_wanted.setdefault(key, set()).add(partition)
        async with entry.implicit_lock:
            await asyncio.sleep(0)  # the other partitions of the same request are checked on this loop turn
            meta = entry.meta
            if (meta.state is S.ONGOING and partition in meta.partitions and meta.producer_id == producer_id
                    and meta.producer_epoch == producer_epoch):
                entry.implicit_wanted.get(key, set()).discard(partition)
                return ErrorCode.NONE
            batch = frozenset(entry.implicit_wanted.pop(key, set()) | {partition})
            return await self.add_partitions(transactional_id, producer_id, producer_epoch, batch, TV_2)

    def check_txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                group_id: str, offsets_partition: int | None = None,
                                api_version: int = 0) -> ErrorCode | Awaitable[ErrorCode]:
        """May TxnOffsetCommit write this group's offsets in the transaction? Its `__consumer_offsets`
        partition must have been added (AddOffsetsToTxn); v5+ (transactions v2) adds it instead, returning
        an awaitable. TRANSACTION_ABORTABLE from v4 on (Kafka's generic-error support), INVALID_TXN_STATE
        before; PRODUCER_FENCED stays itself (v3+ knows it)."""
        code = self._verify_identity(transactional_id, producer_id, producer_epoch)
        if code is not ErrorCode.NONE:
            return code
        meta = self.entries[transactional_id].meta
        partition = offsets_partition if offsets_partition is not None else -1
        if meta.state is S.ONGOING and any(t == OFFSETS_TOPIC and (partition < 0 or p == partition)
                                           for t, p in meta.partitions):
            return ErrorCode.NONE
        if api_version >= 5 and partition >= 0:
            return self._add_implicitly(transactional_id, producer_id, producer_epoch, (OFFSETS_TOPIC, partition))
        return ErrorCode.TRANSACTION_ABORTABLE if api_version >= 4 else ErrorCode.INVALID_TXN_STATE

    # -- EndTxn ---------------------------------------------------------------------------------------
    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                      client_version: int = 1) -> EndResult:
        if not transactional_id:
            return EndResult(ErrorCode.INVALID_REQUEST)
        code = self.availability(transactional_id)
        if code is not ErrorCode.NONE:
            return EndResult(code)
        entry = self.entries.get(transactional_id)
        if entry is None:
            return EndResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if entry.meta.state.is_prepared and entry.completion is not None:
            await self._await_completion(entry)  # a retry of the same end, or the next one: wait for the last
        try:
            new = self._prepare_end(entry, producer_id, producer_epoch, commit, client_version)
        except TxnError as exc:
            return EndResult(exc.code)
        except _AlreadyDone:
            return EndResult(ErrorCode.NONE, entry.meta.producer_id, entry.meta.producer_epoch)
        code = await self._write(entry, new)
        if code is not ErrorCode.NONE:
            return EndResult(code)
        self._start_completion(entry)
        after = md.complete(new, new.last_update_ms)
        return EndResult(ErrorCode.NONE, after.producer_id, after.producer_epoch)

    def _prepare_end(self, entry: Entry, producer_id: int, producer_epoch: int, commit: bool,
                     client_version: int) -> TxnMetadata:
        meta = entry.meta
        now = self.clock_ms()
        if client_version < TV_2:
            return self._prepare_end_v1(entry, producer_id, producer_epoch, commit, now)
        retry_on_overflow = (meta.prev_producer_id == producer_id and producer_epoch == md.MAX_EPOCH - 1
                             and meta.producer_epoch == 0)
        # a retry of this client's own end (which bumped its epoch), not an epoch the coordinator bumped to
        # fence it (a fence leaves no last epoch): the fenced client's late EndTxn must be refused
        retry_on_bump = meta.producer_epoch == producer_epoch + 1 and meta.last_producer_epoch == producer_epoch
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid_epoch = retry_on_bump
        elif meta.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == meta.producer_epoch
        else:
            valid_epoch = producer_epoch == meta.producer_epoch
        is_retry = retry_on_bump or retry_on_overflow
        recovery_client = meta.recovering and producer_id == meta.next_producer_id and producer_epoch == 0
        if recovery_client:
            valid_epoch, is_retry = True, False
        elif meta.producer_id != producer_id and not retry_on_overflow:
            raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if not valid_epoch or (meta.recovering and not recovery_client):
            raise TxnError(ErrorCode.PRODUCER_FENCED)
        if entry.pending is not None:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        state = meta.state
        if state is S.ONGOING:
            return md.prepare_end(meta, commit, TV_2, self._next_id_for(meta), now)
        if state is S.PREPARE_COMMIT or state is S.PREPARE_ABORT:
            if (state is S.PREPARE_COMMIT) == commit:
                raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
            raise TxnError(ErrorCode.INVALID_TXN_STATE)
        if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and _same_end(state, commit):
            if is_retry:
                raise _AlreadyDone()
            if commit:
                raise TxnError(ErrorCode.INVALID_TXN_STATE)
        if not commit and not is_retry and state.is_complete:
            return md.prepare_end(meta, False, TV_2, self._next_id_for(meta), now, nothing_added=True)
        raise TxnError(ErrorCode.INVALID_TXN_STATE)

    def _prepare_end_v1(self, entry: Entry, producer_id: int, producer_epoch: int, commit: bool,
                        now: int) -> TxnMetadata:
        meta = entry.meta
        recovery_client = meta.recovering and producer_id == meta.next_producer_id and producer_epoch == 0
        if not recovery_client:
            if meta.producer_id != producer_id:
                raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            if producer_epoch != meta.producer_epoch or meta.recovering:
                raise TxnError(ErrorCode.PRODUCER_FENCED)
        if entry.pending is not None:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        state = meta.state
        if state is S.ONGOING:
            return md.prepare_end(meta, commit, md.TV_1, meta.next_producer_id, now)
        if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and _same_end(state, commit):
            raise _AlreadyDone()
        if state.is_prepared and _same_end(state, commit):
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        raise TxnError(ErrorCode.INVALID_TXN_STATE)

    def _next_id_for(self, meta: TxnMetadata) -> int:
        """v2 bumps the epoch at every end: a fresh id when that exhausts it (KIP-939: the new client's)."""
        if meta.recovering:
            return meta.next_producer_id
        return self._allocate_id() if epoch_exhausted(meta.producer_epoch) else NO_PRODUCER_ID

    def _allocate_id(self) -> int:
        """A fresh producer id; the persisted block allocator failing is a retriable answer, not a crash."""
        try:
            return self.new_producer_id()
        except OSError as exc:
            log.error("cannot allocate a producer id", error=str(exc))
            raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE) from exc

    # -- the coordinator's own aborts: fencing, timeouts ----------------------------------------------
    async def _fence_and_abort(self, entry: Entry) -> ErrorCode:
        meta = entry.meta
        fenced = md.fence_epoch(meta, entry.failed_fence)
        new = md.prepare_end(fenced, False, meta.client_version, NO_PRODUCER_ID, self.clock_ms())
        code = await self._write(entry, new)
        if code is not ErrorCode.NONE:
            entry.failed_fence = True
            return code
        entry.failed_fence = False
        self._start_completion(entry)
        return ErrorCode.NONE

    async def abort_timed_out(self) -> list[str]:
        """Abort (with the epoch fenced, as Kafka does) every open transaction past its timeout."""
        now = self.clock_ms()
        aborted = []
        for transactional_id, entry in list(self.entries.items()):
            meta = entry.meta
            if not meta.timed_out(now) or entry.pending is not None:
                continue
            if self.partition_for(transactional_id) in self.loading:
                continue
            log.info("aborting timed out transaction", transactional_id=transactional_id,
                     producer_id=meta.producer_id, timeout_ms=meta.timeout_ms)
            if await self._fence_and_abort(entry) is ErrorCode.NONE:
                aborted.append(transactional_id)
        return aborted

    async def expire_idle(self) -> list[str]:
        """Remove ids idle past `transactional.id.expiration.ms` with no transaction open (a tombstone)."""
        now = self.clock_ms()
        expired = []
        for transactional_id, entry in list(self.entries.items()):
            meta = entry.meta
            if (not meta.state.is_complete or entry.pending is not None
                    or now < meta.last_update_ms + self.config.id_expiration_ms):
                continue
            dead = md.expire(meta)
            entry.pending = dead.state
            try:
                code = await self.log.write(self.partition_for(transactional_id), transactional_id, None)
            finally:
                entry.pending = None
            if code is ErrorCode.NONE and self.entries.get(transactional_id) is entry:
                del self.entries[transactional_id]
                expired.append(transactional_id)
        return expired

    # -- completion: markers, then the Complete record ------------------------------------------------
    def _start_completion(self, entry: Entry) -> None:
        loop = asyncio.get_running_loop()
        entry.completion = loop.create_future()
        task = loop.create_task(self._complete(entry, entry.meta))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _complete(self, entry: Entry, prepared: TxnMetadata) -> None:
        try:
            if self.marker_delay_s > 0:
                await asyncio.sleep(self.marker_delay_s)
            commit = prepared.state is S.PREPARE_COMMIT
            remaining = sorted(prepared.partitions)
            backoff = RETRY_BACKOFF_S
            while remaining and not self._stopping:
                results = await self.markers(prepared.producer_id, prepared.producer_epoch, self.coordinator_epoch,
                                             commit, remaining)
                remaining = [tp for tp in remaining if results.get(tp, ErrorCode.NONE) not in MARKER_DONE]
                if remaining:
                    if backoff == RETRY_BACKOFF_S:  # one line per transaction, not one per attempt
                        log.warning("transaction markers failed, retrying", partitions=len(remaining),
                                    transactional_id=prepared.transactional_id)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, MAX_RETRY_BACKOFF_S)
            backoff = RETRY_BACKOFF_S
            while not self._stopping:
                done = md.complete(prepared, self.clock_ms())
                if await self._write(entry, done) is ErrorCode.NONE:
                    break
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_RETRY_BACKOFF_S)
        except Exception:
            log.exception("completing a transaction failed", transactional_id=prepared.transactional_id)
        finally:
            if entry.completion is not None and not entry.completion.done():
                entry.completion.set_result(None)
            entry.completion = None

    async def _await_completion(self, entry: Entry) -> None:
        completion = entry.completion
        if completion is not None and not completion.done():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(completion), COMPLETION_WAIT_S)

    async def wait_idle(self) -> None:
        """Every completion in flight has finished (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _write(self, entry: Entry, new: TxnMetadata) -> ErrorCode:
        entry.pending = new.state
        try:
            code = await self.log.write(self.partition_for(new.transactional_id), new.transactional_id, new)
        except Exception as exc:  # a bug or a disk failure in the writer: the state is not adopted
            log.error("transaction state write failed", transactional_id=new.transactional_id, error=repr(exc))
            code = ErrorCode.KAFKA_STORAGE_ERROR
        finally:
            entry.pending = None
        if code is ErrorCode.NONE:
            entry.meta = new
            return code
        return client_error(code)

    async def shutdown(self) -> None:
        self._stopping = True
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task


class _AlreadyDone(Exception):
    """EndTxn retried after it succeeded: answered NONE without writing anything."""


def _same_end(state: TxnState, commit: bool) -> bool:
    """A prepared or completed end of the kind asked for (commit after commit, abort after abort)."""
    return (state in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)) == commit


def _valid_expected_id(meta: TxnMetadata, producer_id: int, producer_epoch: int) -> bool:
    """Kafka's `isValidProducerId` (KIP-360): a fresh id, the current id, or the previous one when its
    epoch was exhausted (a retry of the bump that rotated it)."""
    return (meta.producer_epoch == NO_PRODUCER_EPOCH or producer_id == meta.producer_id
            or (producer_id == meta.prev_producer_id and epoch_exhausted(producer_epoch)))


#: verification outcomes a producer should simply retry: Kafka answers them NOT_ENOUGH_REPLICAS, which every
#: client retries without refreshing its metadata
_RETRY_PRODUCE = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                            ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


def _produce_code(code: ErrorCode, api_version: int) -> ErrorCode:
    if code in _RETRY_PRODUCE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if code is ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code is ErrorCode.TRANSACTION_ABORTABLE and api_version < 11:
        return ErrorCode.INVALID_TXN_STATE
    return code



