"""A synchronous transactional producer, and the driver's completion of transactions tasks left prepared.

What it speaks (Kafka's transaction protocol, v1 flavour: partitions are added explicitly):
- `init`: FindCoordinator (key type 1) then InitProducerId for the transactional id. With
  `enable_2pc` (KIP-939, InitProducerId v6) the coordinator never times the transaction out; and, as
  always, the epoch bump fences every earlier holder of the id and aborts what it left open (the broker
  answers CONCURRENT_TRANSACTIONS until that abort is done: retried).
- `send` / `flush`: records go into idempotent, transactional v2 batches (`protocol.records.record.
  build_batch`), one sequence counter per partition; before a partition's first batch, AddPartitionsToTxn.
  Each Produce request carries at most one batch per partition (as Kafka's own producer sends them), so a
  retried request resends the same batch with the same sequence and the broker deduplicates it.
- `commit_offsets`: AddOffsetsToTxn then TxnOffsetCommit: offsets that become visible with the data.
- `end`: EndTxn. The Spark sink's tasks never call it: they `flush` and leave the transaction open
  ("prepared") for the driver, which calls `complete_prepared`: InitProducerId v6 with `enable_2pc` and
  `keep_prepared_txn` returns the open transaction's producer id and epoch (`ongoing_txn_*`) beside a new
  epoch for us; only if they are the ones the task reported does it send EndTxn(commit) (KIP-939's
  `completeTransaction`). `abort_open` aborts whatever the id has open.

Key -> partition is Kafka's default partitioner (murmur2); a null key sticks to one random partition per
topic until that partition's batch is full, as Kafka's sticky partitioner does.

Errors: retriable ones (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR,
NOT_LEADER_OR_FOLLOWER, timeouts, ...) are retried with backoff until the operation deadline; anything
else raises `BrokerError` naming the request and the error (PRODUCER_FENCED: another attempt took the id).
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from pybroker.clients.spark.cluster import GROUP, RETRIABLE, TRANSACTION, Cluster
from pybroker.clients.wire import BrokerError, Connection, Unsupported
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from pybroker.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
)
from pybroker.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from pybroker.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from pybroker.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
)
from pybroker.protocol.partitioner import partition_for_key
from pybroker.protocol.records.codecs import NONE
from pybroker.protocol.records.record import Record, build_batch

TopicPartition = tuple[str, int]

#: InitProducerId v6 carries KIP-939's enable_2pc / keep_prepared_txn
TWO_PHASE_COMMIT_VERSION = 6
#: client versions of the transaction v1 protocol (v4+ of AddPartitionsToTxn are broker-to-broker; Produce
#: v12 / EndTxn v5 / TxnOffsetCommit v5 are transactions v2, where partitions are added implicitly)
ADD_PARTITIONS_MAX, PRODUCE_MAX, END_TXN_MAX, TXN_OFFSET_COMMIT_MAX = 3, 11, 4, 4
PRODUCE_MIN = 3  # the first version of Produce that carries v2 batches and a transactional id
DEFAULT_TIMEOUT_MS = 60_000
DEFAULT_BATCH_BYTES = 16_384
DEFAULT_MAX_REQUEST_BYTES = 1_048_576
_RECORD_OVERHEAD = 32  # varints and attributes a record adds beyond its key, value and headers


@dataclass(frozen=True, slots=True)
class ProducerIdentity:
    """The producer id and epoch a transactional id holds: what a prepared transaction is known by."""

    producer_id: int
    epoch: int


class NotPrepared(RuntimeError):
    """The transaction a task prepared is not the one open under its id any more (fenced or aborted)."""


def _check(code: int, what: str) -> None:
    if code != ErrorCode.NONE:
        raise BrokerError(code, what)


def init_producer_id(cluster: Cluster, transactional_id: str, *, enable_2pc: bool, keep_prepared_txn: bool = False,
                     timeout_ms: int = DEFAULT_TIMEOUT_MS) -> InitProducerIdResponse:
    """InitProducerId for `transactional_id` at its coordinator, retried; v6 when 2PC is asked for."""
    what = f"InitProducerId({transactional_id!r})"

    def attempt() -> InitProducerIdResponse:
        conn = cluster.coordinator(TRANSACTION, transactional_id)
        minimum = TWO_PHASE_COMMIT_VERSION if (enable_2pc or keep_prepared_txn) else 0
        try:
            version = conn.version(InitProducerIdRequest, minimum=minimum)
        except Unsupported as exc:
            if not minimum:
                raise
            # as Kafka, a broker with two-phase commit off does not advertise InitProducerId v6 at all
            raise Unsupported(f"{exc}: two-phase commit needs transaction.two.phase.commit.enable=true on the "
                              "broker") from None
        answer = conn.request(InitProducerIdRequest(
            transactional_id=transactional_id, transaction_timeout_ms=timeout_ms,
            enable_2pc=enable_2pc, keep_prepared_txn=keep_prepared_txn), version)
        assert isinstance(answer, InitProducerIdResponse)
        if answer.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED and enable_2pc:
            raise BrokerError(answer.error_code, what, "two-phase commit needs transaction.two.phase.commit.enable="
                              "true on the broker, and WRITE and TWO_PHASE_COMMIT on the transactional id")
        _check(answer.error_code, what)
        return answer

    return cluster.retry(what, attempt, on_moved=lambda: cluster.forget_coordinator(TRANSACTION, transactional_id))


def end_txn(cluster: Cluster, transactional_id: str, identity: ProducerIdentity, *, commit: bool) -> None:
    """EndTxn at the transaction's coordinator, retried (a retry of a completed EndTxn is answered NONE)."""
    what = f"EndTxn({transactional_id!r}, {'commit' if commit else 'abort'})"

    def attempt() -> None:
        conn = cluster.coordinator(TRANSACTION, transactional_id)
        answer = conn.request(EndTxnRequest(transactional_id=transactional_id, producer_id=identity.producer_id,
                                            producer_epoch=identity.epoch, committed=commit),
                              conn.version(EndTxnRequest, cap=END_TXN_MAX))
        assert isinstance(answer, EndTxnResponse)
        _check(answer.error_code, what)

    cluster.retry(what, attempt, on_moved=lambda: cluster.forget_coordinator(TRANSACTION, transactional_id))


