"""The exactly-once sink: each task's rows in one prepared transaction, the driver commits them all.

The protocol (Kafka's two-phase-commit participation, KIP-939):

1. Every write task takes a transactional id derived from the job (a random id per batch `write`; the
   streaming query's id), the batch id (0 for a batch `write`; the micro-batch id) and the Spark partition
   id: `<prefix>.<job>.<batch>.<partition>`. Never the attempt number: a retried attempt takes the same
   id, and its InitProducerId (v6, `enable_2pc`) fences the earlier attempt and aborts whatever it left
   open. A zombie attempt that is still running fails with PRODUCER_FENCED.
2. The task sends its rows in that transaction, flushes, and leaves the transaction open ("prepared": no
   EndTxn; with `enable_2pc` the coordinator never times it out), then returns a commit message carrying
   (transactional id, producer id, epoch).
3. The driver's `commit` for the job / micro-batch completes each task's transaction: InitProducerId v6
   with `keep_prepared_txn` answers the open transaction's producer id and epoch, which must be the ones
   in the message (else another attempt replaced it: the commit fails loudly instead of committing rows
   nobody reported), then EndTxn(commit). `abort` aborts them all (InitProducerId without
   `keep_prepared_txn`). A task that fails aborts its own transaction on the way out; one that dies
   without a word is aborted by its retry, or (batch `write`) by the driver's abort, which knows every
   task's id. Readers with `read_committed` (the default of the `pybroker` source) see each row once.

Streaming re-runs. Spark writes a micro-batch's commit log entry after the sink's `commit` returns. If the
driver dies between the two, the restarted query runs the batch again, with the same batch id: its
transactions would be new ones and the rows would land twice. So every streaming task also records
"batch B of partition P is committed" in Kafka, atomically with its rows: in the same transaction, a
TxnOffsetCommit to a group the sink owns (`<prefix>.<query id>.<partition>`), offset = the batch id,
at a partition the task wrote to (group offsets must name an existing partition). A task first fences its
id (which aborts a leftover prepared transaction, so nothing is pending), then reads that group's offsets
with `require_stable`: if they already say batch B or later, the rows are in, and the task writes nothing.
Why per task and not one "last batch" per query: each task has its own transaction, and only a record
inside a transaction is atomic with that transaction's rows; a per-query record written by the driver
before or after the commits could be out of step with them after a crash. One group per query and
partition is the price (they hold one offset each and expire with Kafka's offset retention).
This relies on a re-run giving each Spark partition the same rows, which holds when the query's plan is
deterministic (the same offsets in, the same partitioning: Spark's round-robin `repartition` sorts first
for this reason); a non-deterministic plan would need the rows themselves deduplicated.

What stays at-least-once: a driver commit that fails half-way in a batch `write` (the committed tasks'
rows stay; Spark's job is failed). A streaming query recovers exactly-once from the same failure, by the
markers above.

Pure Python (no Spark): the data source passes the task's partition, attempt and ids in.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pybroker.clients.spark.cluster import GROUP, Cluster, Timeouts
from pybroker.clients.spark.offsets import OptionError
from pybroker.clients.spark.options import WriteOptions
from pybroker.clients.spark.record_writer import Columns, row_record
from pybroker.clients.spark.txn_producer import (
    TWO_PHASE_COMMIT_VERSION,
    BrokerError,
    NotPrepared,
    ProducerIdentity,
    TransactionalProducer,
    abort_open,
    complete_prepared,
)
from pybroker.clients.wire import Unsupported, WireError
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest
from pybroker.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from pybroker.protocol.records.codecs import CODEC_NAMES

LOG = logging.getLogger("pybroker.spark")

#: the broker setting that allows two-phase commit (KIP-939), and DescribeConfigs' resource type of a broker
TWO_PHASE_COMMIT_KEY = "transaction.two.phase.commit.enable"
BROKER_RESOURCE = 4
#: OffsetFetch v7 has require_stable and still one group per request
OFFSET_FETCH_VERSION = 7
#: how long a failing task may spend aborting its own transaction before it gives up (its retry will)
ABORT_ON_FAILURE_S = 10.0
_CODECS = {name: codec for codec, name in CODEC_NAMES.items()}


class InjectedFailure(RuntimeError):
    """The test hook `exactlyOnce.failOnceAfterWrite`: a task dying after its rows are sent."""


@dataclass(frozen=True, slots=True)
class PreparedTask:
    """What a task tells the driver: its rows' transaction, or that it had none to prepare."""

    partition: int
    records: int
    transactional_id: str | None = None
    producer_id: int = -1
    epoch: int = -1
    #: a streaming re-run found this batch already committed for this partition
    already_committed: bool = False


def new_job_id() -> str:
    return uuid.uuid4().hex


def transactional_id(prefix: str, job: str, batch: int, partition: int) -> str:
    return f"{prefix}.{job}.{batch}.{partition}"


