"""Compaction with the real process and kafka-python: a topic shrinks to its live keys, each key's
latest value still at its original offset, with a dedupe buffer far too small to map it in one pass,
whether the clean runs in the cleaner's worker process (the default) or on a broker thread, and whether
the broker or the worker is killed mid-clean; a record without a key is refused on a compacted topic."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka.admin import NewTopic
from kafka.errors import InvalidRecordError

from pybroker.storage.checkpoints import read_checkpoint
from tests.integration.brokers import BrokerProcess
from tests.integration.clients import kp_admin, kp_producer, kp_read, kp_wait_for_topic

KEYS = 2000
VERSIONS = 10
SEGMENT_MS = 1500
CLEAN_TIMEOUT_S = 90.0


def _create_compacted(bootstrap: str, topic: str, **configs: str) -> None:
    with kp_admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact", **configs})])
    kp_wait_for_topic(bootstrap, topic)


def _log_bytes(partition_dir: Path) -> int:
    return sum(p.stat().st_size for p in partition_dir.glob("*.log"))


def _workers(broker: BrokerProcess) -> list[int]:
    """The broker's child processes (its cleaner workers), whichever thread started them."""
    assert broker.proc is not None
    found = []
    for path in Path(f"/proc/{broker.proc.pid}/task").glob("*/children"):
        try:
            found += [int(pid) for pid in path.read_text().split()]
        except OSError:  # the thread ended meanwhile
            continue
    return found


def _age_s(pid: int) -> float:
    """Seconds since the process started (0 if it is gone)."""
    try:
        start_ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime_s = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return 0.0
    return uptime_s - start_ticks / os.sysconf("SC_CLK_TCK")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["clean", "clean-on-a-thread", "kill-9-mid-clean", "kill-9-worker-mid-clean",
                                  "stop-mid-clean"])
def test_ten_versions_of_2000_keys_shrink_to_the_live_keys_with_a_4k_dedupe_buffer(
        broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str], mode: str) -> None:
    overrides = {"log.cleaner.dedupe.buffer.size": "4096", "log.cleaner.backoff.ms": "100"}
    kill_mid_clean = mode.startswith(("kill", "stop"))
    if kill_mid_clean:  # slow the cleaner down (the throttle) so the kill lands in the middle of its work
        overrides["log.cleaner.io.max.bytes.per.second"] = "3000000"
    if mode == "kill-9-worker-mid-clean":  # slower still: the kill must land before the clean's last swap
        overrides["log.cleaner.io.max.bytes.per.second"] = "1000000"
    if mode == "clean-on-a-thread":
        overrides["log.cleaner.process.enable"] = "false"
    broker = broker_factory(overrides, needs_restart=mode in ("kill-9-mid-clean", "stop-mid-clean"))
    topic = new_topic("compact")
    _create_compacted(broker.bootstrap, topic, **{"segment.bytes": "65536", "segment.ms": str(SEGMENT_MS),
                                                  "min.cleanable.dirty.ratio": "0.01"})
    latest: dict[bytes, tuple[int, bytes]] = {}
    with kp_producer(broker.bootstrap, linger_ms=5) as producer:
        for version in range(VERSIONS):
            sent = [(b"key-%04d" % k, b"v%d-of-key-%04d" % (version, k)) for k in range(KEYS)]
            futures = [(key, value, producer.send(topic, key=key, value=value, partition=0)) for key, value in sent]
            producer.flush()
            for key, value, future in futures:
                latest[key] = (future.get(timeout=10).offset, value)
        time.sleep(SEGMENT_MS / 1000 + 0.5)  # the next append rolls: everything before it is cleanable
        sentinel = producer.send(topic, key=b"sentinel", value=b"last", partition=0).get(timeout=10).offset
    assert sentinel == KEYS * VERSIONS

    partition_dir = broker.log_dirs[0] / f"{topic}-0"
    checkpoint = broker.log_dirs[0] / "cleaner-offset-checkpoint"
    if kill_mid_clean:
        assert 0 < read_checkpoint(checkpoint).get((topic, 0), 0) < sentinel, "the clean should still be going"
        workers = _workers(broker)
        assert workers, "no cleaner worker process"
        if mode == "kill-9-mid-clean":
            broker.restart(kill=True)
            gone = time.monotonic() + 10
            while any(Path(f"/proc/{pid}").exists() for pid in workers) and time.monotonic() < gone:
                time.sleep(0.05)
            assert not any(Path(f"/proc/{pid}").exists() for pid in workers), "a worker outlived its broker"
        elif mode == "stop-mid-clean":  # a graceful stop stops the worker too, and leaves no half-written output
            broker.stop()
            assert not any(Path(f"/proc/{pid}").exists() for pid in workers), "a worker outlived its broker"
            assert not list(partition_dir.glob("*.cleaned")) and not list(partition_dir.glob("*.swap"))
            broker.restart()  # not running: starts it again on the same dirs and port
        else:  # a clean is many short jobs here (a 4 KB offset map): kill until one dies mid-job
            died = time.monotonic() + 30
            while "cleaner worker died" not in broker.log_tail(10_000) and time.monotonic() < died:
                for pid in _workers(broker):
                    if _age_s(pid) > 1.0:  # started up: a kill while it starts is a worker that cannot start
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                time.sleep(0.1)
    deadline = time.monotonic() + CLEAN_TIMEOUT_S
    while read_checkpoint(checkpoint).get((topic, 0), 0) < sentinel and time.monotonic() < deadline:
        time.sleep(0.2)
    assert read_checkpoint(checkpoint).get((topic, 0)) == sentinel, broker.log_tail()
    assert _log_bytes(partition_dir) < 3 * 65536  # from ~VERSIONS times that

    records = kp_read(broker.bootstrap, topic, 1, expected=KEYS + 1)
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets))
    assert len(records) == KEYS + 1
    seen = {r.key: (r.offset, r.value) for r in records}
    assert seen.pop(b"sentinel") == (sentinel, b"last")
    assert seen == latest  # every key's latest value, at the offset it was written at
    tail = broker.log_tail(10_000)
    assert '"clean failed' not in tail and "clean failed" not in tail
    if mode == "kill-9-worker-mid-clean":
        assert "cleaner worker died; the clean will be retried" in tail


def test_a_keyless_record_on_a_compacted_topic_is_invalid_record(broker: BrokerProcess,
                                                                new_topic: Callable[..., str]) -> None:
    topic = new_topic("keyless")
    _create_compacted(broker.bootstrap, topic)
    with kp_producer(broker.bootstrap, retries=0) as producer:
        with pytest.raises(InvalidRecordError):
            producer.send(topic, value=b"no key", partition=0).get(timeout=10)
        assert producer.send(topic, key=b"k", value=b"keyed", partition=0).get(timeout=10).offset == 0