def complete_prepared(cluster: Cluster, transactional_id: str, prepared: ProducerIdentity, *, commit: bool) -> None:
    """Commit (or abort) the transaction a task left open under `transactional_id` as `prepared`.

    KIP-939's recovery: InitProducerId v6 with keep_prepared_txn keeps the open transaction and tells
    which producer id and epoch it was written with. Anything else open under the id (a later attempt's
    transaction) is aborted, never committed, and NotPrepared says what happened.
    """
    answer = init_producer_id(cluster, transactional_id, enable_2pc=True, keep_prepared_txn=True)
    ongoing = ProducerIdentity(answer.ongoing_txn_producer_id, answer.ongoing_txn_producer_epoch)
    ours = ProducerIdentity(answer.producer_id, answer.producer_epoch)
    if ongoing != prepared:
        if ongoing.producer_id >= 0:
            end_txn(cluster, transactional_id, ours, commit=False)
        found = "no open transaction" if ongoing.producer_id < 0 else \
            f"one of producer {ongoing.producer_id} epoch {ongoing.epoch} (aborted)"
        raise NotPrepared(f"transaction {transactional_id!r} was prepared by producer {prepared.producer_id} "
                          f"epoch {prepared.epoch}, but the coordinator has {found}: another attempt fenced it, or "
                          "it was aborted")
    end_txn(cluster, transactional_id, ours, commit=commit)


def abort_open(cluster: Cluster, transactional_id: str) -> None:
    """Abort whatever `transactional_id` has open (InitProducerId without keep_prepared_txn fences and aborts)."""
    init_producer_id(cluster, transactional_id, enable_2pc=True)


@dataclass(slots=True)
class _Open:
    """Records gathered for one partition's next batch."""

    records: list[Record] = field(default_factory=list)
    base_timestamp: int = 0
    size: int = 0


