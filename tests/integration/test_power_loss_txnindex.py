"""A power cut keeps an acknowledged abort in the `.txnindex` of a segment that had none before.

A segment's `.txnindex` is made with its first entry, which may come long after the segment itself was
made and its name fsynced (here: the first segment of a new topic). Its bytes are synced by the log's
flush with the abort marker; its name is a new directory entry, durable only once the partition dir is
fsynced, and that must happen before the recovery point passes the marker. Otherwise a cut loses the file
while the marker it lists is counted as durable: Kafka's tools reading the dir find no abort, and a
replay that starts from a producer snapshot newer than the marker would never write it again, so
read_committed consumers would be shown the aborted records.

A librdkafka transactional producer aborts a transaction on a fresh topic, then commits one after it:
the committed records are acks=all, so their acknowledgement means the marker before them is fsynced.
The power is cut; what survived must list the abort; after a restart a read_committed consumer sees only
the committed records, and the broker's `.txnindex` still lists the abort.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pybroker.storage.transaction_index import decode_entries
from tests.integration.brokers import BrokerProcess
from tests.integration.clients import close_clients
from tests.integration.test_power_loss import lazy  # noqa: F401 (the lazy mount fixture)
from tests.integration.txn_clients import (
    READ_COMMITTED,
    TXN_OVERRIDES,
    ck_txn_producer,
    create_topic,
    read_values,
)
from tests.powerloss.mount import LazyMount, fuse_unavailable

pytestmark = pytest.mark.skipif(fuse_unavailable() is not None, reason=fuse_unavailable() or "")

ABORTED = 20
COMMITTED = 5
TXN_INDEX = f"{0:020d}.txnindex"


def _aborts(partition_dir: Path) -> list[tuple[int, int]]:
    """(first offset, marker offset) of each abort the partition's first `.txnindex` lists."""
    path = partition_dir / TXN_INDEX
    entries = decode_entries(path.read_bytes()) if path.exists() else []
    return [(entry.first_offset, entry.last_offset) for entry in entries]


def test_a_power_cut_keeps_the_first_abort_of_an_older_segment(
        lazy: LazyMount, broker_factory: Callable[..., BrokerProcess],  # noqa: F811
        new_topic: Callable[..., str]) -> None:
    broker = broker_factory(TXN_OVERRIDES, needs_restart=True, log_dirs=[lazy.mountpoint])
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1)  # its segment 0 and that name are made durable here
    producer = ck_txn_producer(broker.bootstrap, f"{topic}-txn")
    producer.init_transactions(20)
    producer.begin_transaction()
    for i in range(ABORTED):
        producer.produce(topic, value=f"aborted-{i}".encode(), partition=0)
    producer.flush(20)
    producer.abort_transaction(20)
    producer.begin_transaction()  # waits until the abort's markers are written
    for i in range(COMMITTED):
        producer.produce(topic, value=f"committed-{i}".encode(), partition=0)
    producer.commit_transaction(20)  # acks=all records after the marker: the marker is fsynced
    expected = (0, ABORTED)  # the aborted records at 0..ABORTED-1, the marker right after them
    assert _aborts(lazy.mountpoint / f"{topic}-0") == [expected]

    broker.kill9()
    close_clients()
    lazy.cut()
    survived = _aborts(lazy.backing / f"{topic}-0")
    assert survived == [expected], f"the acknowledged abort is not in the durable .txnindex: {survived}"

    lazy.mount()
    broker.start()
    seen = read_values("confluent-kafka", broker.bootstrap, topic, 1, READ_COMMITTED, COMMITTED)
    assert sorted(seen) == sorted(f"committed-{i}".encode() for i in range(COMMITTED)), seen
    assert _aborts(lazy.mountpoint / f"{topic}-0") == [expected]
