"""A short power-loss check: an acknowledged acks=all record survives a power cut; acks=1 data need not.

The broker's log dir is on the lazy file system of `tests/powerloss/`, which keeps whatever was not
fsynced (file bytes, and directory entries of created, renamed or removed files) only in memory. A power
cut is `kill -9` of the broker followed by `LazyMount.cut()`, which drops all of that; the broker then
starts again on what survived. `kill -9` alone proves nothing about fsync: the page cache keeps every
write. acks=1 data is fsynced by the acks=1 window (`flush.ms`, `storage/flush_window.py`): records older
than the window survive a cut. With the window off nothing fsyncs acks=1 data on its own (as in Kafka,
where replication covers it), so a cut right after such a stream must lose some of it: the proof the
harness bites.

Small segments and indexes make the stream roll segments several times, so new segment files and their
directory entries are part of what must be durable. The longer campaigns of issue 28 are not here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import NewTopic

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, ck_consumer, ck_producer, close_clients
from tests.integration.metrics_broker import MetricsBrokerProcess
from tests.powerloss.mount import LazyMount, fuse_unavailable

pytestmark = pytest.mark.skipif(fuse_unavailable() is not None, reason=fuse_unavailable() or "")

PARTITIONS = 2
RECORDS = 6_000
CUT_AFTER_ACKED = 3_000
VALUE_PAD = b"v" * 150
STREAM_DEADLINE_S = 90.0  # polled: a loaded machine acknowledges slowly, a stuck broker never
READ_S = 15.0
OVERRIDES = {
    "log.segment.bytes": str(64 * 1024),  # several rolls per partition during the stream
    "log.index.size.max.bytes": str(16 * 1024),
}

#: the acks=1 window off (Kafka's flush.ms default): nothing fsyncs acks=1 data until shutdown
WINDOW_OFF = {"log.flush.interval.ms": str(2**63 - 1)}
WINDOW_WAIT_S = 30.0

Acked = dict[tuple[int, int], bytes]  # (partition, offset) -> value


@pytest.fixture
def lazy(tmp_path: Path) -> Iterator[LazyMount]:
    mount = LazyMount(tmp_path / "backing", tmp_path / "mnt").mount()
    try:
        yield mount
    finally:
        mount.unmount()  # after the broker: broker_factory is set up later, so torn down first


def _stream(broker: BrokerProcess, topic: str, config: dict[str, object], cut_after: int | None) -> Acked:
    """Produce RECORDS records; return the acknowledged ones. With `cut_after`, stop once that many are
    acknowledged and leave the rest in flight (the caller cuts the power right then)."""
    producer = ck_producer(broker.bootstrap, **{
        "linger.ms": 5, "batch.num.messages": 200, "retry.backoff.ms": 100, **config})
    acked: Acked = {}
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[(msg.partition(), msg.offset())] = msg.value()  # type: ignore[attr-defined]

    deadline = time.monotonic() + STREAM_DEADLINE_S
    for i in range(RECORDS):
        if cut_after is not None and len(acked) >= cut_after:
            break
        while True:
            try:
                producer.produce(topic, value=f"{i}:".encode() + VALUE_PAD, partition=i % PARTITIONS,
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        assert time.monotonic() < deadline, f"only {len(acked)} records acknowledged in {STREAM_DEADLINE_S}s"
    if cut_after is None:
        assert producer.flush(60) == 0, "records still undelivered"
        assert not errors, errors[:3]
    else:
        while len(acked) < cut_after and time.monotonic() < deadline:
            producer.poll(0.01)
    return dict(acked)  # a copy: deliveries after the cut are not acknowledgements we may count


def _power_cut_and_restart(broker: BrokerProcess, lazy: LazyMount) -> None:
    broker.kill9()
    close_clients()  # the in-flight records are dropped, never acknowledged
    lazy.cut()
    lazy.mount()
    broker.start()


def _read_all(broker: BrokerProcess, topic: str) -> dict[tuple[int, int], bytes]:
    """Everything readable from offset 0 until every partition's end, or what was read within READ_S.

    Not `ck_read`, which fails when a partition's end is not reached: after a cut that lost data, a
    consumer may wait at an offset that is gone, and the test must still say how much was lost.
    """
    have: dict[tuple[int, int], bytes] = {}
    at_end: set[int] = set()
    with ck_consumer(broker.bootstrap, **{"auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([CkTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + READ_S
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.3):
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    at_end.add(message.partition())
                    continue
                at_end.discard(message.partition())
                have[(message.partition(), message.offset())] = message.value()
    return have


def _lost(broker: BrokerProcess, topic: str, acked: Acked) -> list[tuple[int, int]]:
    """The acknowledged (partition, offset)s that do not hold their acknowledged value after the cut."""
    have = _read_all(broker, topic)
    return sorted(key for key, value in acked.items() if have.get(key) != value)


def _create(broker: BrokerProcess, topic: str) -> None:
    admin = ck_admin(broker.bootstrap)  # held in a name: a collected AdminClient cancels its futures
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(10)


def test_power_cut_keeps_every_acknowledged_acks_all_record_at_its_offset(
        lazy: LazyMount, broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str]) -> None:
    broker = broker_factory(OVERRIDES, needs_restart=True, log_dirs=[lazy.mountpoint])
    topic = new_topic()
    _create(broker, topic)
    acked = _stream(broker, topic, {"acks": "all", "enable.idempotence": True}, cut_after=CUT_AFTER_ACKED)
    assert len(acked) >= CUT_AFTER_ACKED
    _power_cut_and_restart(broker, lazy)
    lost = _lost(broker, topic, acked)
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged acks=all records lost, first {lost[:5]}"
    segments = list(lazy.backing.glob(f"{topic}-*/*.log"))
    assert len(segments) > PARTITIONS, "no segment rolled before the cut: new segment files went unchecked"


def test_power_cut_loses_unflushed_acks_1_records_so_the_harness_bites(
        lazy: LazyMount, broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str]) -> None:
    broker = broker_factory({**OVERRIDES, **WINDOW_OFF}, needs_restart=True, log_dirs=[lazy.mountpoint])
    topic = new_topic()
    _create(broker, topic)
    acked = _stream(broker, topic, {"acks": 1, "enable.idempotence": False}, cut_after=None)
    assert len(acked) == RECORDS
    _power_cut_and_restart(broker, lazy)
    lost = _lost(broker, topic, acked)
    assert lost, "a power cut right after an acks=1 stream lost nothing: the harness does not bite"


def _unflushed(broker: MetricsBrokerProcess, topic: str) -> int:
    """The topic's offsets not yet fsynced, from the broker's own gauge (-1 until every partition shows)."""
    status, page = broker.http_get("/metrics")
    assert status == 200, page
    prefix = "pybroker_partition_unflushed_messages{"
    values = [float(line.rsplit(" ", 1)[1]) for line in page.splitlines()
              if line.startswith(prefix) and f'topic="{topic}"' in line]
    return int(sum(values)) if len(values) == PARTITIONS else -1


def test_power_cut_keeps_acks_1_records_older_than_the_window(lazy: LazyMount, tmp_path: Path,
                                                                 new_topic: Callable[..., str]) -> None:
    """The acks=1 window at its default: once the broker says nothing of the topic is unflushed (it
    is fsynced by the window, never by a shutdown or an acks=all write), a cut loses none of it."""
    broker = MetricsBrokerProcess(tmp_path / "windowed", OVERRIDES, log_dirs=[lazy.mountpoint])
    try:
        broker.start()
        topic = new_topic()
        _create(broker, topic)
        acked = _stream(broker, topic, {"acks": 1, "enable.idempotence": False}, cut_after=None)
        assert len(acked) == RECORDS
        deadline = time.monotonic() + WINDOW_WAIT_S
        while (unflushed := _unflushed(broker, topic)) != 0:
            assert time.monotonic() < deadline, f"{unflushed} offsets still unflushed after {WINDOW_WAIT_S}s"
            time.sleep(0.05)
        _power_cut_and_restart(broker, lazy)
        lost = _lost(broker, topic, acked)
        assert not lost, f"{len(lost)} of {len(acked)} acks=1 records older than the window lost, first {lost[:5]}"
    finally:
        close_clients()
        broker.close()
