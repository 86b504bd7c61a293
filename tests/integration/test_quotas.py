"""Client quotas against a real `pybroker start`: set with `pybroker quotas alter` over the wire, a
producer and a consumer held to their byte rates (Kafka's throttle: throttle_time_ms in the response,
the channel muted), another client-id left alone, the quotas still there after a restart.

The rate is measured in the steady state, SETTLE_S after the first throttle (later if a throttle is
longer): Kafka's rate is measured over at least quota.window.num - 1 windows, so a fresh client first
bursts that many seconds' worth of its quota and is then muted about as long (answers already in flight
arrive meanwhile). The broker runs
with quota.window.num=3 so that burst is short against the seconds measured.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RATE = 300_000  # bytes per second
VALUE = b"x" * 10_000
MEASURE_S = 6.0
#: a shorter measuring window than Kafka's default 11 x 1 s, so the first burst (num - 1 windows' worth of
#: quota) and the saw-tooth of a throttled fetch (empty answers record nothing, so a burst ages out
#: of the window all at once) are short against the seconds measured
WINDOWS = {"quota.window.num": "3", "quota.window.size.seconds": "1"}
#: seconds from the first throttle to the steady state: the first burst has left the window
SETTLE_S = 3.0


def _within_quota(rate: float) -> bool:
    """Kafka's quota holds over its sliding windows, not over any stretch of time: in a stretch of
    MEASURE_S seconds a client may also spend the quota it saved while it was muted, up to the whole
    measured span of quota.window.num windows (a sample that expires drops all its bytes at once), so the
    honest upper bound is RATE x (MEASURE_S + 3) / MEASURE_S; below, the rate must be within 20% of RATE."""
    saved_s = int(WINDOWS["quota.window.num"]) * int(WINDOWS["quota.window.size.seconds"])
    return 0.8 * RATE <= rate <= RATE * (MEASURE_S + saved_s) / MEASURE_S


def _steady_from(first_throttle_at: float, throttles: list[int]) -> float:
    """When the steady state starts: SETTLE_S after the first throttle, or a second after the longest
    throttle seen so far ends, whichever is later. On a loaded machine the first burst can be large (the
    client's whole queue goes out before the first answer), and Kafka's rule then mutes the client for
    several seconds: measuring inside that mute would find nothing acknowledged at all."""
    return first_throttle_at + max(SETTLE_S, max(throttles, default=0) / 1000 + 1.0)


def _pybroker(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "pybroker.broker.cli", *args, "--bootstrap-server", bootstrap],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done


def _produce_flat_out(bootstrap: str, topic: str, client_id: str, seconds: float) -> tuple[float, list[int]]:
    """Send as fast as possible; (bytes acknowledged per second over `seconds` once the first throttle has
    passed, throttles seen); with `seconds` 0, just a few seconds unmeasured."""
    throttles: list[int] = []
    acked: list[tuple[float, int]] = []
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                         "throttle_cb": lambda e: throttles.append(int(e.throttle_time * 1000)),
                         # a small queue and small batches: each burst after a mute is a fraction of a second's
                         # quota, so throttles stay short against the seconds measured (a 2 MB queue on a loaded
                         # machine gave 8 s mutes, and a measured stretch held one whole burst or none)
                         "queue.buffering.max.kbytes": 256, "batch.size": 65_536})

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))

    start = time.monotonic()
    deadline = start + (60 if seconds else 3)
    first_throttle_at: float | None = None
    measure_from: float | None = None
    while time.monotonic() < deadline:
        now = time.monotonic()
        if first_throttle_at is None and throttles and seconds:
            first_throttle_at = now
        if first_throttle_at is not None and (measure_from is None or now < measure_from):
            measure_from = _steady_from(first_throttle_at, throttles)  # a longer throttle moves it on
        if measure_from is not None and now - measure_from > seconds:
            break
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    end = time.monotonic()
    producer.purge()
    producer.flush(5)
    if measure_from is None:
        return sum(n for _, n in acked) / max(end - acked[0][0], 1e-3) if acked else 0.0, throttles
    return sum(n for t, n in acked if t >= measure_from) / (end - measure_from), throttles


def test_producer_byte_rate_throttles_one_client_id_only(broker_factory: Any) -> None:
    broker = broker_factory(WINDOWS)
    topic = f"quota-{uuid.uuid4().hex[:8]}"
    _pybroker(broker.bootstrap, "topics", "create", topic, "--partitions", "1")
    _pybroker(broker.bootstrap, "quotas", "alter", "--entity-type", "clients", "--entity-name", "slow-producer",
              "--add-config", f"producer_byte_rate={RATE}")
    rate, throttles = _produce_flat_out(broker.bootstrap, topic, "slow-producer", MEASURE_S)
    print(f"producer_byte_rate={RATE}: measured {rate:.0f} B/s, max throttle {max(throttles, default=0)} ms")
    assert throttles and max(throttles) > 0
    assert _within_quota(rate), rate
    free_rate, free_throttles = _produce_flat_out(broker.bootstrap, topic, "free-producer", 0)
    assert not free_throttles and free_rate > 2 * RATE

    broker.restart()
    shown = _pybroker(broker.bootstrap, "quotas", "describe", "--json").stdout
    assert "slow-producer" in shown and str(RATE) in shown


def test_consumer_byte_rate_throttles_fetch(broker_factory: Any) -> None:
    broker = broker_factory(WINDOWS)
    topic = f"quota-{uuid.uuid4().hex[:8]}"
    _pybroker(broker.bootstrap, "topics", "create", topic, "--partitions", "1")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.num.messages": 5})
    for _ in range(1000):  # 10 MB: more than the first burst plus the measured seconds
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(30)
    _pybroker(broker.bootstrap, "quotas", "alter", "--entity-type", "clients", "--entity-name", "slow-consumer",
              "--add-config", f"consumer_byte_rate={RATE}")
    throttles: list[int] = []
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "slow-consumer",
                         "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
                         "fetch.message.max.bytes": 65_536,  # fine-grained answers: the rate is not lumpy
                         "throttle_cb": lambda e: throttles.append(int(e.throttle_time * 1000))})
    consumer.subscribe([topic])
    got: list[tuple[float, int]] = []
    deadline = time.monotonic() + 60
    first_throttle_at: float | None = None
    measure_from: float | None = None
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            now = time.monotonic()
            if msg is not None and msg.error() is None:
                got.append((now, len(msg.value() or b"")))
            if first_throttle_at is None and throttles:
                first_throttle_at = now
            if first_throttle_at is not None and (measure_from is None or now < measure_from):
                measure_from = _steady_from(first_throttle_at, throttles)
            if measure_from is not None and now - measure_from > MEASURE_S:
                break
        end = time.monotonic()
    finally:
        consumer.close()
    assert measure_from is not None and max(throttles) > 0
    rate = sum(n for t, n in got if t >= measure_from) / (end - measure_from)
    print(f"consumer_byte_rate={RATE}: measured {rate:.0f} B/s, max throttle {max(throttles)} ms")
    assert _within_quota(rate), rate
