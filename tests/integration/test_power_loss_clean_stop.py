"""After a clean stop, a power cut loses nothing: everything the broker left behind is already durable.

A clean SIGTERM stop flushes every log, snapshots producer state, trims and syncs indexes and writes the
checkpoints and the clean-shutdown marker. If any of those files, or any directory entry (a new segment,
a snapshot, a removed old snapshot), were left only in the page cache, a power cut soon after the stop
would undo it, and the next start would believe a shutdown was clean whose files are not all there.

The broker runs on the lazy file system of `tests/powerloss/` with: a topic written by an idempotent
acks=all producer (small segments, so it rolls), a topic written by a plain acks=1 producer (a log
without producers), a topic never written at all, and `__consumer_offsets` after one group commit (its
other partitions never written). After the stop the visible tree (every directory, every file's name,
size and bytes) is read through the mount; after the cut it must read back the same.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import NewTopic

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, ck_consumer, ck_flush, ck_producer
from tests.integration.test_power_loss import lazy  # noqa: F401 (the lazy mount fixture)
from tests.powerloss.mount import LazyMount, fuse_unavailable

pytestmark = pytest.mark.skipif(fuse_unavailable() is not None, reason=fuse_unavailable() or "")

PARTITIONS = 3
RECORDS = 1_500
VALUE_BYTES = 200  # random, so compression cannot keep the segments from rolling
OVERRIDES = {
    "log.segment.bytes": str(32 * 1024),  # rolls, so there are roll snapshots and several segments
    "offsets.topic.num.partitions": "5",  # the internal topic, most of it never written, kept small
}
#: differences listed in a failure
SHOWN = 12

Tree = dict[str, bytes | None]  # relative path -> a file's bytes, or None for a directory


def _tree(root: Path) -> Tree:
    """Every directory and file under `root`, as a process sees them now."""
    found: Tree = {}
    for directory, subdirs, files in os.walk(root):
        base = Path(directory)
        for name in subdirs:
            found[str((base / name).relative_to(root))] = None
        for name in files:
            found[str((base / name).relative_to(root))] = (base / name).read_bytes()
    return found


def _differences(before: Tree, after: Tree) -> list[str]:
    lines = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path, b"<absent>"), after.get(path, b"<absent>")
        if path not in after:
            lines.append(f"lost: {path}")
        elif path not in before:
            lines.append(f"came back: {path}")
        elif old != new:
            size_old = "dir" if old is None else len(old)
            size_new = "dir" if new is None else len(new)
            lines.append(f"changed: {path} ({size_old} bytes before the cut, {size_new} after)")
    return lines


def _create(broker: BrokerProcess, *topics: str) -> None:
    admin = ck_admin(broker.bootstrap)  # held in a name: a collected AdminClient cancels its futures
    futures = admin.create_topics([NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in topics])
    for future in futures.values():
        future.result(10)


def _produce(broker: BrokerProcess, topic: str, **config: object) -> None:
    producer = ck_producer(broker.bootstrap, **{"linger.ms": 5, "batch.num.messages": 50, **config})
    for i in range(RECORDS):
        producer.produce(topic, value=os.urandom(VALUE_BYTES), key=str(i).encode(), partition=i % 2)  # partition 2 stays empty
        producer.poll(0)
    ck_flush(producer)


def _commit_group_offset(broker: BrokerProcess, topic: str) -> None:
    with ck_consumer(broker.bootstrap, **{"group.id": f"{topic}-group", "enable.auto.commit": False}) as consumer:
        consumer.commit(offsets=[CkTopicPartition(topic, 0, 7)], asynchronous=False)


def test_a_power_cut_after_a_clean_stop_loses_nothing(
        lazy: LazyMount, broker_factory: Callable[..., BrokerProcess],  # noqa: F811
        new_topic: Callable[..., str]) -> None:
    broker = broker_factory(OVERRIDES, needs_restart=True, log_dirs=[lazy.mountpoint])
    idempotent, plain, idle = new_topic("idempotent"), new_topic("plain"), new_topic("idle")
    _create(broker, idempotent, plain, idle)
    _produce(broker, idempotent, acks="all", **{"enable.idempotence": True})
    _produce(broker, plain, acks=1, **{"enable.idempotence": False})
    _commit_group_offset(broker, plain)
    broker.stop()  # SIGTERM, and insists on exit status 0

    before = _tree(lazy.mountpoint)
    assert any(path.startswith("__consumer_offsets-") for path in before), "no internal topic was made"
    assert len([p for p in before if p.startswith(f"{idempotent}-0/") and p.endswith(".log")]) > 1, sorted(
        (p, len(v or b"")) for p, v in before.items() if p.startswith(idempotent))
    lazy.cut()
    lazy.mount()
    after = _tree(lazy.mountpoint)
    lost = _differences(before, after)
    assert not lost, f"{len(lost)} differences after a cut that followed a clean stop:\n" + "\n".join(lost[:SHOWN])

    broker.start()  # and what survived starts
