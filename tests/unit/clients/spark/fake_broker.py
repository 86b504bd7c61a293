"""A broker in memory, just enough of Kafka's transaction protocol to test the sink's client without sockets.

It answers the sink's requests as objects (no encoding: the codecs have their own tests) with Kafka's
rules the client relies on: epoch fencing and abort-on-init, KIP-939's keep_prepared_txn answer,
partitions added before produce, per-partition sequences (a duplicate is acknowledged, a gap refused),
offsets visible only after commit. `fail[api_key]` queues error codes to answer first, to test retries.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from pybroker.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from pybroker.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from pybroker.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from pybroker.protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from pybroker.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from pybroker.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from pybroker.protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from pybroker.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from pybroker.protocol.records.batch import parse_header
from pybroker.protocol.records.record import decode_records

E = ErrorCode


@dataclass
class Txn:
    producer_id: int
    epoch: int = -1
    open: bool = False
    #: the epoch the open transaction was written with (differs from `epoch` after keep_prepared_txn)
    txn_epoch: int = -1
    partitions: set[tuple[str, int]] = field(default_factory=set)
    records: list[tuple[str, int, bytes | None, bytes | None]] = field(default_factory=list)
    offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)
    enable_2pc: bool = False


class FakeBroker:
    def __init__(self, topics: dict[str, int], *, max_init_version: int = 6) -> None:
        self.topics = topics
        self.max_init_version = max_init_version
        #: transaction.two.phase.commit.enable as DescribeConfigs answers it (None: the key is not named)
        self.two_phase_commit: str | None = "true"
        self.txns: dict[str, Txn] = {}
        self.committed: list[tuple[str, int, bytes | None, bytes | None]] = []
        self.aborted: list[tuple[str, int, bytes | None, bytes | None]] = []
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.sequences: dict[tuple[int, int, str, int], int] = {}  # a new epoch starts at sequence 0
        self.fail: dict[int, deque[int]] = defaultdict(deque)
        self.calls: list[str] = []
        self._next_pid = 1000

    def connect(self, host: str, port: int, *, timeout_s: float) -> FakeConnection:
        return FakeConnection(self, f"{host}:{port}")

    # -- handlers ----------------------------------------------------------------------------------
    def handle(self, request: Any, version: int) -> Any:
        name = type(request).__name__.removesuffix("Request")
        self.calls.append(name)
        queued = self.fail[type(request).API_KEY]
        if queued:
            return self._error(request, queued.popleft())
        return getattr(self, f"_{name}")(request, version)

    def _error(self, request: Any, code: int) -> Any:
        if isinstance(request, ProduceRequest):
            return ProduceResponse(responses=[TopicProduceResponse(name=t.name, partition_responses=[
                PartitionProduceResponse(index=p.index, error_code=code) for p in t.partition_data])
                for t in request.topic_data])
        if isinstance(request, FindCoordinatorRequest):
            return FindCoordinatorResponse(coordinators=[Coordinator(key=k, error_code=code)
                                                         for k in request.coordinator_keys])
        if isinstance(request, TxnOffsetCommitRequest):
            return TxnOffsetCommitResponse(topics=[TxnOffsetCommitResponseTopic(name=t.name, partitions=[
                TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                for p in t.partitions]) for t in request.topics])
        cls = {InitProducerIdRequest: InitProducerIdResponse, EndTxnRequest: EndTxnResponse,
               AddPartitionsToTxnRequest: AddPartitionsToTxnResponse, AddOffsetsToTxnRequest: AddOffsetsToTxnResponse,
               OffsetFetchRequest: OffsetFetchResponse}[type(request)]
        return cls(error_code=code)

    def _FindCoordinator(self, req: FindCoordinatorRequest, version: int) -> FindCoordinatorResponse:
        return FindCoordinatorResponse(coordinators=[Coordinator(key=k, node_id=1, host="fake", port=1)
                                                     for k in req.coordinator_keys])

    def _DescribeConfigs(self, req: DescribeConfigsRequest, version: int) -> DescribeConfigsResponse:
        configs = [] if self.two_phase_commit is None else [
            DescribeConfigsResourceResult(name="transaction.two.phase.commit.enable", value=self.two_phase_commit)]
        return DescribeConfigsResponse(results=[DescribeConfigsResult(resource_type=r.resource_type,
                                                                      resource_name=r.resource_name, configs=configs)
                                                for r in req.resources])

    def _Metadata(self, req: MetadataRequest, version: int) -> MetadataResponse:
        topics = [MetadataResponseTopic(name=t.name, error_code=E.UNKNOWN_TOPIC_OR_PARTITION)
                  if t.name not in self.topics else
                  MetadataResponseTopic(name=t.name, partitions=[MetadataResponsePartition(partition_index=i, leader_id=1)
                                                                 for i in range(self.topics[t.name])])
                  for t in req.topics or []]
        return MetadataResponse(brokers=[MetadataResponseBroker(node_id=1, host="fake", port=1)], topics=topics)

    def _end(self, txn: Txn, commit: bool) -> None:
        (self.committed if commit else self.aborted).extend(txn.records)
        if commit:
            self.offsets.update(txn.offsets)
        txn.records, txn.offsets, txn.partitions, txn.open = [], {}, set(), False

    def _InitProducerId(self, req: InitProducerIdRequest, version: int) -> InitProducerIdResponse:
        tid = req.transactional_id or ""
        txn = self.txns.get(tid)
        if txn is None:
            txn = self.txns[tid] = Txn(producer_id=self._next_pid)
            self._next_pid += 1
        ongoing = (txn.producer_id, txn.txn_epoch) if txn.open else (-1, -1)
        if txn.open and not req.keep_prepared_txn:
            self._end(txn, commit=False)
            ongoing = (-1, -1)
        txn.epoch += 1
        txn.enable_2pc = req.enable_2pc
        return InitProducerIdResponse(producer_id=txn.producer_id, producer_epoch=txn.epoch,
                                      ongoing_txn_producer_id=ongoing[0], ongoing_txn_producer_epoch=ongoing[1])

    def _fenced(self, tid: str, producer_id: int, epoch: int) -> int:
        txn = self.txns.get(tid)
        if txn is None or txn.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        return E.PRODUCER_FENCED if epoch != txn.epoch else E.NONE

    def _AddPartitionsToTxn(self, req: AddPartitionsToTxnRequest, version: int) -> AddPartitionsToTxnResponse:
        tid = req.v3_and_below_transactional_id
        code = self._fenced(tid, req.v3_and_below_producer_id, req.v3_and_below_producer_epoch)
        if code == E.NONE:
            txn = self.txns[tid]
            if not txn.open:
                txn.open, txn.txn_epoch = True, txn.epoch
            txn.partitions.update((t.name, p) for t in req.v3_and_below_topics for p in t.partitions)
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[AddPartitionsToTxnTopicResult(
            name=t.name, results_by_partition=[AddPartitionsToTxnPartitionResult(partition_index=p,
                                                                                 partition_error_code=code)
                                               for p in t.partitions]) for t in req.v3_and_below_topics])

    def _Produce(self, req: ProduceRequest, version: int) -> ProduceResponse:
        assert req.acks == -1 and req.transactional_id
        txn = self.txns[req.transactional_id]
        out = []
        for t in req.topic_data:
            answers = []
            for p in t.partition_data:
                batch = bytes(p.records)
                header = parse_header(batch)
                code = self._fenced(req.transactional_id, header.producer_id, header.producer_epoch)
                if code == E.NONE and (t.name, p.index) not in txn.partitions:
                    code = E.INVALID_TXN_STATE
                key = (header.producer_id, header.producer_epoch, t.name, p.index)
                expected = self.sequences.get(key, 0)
                if code == E.NONE and header.base_sequence < expected:
                    code = E.DUPLICATE_SEQUENCE_NUMBER
                elif code == E.NONE and header.base_sequence > expected:
                    code = E.OUT_OF_ORDER_SEQUENCE_NUMBER
                if code == E.NONE:
                    assert header.attributes & 0x10, "transactional bit"
                    records = decode_records(batch, 0, header)
                    txn.records += [(t.name, p.index, r.key, r.value) for r in records]
                    self.sequences[key] = expected + len(records)
                answers.append(PartitionProduceResponse(index=p.index, error_code=code))
            out.append(TopicProduceResponse(name=t.name, partition_responses=answers))
        return ProduceResponse(responses=out)

    def _EndTxn(self, req: EndTxnRequest, version: int) -> EndTxnResponse:
        code = self._fenced(req.transactional_id, req.producer_id, req.producer_epoch)
        if code == E.NONE:
            txn = self.txns[req.transactional_id]
            if txn.open:
                self._end(txn, req.committed)
        return EndTxnResponse(error_code=code)

    def _AddOffsetsToTxn(self, req: AddOffsetsToTxnRequest, version: int) -> AddOffsetsToTxnResponse:
        code = self._fenced(req.transactional_id, req.producer_id, req.producer_epoch)
        if code == E.NONE:
            txn = self.txns[req.transactional_id]
            if not txn.open:
                txn.open, txn.txn_epoch = True, txn.epoch
            txn.partitions.add(("__consumer_offsets", 0))
        return AddOffsetsToTxnResponse(error_code=code)

    def _TxnOffsetCommit(self, req: TxnOffsetCommitRequest, version: int) -> TxnOffsetCommitResponse:
        code = self._fenced(req.transactional_id, req.producer_id, req.producer_epoch)
        txn = self.txns[req.transactional_id]
        for t in req.topics:
            for p in t.partitions:
                if code == E.NONE:
                    txn.offsets[(req.group_id, t.name, p.partition_index)] = p.committed_offset
        return TxnOffsetCommitResponse(topics=[TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions]) for t in req.topics])

    def _OffsetFetch(self, req: OffsetFetchRequest, version: int) -> OffsetFetchResponse:
        assert req.require_stable and req.topics is None
        pending = any(g == req.group_id for txn in self.txns.values() for g, _, _ in txn.offsets)
        if pending:
            return OffsetFetchResponse(error_code=E.UNSTABLE_OFFSET_COMMIT)
        topics: dict[str, list[OffsetFetchResponsePartition]] = {}
        for (group, topic, partition), offset in self.offsets.items():
            if group == req.group_id:
                topics.setdefault(topic, []).append(OffsetFetchResponsePartition(partition_index=partition,
                                                                                 committed_offset=offset))
        return OffsetFetchResponse(topics=[OffsetFetchResponseTopic(name=t, partitions=p) for t, p in topics.items()])


class FakeConnection:
    def __init__(self, broker: FakeBroker, address: str) -> None:
        self.broker = broker
        self.address = address
        self.closed = False
        self.versions = {cls.API_KEY: (0, cls.MAX_VERSION) for cls in (
            FindCoordinatorRequest, MetadataRequest, ProduceRequest, AddPartitionsToTxnRequest, EndTxnRequest,
            AddOffsetsToTxnRequest, TxnOffsetCommitRequest, OffsetFetchRequest, DescribeConfigsRequest)}
        self.versions[InitProducerIdRequest.API_KEY] = (0, broker.max_init_version)

    def version(self, message_cls: Any, *, minimum: int = 0, cap: int | None = None) -> int:
        from pybroker.clients.wire import Connection

        return Connection.version(self, message_cls, minimum=minimum, cap=cap)  # type: ignore[arg-type]

    def supports(self, message_cls: Any, version: int) -> bool:
        lo, hi = self.versions.get(message_cls.API_KEY, (0, -1))
        return lo <= version <= hi

    def request(self, message: Any, version: int) -> Any:
        return self.broker.handle(message, version)

    def close(self) -> None:
        self.closed = True