def marker_group(prefix: str, job: str, partition: int) -> str:
    return f"{prefix}.{job}.{partition}"


def timeouts_for(options: WriteOptions) -> Timeouts:
    config = options.producer_config
    return Timeouts(request_s=config.get("request_timeout_ms", 30_000) / 1000,
                    operation_s=config.get("delivery_timeout_ms", 120_000) / 1000,
                    backoff_s=config.get("retry_backoff_ms", 50) / 1000)


# -- the driver: may this write be exactly-once? ----------------------------------------------------
def decide(options: WriteOptions) -> bool:
    """`exactlyOnce` true/false as given; unset: on when the brokers serve two-phase commit.

    That is InitProducerId v6 (KIP-939) advertised, and `transaction.two.phase.commit.enable` true on every
    broker (Kafka's default is false, and the coordinator then refuses `enable_2pc`), read with
    DescribeConfigs. When it cannot be read, an unset `exactlyOnce` stays at-least-once and `true` tries.
    """
    if options.exactly_once is False:
        return False
    acks = options.producer_config.get("acks", "all")
    if acks != "all":
        if options.exactly_once:
            raise OptionError(f"exactlyOnce needs kafka.acks=all, not {acks}")
        LOG.info("pybroker sink: kafka.acks=%s, so the write is at-least-once", acks)
        return False
    timeouts = timeouts_for(options)  # planning waits one request timeout for the broker, not a delivery timeout
    cluster = Cluster(options.bootstrap_servers, Timeouts(timeouts.request_s, timeouts.request_s, timeouts.backoff_s))
    try:
        conn = cluster.retry("ApiVersions", cluster.any)
        address = conn.address
        advertised = conn.supports(InitProducerIdRequest, TWO_PHASE_COMMIT_VERSION)
        enabled = _two_phase_commit_enabled(cluster) if advertised else False
    except (WireError, TimeoutError) as exc:
        raise RuntimeError(f"cannot reach {','.join(options.bootstrap_servers)} to plan the write: {exc}") from exc
    finally:
        cluster.close()
    if not advertised:
        why = f"the broker at {address} does not serve InitProducerId v{TWO_PHASE_COMMIT_VERSION} (KIP-939)"
    elif enabled is False:
        why = f"the broker at {address} has {TWO_PHASE_COMMIT_KEY}=false"
    elif enabled is None and not options.exactly_once:
        why = f"{TWO_PHASE_COMMIT_KEY} could not be read from the broker at {address}"
    else:
        return True
    if options.exactly_once:
        raise OptionError(f"exactlyOnce=true, but {why}: the sink needs two-phase commit; set exactlyOnce=false "
                          "for an at-least-once write")
    # A WARNING, not INFO: the README calls the sink exactly-once, and a broker started with defaults (`make run`)
    # has two-phase commit off, so a user who never reads INFO lines must still learn what they got and the fix.
    LOG.warning("pybroker sink: %s, so the write is at-least-once, not exactly-once. For exactly-once, set "
                "%s=true on every broker (in server.properties, or `pybroker start --override %s=true`); "
                "set exactlyOnce=true to fail instead of falling back", why, TWO_PHASE_COMMIT_KEY,
                TWO_PHASE_COMMIT_KEY)
    return False


def _two_phase_commit_enabled(cluster: Cluster) -> bool | None:
    """Every broker's `transaction.two.phase.commit.enable`, or None when some broker does not say."""
    cluster.refresh(())
    values: list[bool] = []
    for node_id in cluster.node_ids():
        try:
            conn = cluster.node(node_id)
            answer = conn.request(DescribeConfigsRequest(resources=[DescribeConfigsResource(
                resource_type=BROKER_RESOURCE, resource_name=str(node_id),
                configuration_keys=[TWO_PHASE_COMMIT_KEY])]), conn.version(DescribeConfigsRequest, minimum=1))
        except (BrokerError, Unsupported):
            return None
        assert isinstance(answer, DescribeConfigsResponse)
        found = [c.value for r in answer.results if r.error_code == ErrorCode.NONE
                 for c in r.configs if c.name == TWO_PHASE_COMMIT_KEY]
        if len(found) != 1:
            return None
        values.append((found[0] or "").strip().lower() == "true")
    return all(values) if values else None


