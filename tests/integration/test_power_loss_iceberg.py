"""A power cut under an Iceberg topic: after it, the table holds each committed record exactly once.

The broker's log dir, and so the Iceberg catalog (SQLite) and warehouse (Parquet, manifests, metadata)
under it, are on the lazy file system (`tests/powerloss/`): the cut drops whatever was written but not
made durable, as a power cut does. Records stream in (acks=all) while the worker commits a snapshot every
200 ms; the broker is killed with SIGKILL (its worker dies with it) in the middle, the power is cut, the
file system mounted again with what survived, and the broker started again. The worker resumes from the
offsets of the table's newest surviving snapshot; once the table has caught up with the log, pyiceberg
must find each (partition, offset) a read_committed consumer reads, once: no row lost, none twice, and
the table still readable (no snapshot whose files the cut took).

`CUTS` rounds in `make test`; `PYBROKER_ICEBERG_CUTS` sets more for a soak run.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest
from pyiceberg.exceptions import NoSuchTableError

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_producer, close_clients
from tests.integration.iceberg_tables import broker_catalog, coordinates, wait_rows
from tests.integration.test_iceberg import log_coordinates, make_topic
from tests.integration.test_power_loss import lazy  # noqa: F401 (the lazy mount fixture)
from tests.powerloss.mount import LazyMount, fuse_unavailable

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(fuse_unavailable() is not None, reason=fuse_unavailable() or "")]

PARTITIONS = 2
CUTS = int(os.environ.get("PYBROKER_ICEBERG_CUTS", "2"))
CATCH_UP_S = 120.0


def _stream(bootstrap: str, topic: str, stop: threading.Event, acked: list[tuple[int, int]]) -> None:
    """Produce until `stop`; the (partition, offset) of each acknowledged record goes to `acked`."""
    producer = ck_producer(bootstrap, acks="all", **{"linger.ms": 5, "message.timeout.ms": 5000})

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    i = 0
    while not stop.is_set():
        try:
            producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % PARTITIONS,
                             on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
            continue
        i += 1
        if i % 50 == 0:
            producer.poll(0.01)
    producer.flush(2)


def _status(broker: BrokerProcess) -> str:
    """The broker's log lines about its Iceberg worker and tables, for a failure's message."""
    lines = [line for line in broker.log_path.read_text(errors="replace").splitlines() if "pybroker.iceberg" in line]
    return "\n".join(lines[-10:])


def _caught_up(broker: BrokerProcess, topic: str) -> list[tuple[int, int]]:
    """The table's rows once they cover every record a read_committed consumer reads now (polled)."""
    expected = set(log_coordinates(broker.bootstrap, topic, PARTITIONS))
    catalog = broker_catalog(broker.log_dirs[0])
    deadline = time.monotonic() + CATCH_UP_S
    rows: list[tuple[int, int]] = []
    while time.monotonic() < deadline:
        try:
            table = catalog.load_table(("pybroker", topic))
        except NoSuchTableError:  # the worker makes it again at its first round (if the cut took it)
            time.sleep(0.3)
            continue
        rows = coordinates(table)
        if expected <= set(rows):
            return rows
        time.sleep(0.3)
    missing = sorted(expected - set(rows))
    raise AssertionError(f"the table lacks {len(missing)} committed records after {CATCH_UP_S:.0f} s: {missing[:10]}; "
                         f"the broker's Iceberg log lines:\n{_status(broker)}")


def test_after_power_cuts_the_table_holds_each_committed_record_once(
        lazy: LazyMount, broker_factory: Callable[..., BrokerProcess],  # noqa: F811
        new_topic: Callable[..., str]) -> None:
    broker = broker_factory({"iceberg.commit.interval.ms": "200"}, needs_restart=True, log_dirs=[lazy.mountpoint])
    topic = new_topic("pc")
    make_topic(broker.bootstrap, topic, PARTITIONS)
    acked: list[tuple[int, int]] = []
    for cut in range(CUTS):
        stop = threading.Event()
        streamer = threading.Thread(target=_stream, args=(broker.bootstrap, topic, stop, acked), daemon=True)
        streamer.start()
        seen = wait_rows(broker_catalog(broker.log_dirs[0]), ("pybroker", topic), len(acked) + 1)
        committed = seen.current_snapshot().snapshot_id  # a reader saw it: it must survive the cut
        time.sleep(0.5 + cut * 0.37)  # more load before the cut: commits happen every 200 ms meanwhile
        broker.kill9()
        stop.set()
        streamer.join(30)
        close_clients()
        lazy.cut()
        lazy.mount()
        broker.start()
        rows = _caught_up(broker, topic)
        table = broker_catalog(broker.log_dirs[0]).load_table(("pybroker", topic))
        assert table.snapshot_by_id(committed) is not None, (
            f"cut {cut}: the snapshot a reader saw before the cut is gone (the table was made again)")
        twice = [c for c, n in Counter(rows).items() if n > 1]
        assert not twice, f"cut {cut}: rows written twice: {twice[:10]}"
        lost = sorted(set(acked) - set(rows))
        assert not lost, f"cut {cut}: acknowledged records not in the table: {lost[:10]}"
    assert len(acked) > 0
