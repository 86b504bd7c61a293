"""Exactly once through crashes: a consume-transform-produce loop (`send_offsets_to_transaction`) killed at
random points, the worker with `kill -9` and the broker with `kill -9`, then resumed, writes every input
record to the output exactly once, as a read_committed reader sees it.

The worker is a separate process (`txn_worker.py`), written with confluent-kafka and with kafka-python (each
client has its own transaction manager and its own way of fetching the group's committed offsets after a
restart); the kill points come from a seeded random generator,
so a failure replays the same schedule. After the rounds of killing, the worker runs to the end of the
input (restarted when a crash left it exiting with an error), and the output is checked record by record.
"""

from __future__ import annotations

import contextlib
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.brokers import REPO_ROOT, BrokerProcess
from tests.integration.clients import ck_flush, ck_producer
from tests.integration.txn_clients import TXN_OVERRIDES, create_topic, read_committed_ck

SEED = 1313
PARTITIONS = 3
INPUTS = 4_000  # 200 transactions: more than the kill rounds can get through at the worker's pace
BATCH = 20
ROUNDS = 4  # alternating: kill the worker, kill the broker
KILL_AFTER_S = (0.1, 0.8)  # after the worker's first commit of the round
PROGRESS_TIMEOUT_S = 30.0
FINISH_TIMEOUT_S = 90.0
MAX_RESTARTS = 8


class Worker:
    """One `txn_worker` process, its output in a file of its own (read when the test fails)."""

    def __init__(self, workdir: Path, args: list[str]) -> None:
        self.workdir = workdir
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self) -> None:
        self.runs += 1
        out = open(self.workdir / f"worker-{self.runs}.out", "wb")  # noqa: SIM115 (closed with the process)
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.integration.txn_worker", *self.args],
                                     cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        out.close()

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def wait(self, timeout: float) -> int | None:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def commits(self) -> int:
        path = self.workdir / f"worker-{self.runs}.out"
        return path.read_text(errors="replace").count("committed") if path.exists() else 0

    def wait_for_commit(self, timeout: float = PROGRESS_TIMEOUT_S) -> None:
        """Until this run has committed a transaction (or exited): a kill before that proves little."""
        deadline = time.monotonic() + timeout
        while self.commits() == 0 and time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                return
            time.sleep(0.05)

    def output(self) -> str:
        return "\n".join(f"--- run {n} ---\n" + (self.workdir / f"worker-{n}.out").read_text(errors="replace")[-2000:]
                         for n in range(max(1, self.runs - 2), self.runs + 1))


@contextlib.contextmanager
def worker_process(workdir: Path, args: list[str]) -> Iterator[Worker]:
    worker = Worker(workdir, args)
    try:
        yield worker
    finally:
        worker.kill9()


def _produce_inputs(bootstrap: str, topic: str) -> list[bytes]:
    producer = ck_producer(bootstrap, **{"acks": "all", "enable.idempotence": True, "linger.ms": 5})
    values = [f"in-{i}".encode() for i in range(INPUTS)]
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % PARTITIONS)
    ck_flush(producer)
    return values


@pytest.mark.slow
@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_consume_transform_produce_killed_at_random_points_yields_each_input_once(
        broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str], tmp_path: Path,
        client: str) -> None:
    broker = broker_factory(TXN_OVERRIDES, needs_restart=True)
    source, sink = new_topic("in"), new_topic("out")
    create_topic(broker.bootstrap, source, PARTITIONS)
    create_topic(broker.bootstrap, sink, PARTITIONS)
    inputs = _produce_inputs(broker.bootstrap, source)
    rng = random.Random(SEED)
    args = [client, broker.bootstrap, source, sink, f"group-{source}", f"txn-{source}", str(PARTITIONS), str(BATCH)]
    with worker_process(tmp_path, args) as worker:
        killed_mid_run = 0
        for round_ in range(ROUNDS):
            worker.start()
            worker.wait_for_commit()
            time.sleep(rng.uniform(*KILL_AFTER_S))
            if round_ % 2 == 0:
                killed_mid_run += worker.wait(0) is None
                worker.kill9()
            else:
                killed_mid_run += worker.wait(0) is None
                broker.kill9()
                broker.start()
                worker.wait(rng.uniform(*KILL_AFTER_S))  # it may survive the restart, or exit with an error
                worker.kill9()
        deadline = time.monotonic() + FINISH_TIMEOUT_S
        code: int | None = None
        for _ in range(MAX_RESTARTS):
            worker.start()
            code = worker.wait(max(1.0, deadline - time.monotonic()))
            if code == 0 or time.monotonic() >= deadline:
                break
        assert code == 0, f"the worker never finished (last exit {code})\n{worker.output()}"
        assert killed_mid_run == ROUNDS, "a round's kill came after the worker had finished: more input needed"

    outputs = read_committed_ck(broker.bootstrap, sink, PARTITIONS, expected=INPUTS, timeout=30)
    counts = Counter(outputs)
    duplicated = {v: n for v, n in counts.items() if n > 1}
    missing = {b"out:" + v for v in inputs} - set(counts)
    assert not duplicated, f"{len(duplicated)} outputs written more than once, e.g. {list(duplicated.items())[:3]}"
    assert not missing, f"{len(missing)} inputs never made it out, e.g. {sorted(missing)[:3]}"
    assert len(outputs) == INPUTS
