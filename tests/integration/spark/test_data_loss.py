"""`failOnDataLoss` after the log start moved past offsets a query asks for (retention or DeleteRecords).

Two real ways to move a partition's log start, each a parameter:
- `delete_records`: kafka-python's `KafkaAdminClient.delete_records`, as an operator or retention would;
- `segments_removed`: the broker is stopped, its oldest segment files are removed, and it starts again;
  on load the log start is the first remaining segment's base offset, which is what retention leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import pytest
from kafka import TopicPartition
from pyspark.sql import SparkSession

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import kp_admin, kp_consumer, kp_producer
from tests.integration.conftest import BrokerFactory
from tests.integration.spark.support import (
    create_topic,
    plain_rows,
    read,
    read_stream,
    run_to_end,
)

RECORDS = 30
SEGMENT_BYTES = "400"  # a handful of one-record batches per segment


def _produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    with kp_producer(bootstrap) as producer:
        for i in range(first, first + count):
            producer.send(topic, key=f"k{i}".encode(), value=f"value-{i:04d}".encode(), partition=0).get(timeout=10)


def _log_start(bootstrap: str, topic: str) -> int:
    with kp_consumer(bootstrap) as consumer:
        return int(consumer.beginning_offsets([TopicPartition(topic, 0)], timeout_ms=10_000)[TopicPartition(topic, 0)])


def _by_delete_records(b: BrokerProcess, topic: str, target: int) -> int:
    with kp_admin(b.bootstrap) as admin:
        admin.delete_records({TopicPartition(topic, 0): target}, timeout_ms=10_000)
    return _log_start(b.bootstrap, topic)


def _by_removing_segments(b: BrokerProcess, topic: str, target: int) -> int:
    """Remove (broker stopped) every segment that ends at or below `target`, as retention would."""
    b.stop()
    partition_dir = Path(b.log_dirs[0]) / f"{topic}-0"
    logs = sorted(partition_dir.glob("*.log"))
    bases = [int(p.stem) for p in logs]
    removable = [base for base, nxt in pairwise(bases) if nxt <= target]
    assert removable, f"segments {bases} are too big for this test; lower segment.bytes"
    for base in removable:
        for path in partition_dir.glob(f"{base:020d}.*"):
            path.unlink()
    b.restart()
    return _log_start(b.bootstrap, topic)


MOVERS: dict[str, Callable[[BrokerProcess, str, int], int]] = {
    "delete_records": _by_delete_records,
    "segments_removed": _by_removing_segments,
}


@pytest.fixture(params=sorted(MOVERS))
def move_log_start(request: pytest.FixtureRequest) -> Callable[[BrokerProcess, str, int], int]:
    return MOVERS[request.param]


def test_batch_read_of_deleted_offsets(spark: SparkSession, broker_factory: BrokerFactory,
                                       new_topic: Callable[..., str],
                                       move_log_start: Callable[[BrokerProcess, str, int], int]) -> None:
    b = broker_factory(needs_restart=True)
    topic = new_topic()
    create_topic(b.bootstrap, topic, 1, **{"segment.bytes": SEGMENT_BYTES})
    _produce(b.bootstrap, topic, 0, RECORDS)
    start = move_log_start(b, topic, 12)
    assert 0 < start <= 12

    from_zero = {"subscribe": topic, "startingOffsets": f'{{"{topic}": {{"0": 0}}}}'}
    with pytest.raises(Exception, match=f"offsets 0 to {start} of {topic}-0 are no longer in the topic"):
        read(spark, b.bootstrap, **from_zero).collect()
    skipped = plain_rows(read(spark, b.bootstrap, failOnDataLoss="false", **from_zero))
    assert [row[4] for row in skipped] == list(range(start, RECORDS))
    assert [row[1] for row in skipped] == [f"value-{i:04d}".encode() for i in range(start, RECORDS)]
    # "earliest" is resolved to the new log start: nothing was lost from that query's point of view
    assert len(read(spark, b.bootstrap, subscribe=topic).collect()) == RECORDS - start


@pytest.mark.parametrize("fail_on_data_loss", [True, False], ids=["fail", "skip"])
def test_a_restarted_stream_whose_next_offsets_were_deleted(
        spark: SparkSession, broker_factory: BrokerFactory, new_topic: Callable[..., str], tmp_path: Path,
        move_log_start: Callable[[BrokerProcess, str, int], int], fail_on_data_loss: bool) -> None:
    b = broker_factory(needs_restart=True)
    topic = new_topic()
    create_topic(b.bootstrap, topic, 1, **{"segment.bytes": SEGMENT_BYTES})
    _produce(b.bootstrap, topic, 0, 10)
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"

    def run() -> None:
        stream = read_stream(spark, b.bootstrap, subscribe=topic, startingOffsets="earliest",
                             failOnDataLoss=str(fail_on_data_loss).lower())
        run_to_end(lambda: stream.writeStream.format("parquet").option("path", str(sink))
                   .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start(), 240)

    run()
    _produce(b.bootstrap, topic, 10, RECORDS - 10)
    start = move_log_start(b, topic, 20)
    assert 10 < start <= 20
    if fail_on_data_loss:
        with pytest.raises(Exception, match=f"offsets 10 to {start} of {topic}-0 are no longer in the topic"):
            run()
        return
    run()
    offsets = sorted(r.offset for r in spark.read.parquet(str(sink)).select("offset").collect())
    assert offsets == list(range(10)) + list(range(start, RECORDS))
