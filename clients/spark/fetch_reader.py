"""A Spark task's read: one offset range fetched with pybroker's own codecs, yielded as Arrow batches.

Why not a Kafka client library: a client builds a Python object per record, and for small records
that is most of a task's time. Here a task speaks Fetch itself (`wire`, `cluster`: one blocking
socket to the partition's leader, pybroker.protocol's codecs), and each answer's record set goes
through `record_set.walk` into a `ColumnBuilder` (compiled C) and out as one `pyarrow.RecordBatch`.

Position-driven, as before: a range [start, end) has `end - start` offsets but may hold fewer rows
(compaction holes, transaction markers, aborted transactions), so the loop never counts rows; it
fetches from its *position* (the offset after the last batch it looked at) until that reaches `end`.

Transactions: `kafka.isolation.level=read_committed` (the default, as Spark's source) fetches with
isolation level 1, so the broker answers up to the last stable offset with the aborted transactions,
and `record_set` drops those and every control batch while the position moves past them.

What stops it otherwise:
- the start is below the log start (retention/DeleteRecords removed it): the fetch answers
  OFFSET_OUT_OF_RANGE, and `failOnDataLoss` decides between an error and skipping to the log start;
- the partition ends below `end` (the topic was deleted and created again): the same choice;
- no progress for `kafkaConsumer.pollTimeoutMs` (the leader gone, a fetch answering nothing, retriable
  errors one after another): a TimeoutError naming the partition and offsets;
- a batch that is not well-formed: `CorruptRecords` naming the partition and offset.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pybroker.clients.spark.arrow_records import ColumnBuilder, to_record_batch
from pybroker.clients.spark.cluster import MAX_RESPONSE_BYTES, Cluster, Timeouts, connect
from pybroker.clients.spark.data_loss import report_data_loss
from pybroker.clients.spark.planning import OffsetRange
from pybroker.clients.spark.record_set import walk
from pybroker.clients.wire import (
    BrokerError,
    Connection,
    Sent,
    Unsupported,
    WireError,
)
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    PartitionData,
)
from pybroker.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)

if TYPE_CHECKING:
    import pyarrow as pa

CLIENT_ID = "pybroker-spark-reader"
#: Fetch v13+ names topics by id only; v12 is the last that takes names (every broker since Kafka 2.x has it)
FETCH_VERSION_CAP = 12
READ_COMMITTED = 1
EARLIEST, LATEST = -2, -1
#: a partition's answer may be this big unless `kafka.max.partition.fetch.bytes` says otherwise: big enough
#: that a fetch round trip is small beside the decoding, small enough for a worker's memory
DEFAULT_PARTITION_BYTES = 4 * 1024 * 1024
#: the answer must fit the wire client's cap, with room for the response's own fields
MAX_PARTITION_BYTES = MAX_RESPONSE_BYTES - 1024 * 1024
#: a fetch that finds nothing new waits at most this long at the broker (Kafka's `fetch.max.wait.ms`)
DEFAULT_MAX_WAIT_MS = 200


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """The `kafka.*` consumer settings a range read honours (kafka-python's names, as options.py gives them)."""

    read_committed: bool = True
    max_wait_ms: int = DEFAULT_MAX_WAIT_MS
    min_bytes: int = 1
    partition_max_bytes: int = DEFAULT_PARTITION_BYTES
    check_crcs: bool = True
    request_timeout_s: float = 30.0
    client_id: str = CLIENT_ID

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> FetchSettings:
        partition_bytes = min(int(config.get("max_partition_fetch_bytes", DEFAULT_PARTITION_BYTES)),
                              int(config.get("fetch_max_bytes", MAX_PARTITION_BYTES)), MAX_PARTITION_BYTES)
        return cls(read_committed=config.get("isolation_level", "read_committed") == "read_committed",
                   max_wait_ms=int(config.get("fetch_max_wait_ms", DEFAULT_MAX_WAIT_MS)),
                   min_bytes=int(config.get("fetch_min_bytes", 1)),
                   partition_max_bytes=partition_bytes,
                   check_crcs=bool(config.get("check_crcs", True)),
                   request_timeout_s=int(config.get("request_timeout_ms", 30_000)) / 1000,
                   client_id=str(config.get("client_id", CLIENT_ID)))


@dataclass(frozen=True, slots=True)
class _Pending:
    """A Fetch sent ahead (while the previous answer's rows go to Spark), not yet read."""

    conn: Connection
    sent: Sent
    position: int
    max_bytes: int


class _RangeFetcher:
    """Fetch and ListOffsets for one topic-partition, on the leader's connection, retried as `cluster` retries."""

    def __init__(self, rng: OffsetRange, cluster: Cluster, settings: FetchSettings) -> None:
        self.topic, self.partition = rng.topic, rng.partition
        self.name = f"{rng.topic}-{rng.partition}"
        self.cluster = cluster
        self.settings = settings

    def _leader(self) -> Connection:
        return self.cluster.leader(self.topic, self.partition)

    def send(self, position: int, max_bytes: int) -> _Pending | None:
        """Ask for the records at `position` without waiting for them; None if that could not be done now
        (`fetch` then asks again, with retries)."""
        try:
            conn = self._leader()
            version = conn.version(FetchRequest, minimum=4, cap=FETCH_VERSION_CAP)
            return _Pending(conn, conn.send(self._request(position, max_bytes), version), position, max_bytes)
        except (BrokerError, WireError, Unsupported):
            return None

    def fetch(self, position: int, max_bytes: int, pending: _Pending | None = None) -> PartitionData:
        """The partition's answer (error NONE or OFFSET_OUT_OF_RANGE), from `pending` when it asked for the
        same; other errors retried or raised."""
        if pending is not None and (pending.position, pending.max_bytes) == (position, max_bytes):
            try:
                return self._checked(pending.conn.receive(pending.sent), position)
            except (BrokerError, WireError):  # the retried way below says what is wrong, if it still is
                if not pending.conn.closed:
                    pending.conn.close()  # an answer half read or unread: the connection cannot be reused

        def attempt() -> PartitionData:
            conn = self._leader()
            version = conn.version(FetchRequest, minimum=4, cap=FETCH_VERSION_CAP)
            return self._checked(conn.request(self._request(position, max_bytes), version), position)
        return self.cluster.retry(f"fetching {self.name} at offset {position}", attempt, on_moved=self._moved)

    def discard(self, pending: _Pending | None) -> None:
        """A request whose answer will not be read: its connection is closed (the next one opens anew)."""
        if pending is not None:
            pending.conn.close()

    def _request(self, position: int, max_bytes: int) -> FetchRequest:
        return FetchRequest(
            replica_id=-1, max_wait_ms=self.settings.max_wait_ms, min_bytes=self.settings.min_bytes,
            max_bytes=max_bytes, isolation_level=READ_COMMITTED if self.settings.read_committed else 0,
            session_id=0, session_epoch=-1,
            topics=[FetchTopic(topic=self.topic, partitions=[FetchPartition(
                partition=self.partition, fetch_offset=position, partition_max_bytes=max_bytes)])])

    def _checked(self, answer: Any, position: int) -> PartitionData:
        assert isinstance(answer, FetchResponse)
        if answer.error_code != ErrorCode.NONE:
            raise BrokerError(answer.error_code, f"Fetch of {self.name}")
        data = _the_partition(answer, self.topic, self.partition)
        if data is None:
            raise BrokerError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Fetch of {self.name}",
                              "the answer does not name the partition")
        if data.error_code not in (ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE):
            raise BrokerError(data.error_code, f"Fetch of {self.name} at offset {position}")
        return data

    def offset(self, which: int) -> int:
        """The partition's earliest (-2) or latest (-1, the last stable offset under read_committed) offset."""
        def attempt() -> int:
            conn = self._leader()
            version = conn.version(ListOffsetsRequest, minimum=2)
            answer = conn.request(ListOffsetsRequest(
                replica_id=-1, isolation_level=READ_COMMITTED if self.settings.read_committed else 0,
                topics=[ListOffsetsTopic(name=self.topic, partitions=[ListOffsetsPartition(
                    partition_index=self.partition, timestamp=which)])]), version)
            assert isinstance(answer, ListOffsetsResponse)
            for topic in answer.topics:
                for p in topic.partitions:
                    if topic.name == self.topic and p.partition_index == self.partition:
                        if p.error_code != ErrorCode.NONE:
                            raise BrokerError(p.error_code, f"ListOffsets of {self.name}")
                        return int(p.offset)
            raise BrokerError(ErrorCode.UNKNOWN_SERVER_ERROR, f"ListOffsets of {self.name}",
                              "the answer does not name the partition")
        word = "earliest" if which == EARLIEST else "latest"
        return self.cluster.retry(f"looking up the {word} offset of {self.name}", attempt, on_moved=self._moved)

    def _moved(self) -> None:
        self.cluster.forget(self.topic)


