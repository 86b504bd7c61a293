"""What idle consumer groups cost the broker: its CPU share and a canary producer's latency, with and without them.

Why: a group's deadlines (sessions, join and sync phases) are the broker's own work that no request
asks for; a coordinator that scans every group on a fixed tick pays for idle groups all the time. The
measurement: first the broker with nothing to do (its own timers only), then the canary alone (acks=all, 100 B, linger 0, CANARY_RATE msgs/s) while the broker's
CPU time is read from /proc; then CONSUMERS librdkafka consumers in GROUPS groups are subscribed to an
empty topic, left to settle into heartbeating, and the same window is measured again. Printed: broker CPU
(% of one core) and the canary's delivery latency p50/p99, both windows side by side.

    .venv/bin/python -m bench.idle_groups [--consumers 100] [--groups 50] [--seconds 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

from bench.load import COMMON, create_topic
from tests.integration.brokers import BrokerProcess, kill_all

CONSUMERS = 100
GROUPS = 50
SECONDS = 20.0
SETTLE_S = 15.0
CANARY_RATE = 200
CANARY_SETTINGS: dict[str, Any] = {"acks": "all", "linger.ms": 0, "enable.idempotence": False}
CONSUMER_SETTINGS: dict[str, Any] = {"enable.auto.commit": False, "auto.offset.reset": "latest",
                                     "session.timeout.ms": 10_000, "heartbeat.interval.ms": 3000,
                                     "fetch.wait.max.ms": 500}


@dataclass
class Window:
    cpu_percent: float = float("nan")
    latencies_ms: list[float] = field(default_factory=list)

    def percentile(self, q: float) -> float:
        if len(self.latencies_ms) < 2:
            return float("nan")
        return statistics.quantiles(self.latencies_ms, n=100, method="inclusive")[int(q * 100) - 1]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _measure(broker: BrokerProcess, topic: str, seconds: float) -> Window:
    """Run the canary for `seconds` and read the broker's CPU time over the same window."""
    window = Window()
    producer = Producer({"bootstrap.servers": broker.bootstrap, **COMMON, **CANARY_SETTINGS})
    producer.produce(topic, b"warm-up")
    producer.flush(10)

    def delivered(sent_ns: int) -> Any:
        def callback(err: Any, _msg: Any) -> None:
            if err is None:
                window.latencies_ms.append((time.perf_counter_ns() - sent_ns) / 1e6)
        return callback

    assert broker.pid is not None
    cpu_before, started = _cpu_seconds(broker.pid), time.perf_counter()
    interval = 1.0 / CANARY_RATE
    for i in range(int(seconds * CANARY_RATE)):
        pause = started + i * interval - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        producer.produce(topic, b"x" * 100, on_delivery=delivered(time.perf_counter_ns()))
        producer.poll(0)
    producer.flush(30)
    elapsed = time.perf_counter() - started
    window.cpu_percent = 100 * (_cpu_seconds(broker.pid) - cpu_before) / elapsed
    return window


def _idle(broker: BrokerProcess, seconds: float) -> Window:
    assert broker.pid is not None
    cpu_before, started = _cpu_seconds(broker.pid), time.perf_counter()
    time.sleep(seconds)
    return Window(cpu_percent=100 * (_cpu_seconds(broker.pid) - cpu_before) / (time.perf_counter() - started))


def run(consumers: int = CONSUMERS, groups: int = GROUPS, seconds: float = SECONDS
        ) -> tuple[Window, Window, Window]:
    with tempfile.TemporaryDirectory(prefix="pybroker-bench-idle-") as tmp:
        broker = BrokerProcess(Path(tmp) / "idle", {"group.initial.rebalance.delay.ms": "0"})
        broker.start()
        members: list[Consumer] = []
        stop = threading.Event()
        try:
            tag = uuid.uuid4().hex[:6]
            canary, idle = f"canary-{tag}", f"idle-{tag}"
            create_topic(broker.bootstrap, canary, 1)
            create_topic(broker.bootstrap, idle, 2)
            print(f"  [pybroker] nothing to do for {seconds:.0f} s ...", flush=True)
            nothing = _idle(broker, seconds)
            print(f"  [pybroker] canary alone for {seconds:.0f} s ...", flush=True)
            alone = _measure(broker, canary, seconds)
            for i in range(consumers):
                consumer = Consumer({"bootstrap.servers": broker.bootstrap, **COMMON, **CONSUMER_SETTINGS,
                                     "group.id": f"idle-{tag}-{i % groups}"})
                consumer.subscribe([idle])
                members.append(consumer)

            def poll_all() -> None:  # keeps every consumer's callbacks served, as an application would
                while not stop.is_set():
                    for consumer in members:
                        consumer.poll(0)
                    time.sleep(0.05)

            poller = threading.Thread(target=poll_all, daemon=True)
            poller.start()
            print(f"  [pybroker] {consumers} consumers in {groups} groups: settling {SETTLE_S:.0f} s ...", flush=True)
            time.sleep(SETTLE_S)
            print(f"  [pybroker] canary beside the idle groups for {seconds:.0f} s ...", flush=True)
            loaded = _measure(broker, canary, seconds)
            stop.set()
            poller.join(5)
        finally:
            stop.set()
            for consumer in members:
                consumer.close()
            broker.stop(expect_code=None)
            broker.close()
    return nothing, alone, loaded


def print_table(nothing: Window, alone: Window, loaded: Window, consumers: int, groups: int) -> None:
    print(f"\n== idle consumer groups: broker CPU and canary acks=all latency ({CANARY_RATE} msgs/s, 100 B) ==")
    print(f"  {'window':<34}{'broker CPU % of a core':>24}{'canary p50 ms':>15}{'p99 ms':>10}")
    for name, w in (("no clients", nothing), ("canary alone", alone), (f"+ {consumers} consumers in {groups} groups", loaded)):
        print(f"  {name:<34}{w.cpu_percent:>24.1f}{w.percentile(0.50):>15.2f}{w.percentile(0.99):>10.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--consumers", type=int, default=CONSUMERS)
    parser.add_argument("--groups", type=int, default=GROUPS)
    parser.add_argument("--seconds", type=float, default=SECONDS)
    args = parser.parse_args(argv)
    try:
        print_table(*run(args.consumers, args.groups, args.seconds), args.consumers, args.groups)
    finally:
        kill_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
