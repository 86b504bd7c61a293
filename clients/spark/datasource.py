"""`PyBrokerDataSource`: the `pybroker` format for `spark.read`, `readStream`, `write` and `writeStream`.

The classes here only connect Spark's Python Data Source API to the modules that do the work:
`options` (checking), `offset_reader` (the driver's offset lookups), `planning` (offset ranges, rate
limits), `fetch_reader` + `record_set` + `arrow_records` (a task's read, as Arrow batches),
`record_writer` (a task's at-least-once write) and `exactly_once` (a task's transactional write, the
driver's commit and abort).

Spark pickles readers and writers to its Python workers, and calls `read`/`write` there; so these
objects hold only parsed options and open their own clients where they run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType
from pyspark.taskcontext import TaskContext

from pybroker.clients.spark import FORMAT, exactly_once
from pybroker.clients.spark.data_loss import LOG
from pybroker.clients.spark.exactly_once import PreparedTask
from pybroker.clients.spark.fetch_reader import read_ranges
from pybroker.clients.spark.offset_reader import OffsetReader
from pybroker.clients.spark.offsets import Offsets, OptionError, from_json_dict, to_json_dict
from pybroker.clients.spark.options import ReadOptions, WriteOptions, parse_read_options, parse_write_options
from pybroker.clients.spark.planning import (
    BacklogShares,
    OffsetRange,
    batch_ranges,
    capped_end,
    pack_ranges,
    split_ranges,
    stream_ranges,
)
from pybroker.clients.spark.record_writer import Columns, check_columns, write_rows
from pybroker.clients.spark.schema import read_schema

#: `PYBROKER_SPARK_READER=kafka-python` in the Spark workers' environment reads with the previous,
#: kafka-python reader (the benchmark's "before"); unset, tasks read with `fetch_reader` (compiled decoding)
READER_ENV = "PYBROKER_SPARK_READER"
KAFKA_PYTHON_READER = "kafka-python"
#: the task properties Spark's micro-batch execution sets (StreamExecution / MicroBatchExecution)
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


class RangePartition(InputPartition):
    """One Spark task: offset ranges of topic-partitions, read one after the other (see `pack_ranges`)."""

    def __init__(self, ranges: tuple[OffsetRange, ...]) -> None:
        super().__init__(ranges)
        self.ranges = ranges


def _tasks(ranges: list[OffsetRange], parallelism: int | None, options: ReadOptions) -> list[InputPartition]:
    tasks = None if parallelism is None else max(parallelism, options.min_partitions or 0)
    return [RangePartition(group) for group in pack_ranges(ranges, tasks)]


def _read(partition: InputPartition, options: ReadOptions) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, RangePartition):  # Spark's placeholder when a read has no ranges at all
        return
    if os.environ.get(READER_ENV) == KAFKA_PYTHON_READER:
        for rng in partition.ranges:
            yield from _read_with_kafka_python(rng, options)
        return
    yield from read_ranges(partition.ranges, options.bootstrap_servers, options.consumer_config,
                           fail_on_data_loss=options.fail_on_data_loss, poll_timeout_ms=options.poll_timeout_ms,
                           include_headers=options.include_headers)


def _read_with_kafka_python(rng: OffsetRange, options: ReadOptions) -> Iterator[pa.RecordBatch]:
    """The previous reader (kafka-python, a ConsumerRecord per record), kept for comparison: the benchmark
    measures it beside the compiled path, and a test checks both give the same rows."""
    from pybroker.clients.spark.range_reader import read_range as read_with_client
    from pybroker.clients.spark.schema import to_record_batch

    for records in read_with_client(rng, options.bootstrap_servers, options.consumer_config,
                                    fail_on_data_loss=options.fail_on_data_loss,
                                    poll_timeout_ms=options.poll_timeout_ms):
        yield to_record_batch(records, options.include_headers)


class PyBrokerBatchReader(DataSourceReader):
    """`spark.read`: offsets resolved once on the driver, then one task per (split) range."""

    def __init__(self, options: ReadOptions, parallelism: int | None = None) -> None:
        self.options = options
        self.parallelism = parallelism

    def partitions(self) -> Sequence[InputPartition]:
        offsets = OffsetReader(self.options)
        try:
            tps = offsets.partitions()
            start = offsets.resolve(self.options.starting, tps, starting=True)
            end = offsets.resolve(self.options.ending, tps, starting=False)
        finally:
            offsets.close()
        return _tasks(split_ranges(batch_ranges(start, end), self.options.min_partitions), self.parallelism,
                      self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.options)


class PyBrokerStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream`: offsets are `{"topic": {"partition": offset}}`, the next offset to read.

    Lives in one driver-side Python process for the whole query, so it keeps a client open between
    micro-batches, and the `maxOffsetsPerTrigger` fairness state (`BacklogShares`).
    """

    def __init__(self, options: ReadOptions, parallelism: int | None = None) -> None:
        self.options = options
        self.parallelism = parallelism
        self.offsets = OffsetReader(options)
        self.shares = BacklogShares()
        #: with Trigger.AvailableNow: the latest offsets when the query started; no batch goes past them
        self.available_now: Offsets | None = None
        self.last_latest: Offsets | None = None

    def initialOffset(self) -> dict[str, Any]:
        tps = self.offsets.partitions()
        return to_json_dict(self.offsets.resolve(self.options.starting, tps, starting=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = self.offsets.latest(self.offsets.partitions())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = from_json_dict(start)
        if self.available_now is not None:
            latest = dict(self.available_now)
        else:
            latest = self.offsets.latest(self.offsets.partitions())
        self.last_latest = latest
        new = [tp for tp in latest if tp not in begin]
        begin = {**begin, **self.offsets.earliest(new)}  # new partitions start at their earliest offset
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return to_json_dict(capped_end({tp: begin[tp] for tp in latest}, latest, max_rows, self.shares))

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self.last_latest is None else to_json_dict(self.last_latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = from_json_dict(start), from_json_dict(end)
        earliest_of_new = self.offsets.earliest(tp for tp in stop if tp not in begin)
        ranges = stream_ranges(begin, stop, earliest_of_new, fail_on_data_loss=self.options.fail_on_data_loss)
        return _tasks(split_ranges(ranges, self.options.min_partitions), self.parallelism, self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.options)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the offsets are Spark's checkpoint, never committed to the broker."""

    def stop(self) -> None:
        self.offsets.close()


@dataclass(frozen=True)
class WriteSummary(WriterCommitMessage):
    """What one at-least-once write task sent (only for the driver's log line)."""

    records: int


@dataclass(frozen=True)
class PreparedWrite(WriterCommitMessage):
    """What one exactly-once write task prepared: its transaction, for the driver to commit or abort."""

    task: PreparedTask


def _task_context() -> TaskContext:
    context = TaskContext.get()
    if context is None:
        raise RuntimeError("the pybroker sink's write runs in a Spark task, and found no TaskContext")
    return context


def _prepared(messages: list[WriterCommitMessage | None]) -> list[PreparedTask]:
    return [m.task for m in messages if isinstance(m, PreparedWrite)]


class PyBrokerWriter(DataSourceWriter):
    """`df.write`: exactly-once when the broker serves two-phase commit (see `exactly_once`), else at-least-once.

    Built on the driver, pickled to every task and back: `job` is the same everywhere, so every attempt of
    partition p takes the transactional id `<prefix>.<job>.0.<p>`.
    """

    def __init__(self, options: WriteOptions, columns: Columns) -> None:
        self.options = options
        self.columns = columns
        self.exactly_once = exactly_once.decide(options)
        self.job = exactly_once.new_job_id()

    def write(self, iterator: Iterator[Any]) -> WriteSummary | PreparedWrite:
        if not self.exactly_once:
            return WriteSummary(write_rows(iterator, self.options, self.columns))
        context = _task_context()
        return PreparedWrite(exactly_once.write_task(
            iterator, self.options, self.columns, job=self.job, batch=0, partition=context.partitionId(),
            attempt=context.attemptNumber(), streaming=False))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.exactly_once:
            sent = exactly_once.commit_all(self.options, _prepared(messages), f"write {self.job}")
            LOG.info("pybroker sink: %d records committed (exactly-once, %d tasks)", sent, len(messages))
            return
        sent = sum(m.records for m in messages if isinstance(m, WriteSummary))
        LOG.info("pybroker sink: %d records written", sent)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.exactly_once:
            # every task's id is known here, so a task that died without a word is aborted too
            ids = {exactly_once.transactional_id(self.options.transactional_id_prefix, self.job, 0, p)
                   for p in range(len(messages))}
            ids.update(t.transactional_id for t in _prepared(messages) if t.transactional_id is not None)
            exactly_once.abort_all(self.options, sorted(ids), f"write {self.job}")
            return
        LOG.warning("pybroker sink: write aborted; records already sent stay in the topic (at-least-once)")


class PyBrokerStreamWriter(DataSourceStreamWriter):
    """`writeStream`: per micro-batch, exactly-once like `PyBrokerWriter` (ids from the query id and batch id)."""

    def __init__(self, options: WriteOptions, columns: Columns) -> None:
        self.options = options
        self.columns = columns
        self.exactly_once = exactly_once.decide(options)

    def write(self, iterator: Iterator[Any]) -> WriteSummary | PreparedWrite:
        if not self.exactly_once:
            return WriteSummary(write_rows(iterator, self.options, self.columns))
        context = _task_context()
        query = context.getLocalProperty(QUERY_ID_PROPERTY)
        batch = context.getLocalProperty(BATCH_ID_PROPERTY)
        if not query or batch is None or not batch.lstrip("-").isdigit():
            raise RuntimeError("the pybroker sink found no streaming query id / batch id in the task's properties "
                               f"({QUERY_ID_PROPERTY}={query!r}, {BATCH_ID_PROPERTY}={batch!r}); set exactlyOnce=false "
                               "to write at-least-once")
        return PreparedWrite(exactly_once.write_task(
            iterator, self.options, self.columns, job=query, batch=int(batch), partition=context.partitionId(),
            attempt=context.attemptNumber(), streaming=True))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.exactly_once:
            prepared = _prepared(messages)
            sent = exactly_once.commit_all(self.options, prepared, f"batch {batchId}")
            again = sum(1 for t in prepared if t.already_committed)
            LOG.info("pybroker sink: batch %d: %d records committed (exactly-once%s)", batchId, sent,
                     f"; {again} tasks had committed it before a restart" if again else "")
            return
        sent = sum(m.records for m in messages if isinstance(m, WriteSummary))
        LOG.info("pybroker sink: batch %d: %d records written", batchId, sent)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.exactly_once:
            ids = sorted({t.transactional_id for t in _prepared(messages) if t.transactional_id is not None})
            exactly_once.abort_all(self.options, ids, f"batch {batchId}")
            return
        LOG.warning("pybroker sink: batch %d aborted; records already sent stay in the topic (at-least-once)",
                    batchId)


def _refuse_overwrite(overwrite: bool) -> None:
    if overwrite:
        raise OptionError("the pybroker sink only appends: a topic cannot be overwritten "
                          "(use mode 'append', or outputMode 'append'/'update' when streaming)")


class PyBrokerDataSource(DataSource):
    """Reads and writes pybroker (or any Kafka-protocol) topics; options and schema are Spark's Kafka ones."""

    #: how many tasks the session runs at once (`for_session` sets it): reads use at most that many tasks
    #: (or minPartitions), packing ranges together; None: one task per range
    default_parallelism: int | None = None

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        include = str(self.options.get("includeHeaders", "false")).strip().lower()
        if include not in ("true", "false"):
            raise OptionError(f"option 'includeHeaders' must be true or false, got {include!r}")
        return read_schema(include == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        return PyBrokerBatchReader(parse_read_options(self.options, streaming=False), self.default_parallelism)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return PyBrokerStreamReader(parse_read_options(self.options, streaming=True), self.default_parallelism)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        _refuse_overwrite(overwrite)
        options = parse_write_options(self.options)
        return PyBrokerWriter(options, check_columns(schema, options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        _refuse_overwrite(overwrite)
        options = parse_write_options(self.options)
        return PyBrokerStreamWriter(options, check_columns(schema, options))


def for_session(default_parallelism: int) -> type[PyBrokerDataSource]:
    """`PyBrokerDataSource` knowing the session's default parallelism (`register` uses it).

    A class made here is not importable by name, so Spark's pickler sends it by value, attribute included,
    to the Python workers that plan reads (they have no SparkContext to ask).
    """
    cls = type("PyBrokerDataSource", (PyBrokerDataSource,), {"default_parallelism": max(1, default_parallelism)})
    cls.__qualname__ = "for_session.<locals>.PyBrokerDataSource"
    return cls