def _the_partition(answer: FetchResponse, topic: str, partition: int) -> PartitionData | None:
    for t in answer.responses:
        if t.topic == topic:
            for p in t.partitions:
                if p.partition_index == partition:
                    return p
    return None


def read_ranges(ranges: Iterable[OffsetRange], bootstrap_servers: tuple[str, ...], config: Mapping[str, Any], *,
                fail_on_data_loss: bool, poll_timeout_ms: int, include_headers: bool) -> Iterator[pa.RecordBatch]:
    """Yield the rows of each range in turn, in offset order, one Arrow batch per Fetch answer that holds
    any; the ranges share the task's connections."""
    settings = FetchSettings.from_config(config)
    cluster = Cluster(bootstrap_servers, Timeouts(request_s=settings.request_timeout_s,
                                                  operation_s=poll_timeout_ms / 1000),
                      functools.partial(connect, client_id=settings.client_id), auto_create=False)
    builder = ColumnBuilder(include_headers)
    try:
        for rng in ranges:
            if rng.size > 0:
                yield from _read_one(rng, _RangeFetcher(rng, cluster, settings), builder, include_headers,
                                     fail_on_data_loss=fail_on_data_loss, poll_timeout_ms=poll_timeout_ms)
    finally:
        cluster.close()


def read_range(rng: OffsetRange, bootstrap_servers: tuple[str, ...], config: Mapping[str, Any], *,
               fail_on_data_loss: bool, poll_timeout_ms: int, include_headers: bool) -> Iterator[pa.RecordBatch]:
    """`read_ranges` of one range."""
    return read_ranges([rng], bootstrap_servers, config, fail_on_data_loss=fail_on_data_loss,
                       poll_timeout_ms=poll_timeout_ms, include_headers=include_headers)