# -- a task --------------------------------------------------------------------------------------------
def write_task(rows: Iterable[Any], options: WriteOptions, columns: Columns, *, job: str, batch: int,
               partition: int, attempt: int, streaming: bool) -> PreparedTask:
    """Send the task's rows in its own transaction and leave it prepared for the driver."""
    tid = transactional_id(options.transactional_id_prefix, job, batch, partition)
    cluster = Cluster(options.bootstrap_servers, timeouts_for(options))
    config = options.producer_config
    producer = TransactionalProducer(
        cluster, tid, compression=_CODECS.get(config.get("compression_type") or "none", 0),
        batch_bytes=config.get("batch_size", 16_384), max_request_bytes=config.get("max_request_size", 1_048_576))
    try:
        identity = producer.init(enable_2pc=True)
        group = marker_group(options.transactional_id_prefix, job, partition)
        if streaming:
            last = last_committed_batch(cluster, group)
            if last is not None and last >= batch:
                LOG.info("pybroker sink: batch %d of partition %d was already committed (batch %d is); "
                         "not writing it again", batch, partition, last)
                return PreparedTask(partition, 0, already_committed=True)
        first: tuple[str, int] | None = None
        for row in rows:
            topic, explicit, key, value, headers = row_record(row, options, columns)
            if explicit is not None:
                count = cluster.retry(f"partitions of {topic}", functools.partial(cluster.partitions, topic))
                if not 0 <= explicit < count:
                    raise RuntimeError(f"could not send a record to {topic}-{explicit}: the topic has {count} "
                                       "partitions")
            tp = producer.send(topic, explicit, key, value, headers)
            first = first or tp
        producer.flush()
        if first is None:
            return PreparedTask(partition, 0)
        if streaming:
            producer.commit_offsets(group, {first: (batch, f"pybroker-spark-sink batch {batch}")})
        if options.fail_once_after_write == partition and attempt == 0:
            raise InjectedFailure(f"exactlyOnce.failOnceAfterWrite: attempt 0 of partition {partition} fails "
                                  f"after writing {producer.records_sent} records in {tid!r}")
        return PreparedTask(partition, producer.records_sent, tid, identity.producer_id, identity.epoch)
    except InjectedFailure:
        raise  # as a crash would: nothing cleaned up, the retry must fence it
    except BaseException:
        _abort_quietly(options, tid)
        raise
    finally:
        cluster.close()


def _abort_quietly(options: WriteOptions, tid: str) -> None:
    cluster = Cluster(options.bootstrap_servers, Timeouts(request_s=ABORT_ON_FAILURE_S,
                                                          operation_s=ABORT_ON_FAILURE_S))
    try:
        abort_open(cluster, tid)
    except Exception as exc:  # the task is failing anyway; its retry or the driver aborts it
        LOG.warning("pybroker sink: could not abort transaction %r of a failed task: %s", tid, exc)
    finally:
        cluster.close()


def last_committed_batch(cluster: Cluster, group: str) -> int | None:
    """The highest batch id committed in the marker `group`, or None when it has none."""
    what = f"OffsetFetch(group {group!r})"

    def attempt() -> int | None:
        conn = cluster.coordinator(GROUP, group)
        version = conn.version(OffsetFetchRequest, minimum=OFFSET_FETCH_VERSION, cap=OFFSET_FETCH_VERSION)
        answer = conn.request(OffsetFetchRequest(group_id=group, topics=None, require_stable=True), version)
        assert isinstance(answer, OffsetFetchResponse)
        if answer.error_code != ErrorCode.NONE:
            raise BrokerError(answer.error_code, what)
        found = []
        for topic in answer.topics:
            for p in topic.partitions:
                if p.error_code != ErrorCode.NONE:
                    raise BrokerError(p.error_code, f"{what} for {topic.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    found.append(p.committed_offset)
        return max(found, default=None)

    return cluster.retry(what, attempt, on_moved=lambda: cluster.forget_coordinator(GROUP, group))


# -- the driver: commit or abort -------------------------------------------------------------------
def commit_all(options: WriteOptions, tasks: Sequence[PreparedTask], what: str) -> int:
    """Commit every task's prepared transaction; raise naming the ones that could not be. Returns records."""
    cluster = Cluster(options.bootstrap_servers, timeouts_for(options))
    failures: list[str] = []
    committed = 0
    try:
        for task in sorted(tasks, key=lambda t: t.partition):
            if task.transactional_id is None:
                continue
            try:
                complete_prepared(cluster, task.transactional_id, ProducerIdentity(task.producer_id, task.epoch),
                                  commit=True)
                committed += task.records
            except (BrokerError, NotPrepared, TimeoutError, WireError, Unsupported) as exc:
                failures.append(f"partition {task.partition}: {exc}")
    finally:
        cluster.close()
    if failures:
        raise RuntimeError(f"pybroker sink: {what}: {len(failures)} task transaction(s) could not be committed "
                           f"({committed} records were): " + "; ".join(failures))
    return committed


def abort_all(options: WriteOptions, transactional_ids: Iterable[str], what: str) -> None:
    """Abort whatever each id has open; failures are logged (the ids stay fenced-out by their next use)."""
    cluster = Cluster(options.bootstrap_servers, timeouts_for(options))
    started = time.monotonic()
    try:
        for tid in transactional_ids:
            try:
                abort_open(cluster, tid)
            except (BrokerError, TimeoutError, WireError, Unsupported) as exc:
                LOG.warning("pybroker sink: %s: could not abort transaction %r: %s", what, tid, exc)
    finally:
        cluster.close()
    LOG.info("pybroker sink: %s: aborted in %.1f s", what, time.monotonic() - started)