class TransactionalProducer:
    """One transactional id's producer: `init`, then `send`... `flush`, optionally `commit_offsets` / `end`."""

    def __init__(self, cluster: Cluster, transactional_id: str, *, compression: int = NONE,
                 batch_bytes: int = DEFAULT_BATCH_BYTES, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                 clock: Callable[[], float] = time.time, rng: random.Random | None = None) -> None:
        self.cluster = cluster
        self.transactional_id = transactional_id
        self.compression = compression
        self.batch_bytes = max(1, batch_bytes)
        self.max_request_bytes = max_request_bytes
        self.clock = clock
        self.rng = rng or random.Random()
        self.identity: ProducerIdentity | None = None
        #: partitions added to the transaction so far
        self.partitions: set[TopicPartition] = set()
        self.records_sent = 0
        self._open: dict[TopicPartition, _Open] = {}
        self._ready: dict[TopicPartition, deque[tuple[int, bytes]]] = {}  # (records, batch) in sequence order
        self._ready_bytes = 0
        self._sequence: dict[TopicPartition, int] = {}
        self._sticky: dict[str, int] = {}

    # -- lifetime ------------------------------------------------------------------------------------
    def init(self, *, enable_2pc: bool, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> ProducerIdentity:
        """Take the transactional id (fencing earlier holders, aborting what they left open)."""
        answer = init_producer_id(self.cluster, self.transactional_id, enable_2pc=enable_2pc, timeout_ms=timeout_ms)
        self.identity = ProducerIdentity(answer.producer_id, answer.producer_epoch)
        return self.identity

    def _identity(self) -> ProducerIdentity:
        if self.identity is None:
            raise RuntimeError("call init() first")
        return self.identity

    def end(self, *, commit: bool) -> None:
        """EndTxn: the one-phase ending (the 2PC sink leaves this to the driver's `complete_prepared`)."""
        self.flush()
        end_txn(self.cluster, self.transactional_id, self._identity(), commit=commit)
        self.partitions.clear()

    # -- records -------------------------------------------------------------------------------------
    def partition_for(self, topic: str, key: bytes | None) -> int:
        count = self.cluster.retry(f"partitions of topic {topic!r}", lambda: self.cluster.partitions(topic),
                                   on_moved=lambda: self.cluster.forget(topic))
        if key is not None:
            return partition_for_key(key, count)
        sticky = self._sticky.get(topic)
        if sticky is None or sticky >= count:
            sticky = self._sticky[topic] = self.rng.randrange(count)
        return sticky

    def send(self, topic: str, partition: int | None, key: bytes | None, value: bytes | None,
             headers: Iterable[tuple[str, bytes | None]] = ()) -> TopicPartition:
        """Queue one record (sent when its batch fills, or at `flush`); returns where it goes."""
        self._identity()
        if partition is None:
            partition = self.partition_for(topic, key)
        tp = (topic, partition)
        now = int(self.clock() * 1000)
        pending = self._open.get(tp)
        if pending is None:
            pending = self._open[tp] = _Open(base_timestamp=now)
        record = Record(offset_delta=len(pending.records), timestamp_delta=max(0, now - pending.base_timestamp),
                        key=key, value=value, headers=list(headers))
        size = (_RECORD_OVERHEAD + len(key or b"") + len(value or b"")
                + sum(len(k) + len(v or b"") + 8 for k, v in record.headers))
        if size > self.max_request_bytes:
            raise BrokerError(ErrorCode.MESSAGE_TOO_LARGE, f"a record for {topic}-{partition}",
                              f"{size} bytes, more than kafka.max.request.size {self.max_request_bytes}")
        if pending.records and pending.size + size > self.max_request_bytes:
            self._seal(tp)  # a batch never outgrows a request, whatever kafka.batch.size says
            pending = self._open[tp] = _Open(base_timestamp=now)
            record.offset_delta, record.timestamp_delta = 0, 0
        pending.records.append(record)
        pending.size += size
        if pending.size >= self.batch_bytes:
            self._seal(tp)
            if self._sticky.get(topic) == partition:
                del self._sticky[topic]
            if self._ready_bytes >= self.max_request_bytes:
                self._send_ready()
        return tp

    def _seal(self, tp: TopicPartition) -> None:
        pending = self._open.pop(tp, None)
        if pending is None or not pending.records:
            return
        identity = self._identity()
        sequence = self._sequence.get(tp, 0)
        batch = build_batch(pending.records, compression=self.compression, base_timestamp=pending.base_timestamp,
                            producer_id=identity.producer_id, producer_epoch=identity.epoch,
                            base_sequence=sequence, is_transactional=True)
        self._sequence[tp] = (sequence + len(pending.records)) & 0x7FFFFFFF
        self._ready.setdefault(tp, deque()).append((len(pending.records), batch))
        self._ready_bytes += len(batch)

    def flush(self) -> None:
        """Send everything queued, and wait until the broker acknowledged all of it."""
        for tp in list(self._open):
            self._seal(tp)
        self._send_ready()

    # -- the wire ------------------------------------------------------------------------------------
    def _send_ready(self) -> None:
        while self._ready:
            self._add_partitions([tp for tp in self._ready if tp not in self.partitions])
            self.cluster.retry(f"Produce for transaction {self.transactional_id!r}", self._produce_round,
                               on_moved=self._forget_leaders)

    def _forget_leaders(self) -> None:
        for topic in {t for t, _ in self._ready}:
            self.cluster.forget(topic)

    def _produce_round(self) -> None:
        """One Produce request per leader with the first ready batch of each partition (capped in size)."""
        by_leader: dict[int, tuple[Connection, dict[TopicPartition, bytes]]] = {}
        for tp, queue in self._ready.items():
            conn = self.cluster.leader(*tp)
            _, chosen = by_leader.setdefault(id(conn), (conn, {}))
            if chosen and sum(map(len, chosen.values())) + len(queue[0][1]) > self.max_request_bytes:
                continue
            chosen[tp] = queue[0][1]
        for conn, chosen in by_leader.values():
            self._produce(conn, chosen)

    def _produce(self, conn: Connection, batches: Mapping[TopicPartition, bytes]) -> None:
        topics: dict[str, list[PartitionProduceData]] = {}
        for (topic, partition), batch in batches.items():
            topics.setdefault(topic, []).append(PartitionProduceData(index=partition, records=batch))
        version = conn.version(ProduceRequest, minimum=PRODUCE_MIN, cap=PRODUCE_MAX)
        request = ProduceRequest(transactional_id=self.transactional_id, acks=-1,
                                 # half the socket's timeout, so the broker's own answer arrives first
                                 timeout_ms=int(self.cluster.timeouts.request_s * 500),
                                 topic_data=[TopicProduceData(name=t, partition_data=p) for t, p in topics.items()])
        answer = conn.request(request, version)
        assert isinstance(answer, ProduceResponse)
        codes = {(t.name, p.index): (p.error_code, p.error_message)
                 for t in answer.responses for p in t.partition_responses}
        retry: BrokerError | None = None
        for tp in batches:
            code, message = codes.get(tp, (ErrorCode.UNKNOWN_SERVER_ERROR, "the answer did not name it"))
            if code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                count, batch = self._ready[tp].popleft()
                self.records_sent += count
                self._ready_bytes -= len(batch)
                if not self._ready[tp]:
                    del self._ready[tp]
                continue
            error = BrokerError(code, f"Produce to {tp[0]}-{tp[1]} (transaction {self.transactional_id!r})", message)
            if code not in RETRIABLE:
                raise error
            retry = error
        if retry is not None:
            raise retry

    def _add_partitions(self, tps: list[TopicPartition]) -> None:
        if not tps:
            return
        identity = self._identity()
        what = f"AddPartitionsToTxn({self.transactional_id!r})"

        def attempt() -> None:
            conn = self.cluster.coordinator(TRANSACTION, self.transactional_id)
            topics: dict[str, list[int]] = {}
            for topic, partition in tps:
                topics.setdefault(topic, []).append(partition)
            answer = conn.request(AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=identity.producer_id, v3_and_below_producer_epoch=identity.epoch,
                v3_and_below_topics=[AddPartitionsToTxnTopic(name=t, partitions=p) for t, p in topics.items()]),
                conn.version(AddPartitionsToTxnRequest, cap=ADD_PARTITIONS_MAX))
            assert isinstance(answer, AddPartitionsToTxnResponse)
            _check(answer.error_code, what)
            errors = {(t.name, p.partition_index): p.partition_error_code
                      for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition}
            # OPERATION_NOT_ATTEMPTED marks the partitions held back by another partition's error
            failed = [(tp, c) for tp, c in errors.items() if c not in (ErrorCode.NONE, ErrorCode.OPERATION_NOT_ATTEMPTED)]
            if failed:
                (topic, partition), code = failed[0]
                raise BrokerError(code, f"{what} for {topic}-{partition}")
            self.partitions.update(tps)

        self.cluster.retry(what, attempt,
                           on_moved=lambda: self.cluster.forget_coordinator(TRANSACTION, self.transactional_id))

    # -- offsets -------------------------------------------------------------------------------------
    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, tuple[int, str]]) -> None:
        """Offsets (with metadata) for `group_id`, committed or aborted with the transaction."""
        identity = self._identity()
        what = f"AddOffsetsToTxn({self.transactional_id!r}, group {group_id!r})"

        def add() -> None:
            conn = self.cluster.coordinator(TRANSACTION, self.transactional_id)
            answer = conn.request(AddOffsetsToTxnRequest(
                transactional_id=self.transactional_id, producer_id=identity.producer_id,
                producer_epoch=identity.epoch, group_id=group_id), conn.version(AddOffsetsToTxnRequest))
            assert isinstance(answer, AddOffsetsToTxnResponse)
            _check(answer.error_code, what)

        self.cluster.retry(what, add,
                           on_moved=lambda: self.cluster.forget_coordinator(TRANSACTION, self.transactional_id))
        topics: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
        for (topic, partition), (offset, metadata) in offsets.items():
            topics.setdefault(topic, []).append(TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=metadata))
        commit_what = f"TxnOffsetCommit({self.transactional_id!r}, group {group_id!r})"

        def commit() -> None:
            conn = self.cluster.coordinator(GROUP, group_id)
            answer = conn.request(TxnOffsetCommitRequest(
                transactional_id=self.transactional_id, group_id=group_id, producer_id=identity.producer_id,
                producer_epoch=identity.epoch,
                topics=[TxnOffsetCommitRequestTopic(name=t, partitions=p) for t, p in topics.items()]),
                conn.version(TxnOffsetCommitRequest, cap=TXN_OFFSET_COMMIT_MAX))
            assert isinstance(answer, TxnOffsetCommitResponse)
            for topic in answer.topics:
                for p in topic.partitions:
                    _check(p.error_code, f"{commit_what} for {topic.name}-{p.partition_index}")

        self.cluster.retry(commit_what, commit, on_moved=lambda: self.cluster.forget_coordinator(GROUP, group_id))