def _read_one(rng: OffsetRange, fetcher: _RangeFetcher, builder: Any, include_headers: bool, *,
              fail_on_data_loss: bool, poll_timeout_ms: int) -> Iterator[pa.RecordBatch]:
    settings = fetcher.settings
    max_bytes = settings.partition_max_bytes
    position = rng.start
    stalled_since = time.monotonic()
    pending: _Pending | None = None
    try:
        while position < rng.end:
            data = fetcher.fetch(position, max_bytes, pending)
            pending = None
            if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                moved_to = _out_of_range(fetcher, position, rng, fail_on_data_loss)
                if moved_to is None:
                    return
                position, stalled_since = moved_to, time.monotonic()
                continue
            records = data.records if data.records is not None else b""
            aborted = [(a.producer_id, a.first_offset) for a in data.aborted_transactions or ()]
            walked = walk(records, builder, name=fetcher.name, position=position, end=rng.end,
                          read_committed=settings.read_committed, aborted=aborted, check_crcs=settings.check_crcs)
            if walked.position > position:
                position, stalled_since = walked.position, time.monotonic()
                if position < rng.end:  # the next answer travels while Spark takes these rows
                    pending = fetcher.send(position, max_bytes)
                if builder.rows:
                    yield to_record_batch(builder.finish(), rng.topic, rng.partition, include_headers)
                continue
            if len(records) and not walked.batches:  # one batch larger than asked for: ask for more
                max_bytes = min(max_bytes * 2, MAX_PARTITION_BYTES)
            elif not len(records):
                latest = data.last_stable_offset if settings.read_committed else data.high_watermark
                if 0 <= latest <= position:
                    report_data_loss(f"{fetcher.name} ends at offset {latest}, but this task must read offsets "
                                     f"{position} to {rng.end}", fail=fail_on_data_loss)
                    return
            if (time.monotonic() - stalled_since) * 1000 > poll_timeout_ms:
                raise TimeoutError(f"reading {fetcher.name}: no progress past offset {position} (of {rng.start} to "
                                   f"{rng.end}) for {poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs)")
    finally:
        fetcher.discard(pending)


def _out_of_range(fetcher: _RangeFetcher, position: int, rng: OffsetRange, fail_on_data_loss: bool) -> int | None:
    """Where to go on after OFFSET_OUT_OF_RANGE (None: nothing more to read), as failOnDataLoss says."""
    earliest = fetcher.offset(EARLIEST)
    latest = fetcher.offset(LATEST)
    if position < earliest:
        report_data_loss(f"offsets {position} to {min(earliest, rng.end)} of {fetcher.name} are no longer in the "
                         f"topic (its log now starts at {earliest})", fail=fail_on_data_loss)
        return earliest if earliest < rng.end else None
    if position > latest:
        report_data_loss(f"{fetcher.name} now ends at offset {latest}, before offset {position} this task must "
                         f"read up to {rng.end}", fail=fail_on_data_loss)
        return None
    raise BrokerError(ErrorCode.OFFSET_OUT_OF_RANGE, f"Fetch of {fetcher.name} at offset {position}",
                      f"the partition holds offsets {earliest} to {latest}")
