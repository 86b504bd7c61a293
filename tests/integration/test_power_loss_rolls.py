"""A power cut right after segment rolls keeps the idempotent producers' state: duplicates are refused.

A roll writes a producer-state snapshot at the new segment's base offset. The snapshot is not fsynced on
the produce path; it must be durable (its bytes, then its directory entry) before anything relies on it:
before the recovery point passes it (a later start replays only from there) and before the older
snapshots it supersedes are removed. So after a cut, every snapshot at or below the checkpointed recovery
point must read back whole, and a restarted broker must still know the producer's last batches: each of
the last five acknowledged batches, sent again byte for byte, gets its original offset and writes nothing.

The producer is our own wire client, since a stock client never resends an acknowledged batch on purpose:
InitProducerId, then acks=all Produce requests of idempotent batches with growing sequences, as
librdkafka sends them. Cuts come right after a roll was acknowledged, one before the recovery-point
checkpoint is written and one after it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from pybroker.clients.wire import WireClient
from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage.checkpoints import RECOVERY_POINT, read_checkpoint
from pybroker.storage.errors import CorruptSnapshotError
from pybroker.storage.producer_snapshot import SNAPSHOT_SUFFIX, decode_snapshot
from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin
from tests.integration.test_power_loss import lazy  # noqa: F401 (the lazy mount fixture)
from tests.powerloss.mount import LazyMount, fuse_unavailable

pytestmark = pytest.mark.skipif(fuse_unavailable() is not None, reason=fuse_unavailable() or "")

CHECKPOINT_MS = 100
OVERRIDES = {
    "log.segment.bytes": str(16 * 1024),
    "log.flush.offset.checkpoint.interval.ms": str(CHECKPOINT_MS),
}
RECORDS_PER_BATCH = 4
VALUE_BYTES = 300
#: the broker's background tick, which writes the checkpoints when their interval has passed
TICK_S = 1.0
#: wait after the roll before the cut, in seconds: right away, and once a checkpoint passed the roll
CUTS = (0.0, 1.5 * TICK_S, 0.0, 1.5 * TICK_S)
BATCHES_PER_CUT_LIMIT = 200
CACHED_BATCHES = 5  # what the broker remembers per producer, as Kafka does


class Producer:
    """One idempotent producer on partition 0 of a topic: its id, epoch, next sequence, and its batches."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        with WireClient(bootstrap) as client:
            init = client.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000),
                               max_version=4)
        assert init.error_code == 0, init
        self.producer_id, self.epoch = init.producer_id, init.producer_epoch
        self.sequence = 0
        #: (batch bytes, acknowledged base offset), oldest first
        self.acked: list[tuple[bytes, int]] = []

    def next_batch(self) -> bytes:
        records = [Record(i, 0, None, os.urandom(VALUE_BYTES)) for i in range(RECORDS_PER_BATCH)]
        batch = build_batch(records, base_timestamp=int(time.time() * 1000), producer_id=self.producer_id,
                            producer_epoch=self.epoch, base_sequence=self.sequence)
        self.sequence += RECORDS_PER_BATCH
        return batch

    def send(self, client: WireClient, batch: bytes) -> int:
        """Produce one batch with acks=all; its base offset (asserting no error)."""
        answer = client.call(ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
            TopicProduceData(name=self.topic, partition_data=[PartitionProduceData(index=0, records=batch)])]),
            max_version=9).responses[0].partition_responses[0]
        assert answer.error_code == 0, answer
        return int(answer.base_offset)


def _segments(directory: Path) -> int:
    return sum(1 for name in os.listdir(directory) if name.endswith(".log"))


def _produce_until_a_roll(producer: Producer, bootstrap: str, directory: Path) -> None:
    """Produce acknowledged batches until one of them lands in a new segment (a roll), then return."""
    before = _segments(directory)
    with WireClient(bootstrap) as client:
        for _ in range(BATCHES_PER_CUT_LIMIT):
            batch = producer.next_batch()
            producer.acked.append((batch, producer.send(client, batch)))
            if _segments(directory) > before and len(producer.acked) > CACHED_BATCHES:
                return
    raise AssertionError(f"no roll in {BATCHES_PER_CUT_LIMIT} batches")


def _torn_snapshots(partition_dir: Path, recovery_point: int) -> list[str]:
    """The durable snapshots at or below the checkpointed recovery point that do not read back whole."""
    torn = []
    for path in sorted(partition_dir.glob(f"*{SNAPSHOT_SUFFIX}")):
        if int(path.name[: -len(SNAPSHOT_SUFFIX)]) > recovery_point:
            continue  # past what the broker claimed durable: a start removes it
        try:
            decode_snapshot(path.read_bytes())
        except CorruptSnapshotError as exc:
            torn.append(f"{path.name} ({path.stat().st_size} bytes): {exc}")
    return torn


def test_a_power_cut_after_rolls_keeps_the_producer_state(
        lazy: LazyMount, broker_factory: Callable[..., BrokerProcess],  # noqa: F811
        new_topic: Callable[..., str]) -> None:
    broker = broker_factory(OVERRIDES, needs_restart=True, log_dirs=[lazy.mountpoint])
    topic = new_topic()
    admin = ck_admin(broker.bootstrap)  # held in a name: a collected AdminClient cancels its futures
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(10)
    producer = Producer(broker.bootstrap, topic)
    checked = 0
    for wait_s in CUTS:
        _produce_until_a_roll(producer, broker.bootstrap, lazy.mountpoint / f"{topic}-0")
        time.sleep(wait_s)
        broker.kill9()
        lazy.cut()
        recovery_point = read_checkpoint(lazy.backing / RECOVERY_POINT).get((topic, 0), 0)
        checked = max(checked, recovery_point)
        torn = _torn_snapshots(lazy.backing / f"{topic}-0", recovery_point)
        assert not torn, f"snapshots the recovery point {recovery_point} relies on were torn by the cut: {torn}"
        lazy.mount()
        broker.start()  # recovery succeeds: the broker answers again

        with WireClient(broker.bootstrap) as client:
            for batch, offset in producer.acked[-CACHED_BATCHES:]:
                assert producer.send(client, batch) == offset, "a duplicate was not recognised after the cut"
            last_offset = producer.acked[-1][1]
            batch = producer.next_batch()  # the log did not grow: the next batch follows the last one
            offset = producer.send(client, batch)
            assert offset == last_offset + RECORDS_PER_BATCH, (offset, last_offset)
            producer.acked.append((batch, offset))
    assert checked > 0, "no checkpoint was written before any cut: the snapshots went unchecked"
