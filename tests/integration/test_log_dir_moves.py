"""A partition moved between two log dirs of a real `pybroker start --log-dirs a,b` under produce load,
with stock clients: kafka-python's admin `alter_replica_log_dirs` starts the move, librdkafka keeps
producing (acks=all, idempotent) throughout, DescribeLogDirs shows the future replica while the copy runs
(throttled by `replica.alter.log.dirs.io.max.bytes.per.second`), and afterwards a consumer reads every
acknowledged record exactly once, in order, before and after a restart. `pybroker log-dirs move` moves
it back."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kafka import TopicPartitionReplica
from kafka.admin import NewTopic

from pybroker.broker.cli import cli
from pybroker.clients.admin import cluster as cluster_ops
from pybroker.clients.wire import WireClient
from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_flush, ck_producer, ck_read, kp_admin

TOPIC = "moving"
PRELOAD = 20_000
VALUE_PAD = b"p" * 200

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _where(bootstrap: str) -> list[tuple[str, bool, int]]:
    """(log dir, is future, offset lag) of every replica of the topic's partition 0."""
    with WireClient(bootstrap, 10) as client:
        return sorted((d["log_dir"], p["future"], p["offset_lag"]) for d in cluster_ops.log_dirs(client, [TOPIC])
                      for p in d["partitions"] if p["partition"] == 0)


def _wait_in(bootstrap: str, log_dir: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while _where(bootstrap) != [(str(log_dir), False, 0)]:
        assert time.monotonic() < deadline, f"still {_where(bootstrap)}"
        time.sleep(0.1)


def _values(bootstrap: str, expected: int) -> list[bytes]:
    messages = ck_read(bootstrap, TOPIC, 1, expected=expected)[0]
    assert [m.offset() for m in messages] == list(range(len(messages)))
    return [m.value()[: m.value().index(b"|")] for m in messages]


def test_a_partition_moves_between_log_dirs_under_produce_load_with_nothing_lost(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    proc = BrokerProcess(tmp_path, {"replica.alter.log.dirs.io.max.bytes.per.second": "750000"},
                         log_dirs=[a, b]).start()
    try:
        bootstrap = proc.bootstrap
        with kp_admin(bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 1)])
        producer = ck_producer(bootstrap, **{"acks": "all", "enable.idempotence": True, "linger.ms": 5})
        acked: list[bytes] = []

        def delivered(err: Any, message: Any) -> None:
            if err is None:
                acked.append(message.value()[: message.value().index(b"|")])

        for i in range(PRELOAD):  # about 4.5 MB: six seconds of copying at the throttle,
            # long enough that DescribeLogDirs polled on a loaded machine sees the future replica (3 s was not)
            producer.produce(TOPIC, b"%d|" % i + VALUE_PAD, partition=0, on_delivery=delivered)
            if i % 5000 == 0:
                producer.poll(0)
        ck_flush(producer)
        [(source, _, _)] = _where(bootstrap)
        target = b if Path(source) == a else a

        stop = threading.Event()

        def produce() -> None:
            i = PRELOAD
            while not stop.is_set():
                producer.produce(TOPIC, b"%d|" % i + VALUE_PAD, partition=0, on_delivery=delivered)
                producer.poll(0.002)
                i += 1

        load = threading.Thread(target=produce)
        load.start()
        try:
            with kp_admin(bootstrap) as admin:
                outcome = admin.alter_replica_log_dirs({TopicPartitionReplica(TOPIC, 0, 1): str(target)})
            assert [err.__name__ for err in outcome.values()] == ["NoError"]
            seen_future = False
            deadline = time.monotonic() + 120
            while True:
                where = _where(bootstrap)
                seen_future = seen_future or any(future for _, future, _ in where)
                if where == [(str(target), False, 0)]:
                    break
                assert time.monotonic() < deadline, f"the move did not finish: {where}"
                time.sleep(0.1)
            assert seen_future, "DescribeLogDirs never showed the future replica"
            time.sleep(0.5)  # appends to the moved log
        finally:
            stop.set()
            load.join()
        ck_flush(producer)
        assert len(acked) > PRELOAD
        assert not (Path(source) / f"{TOPIC}-0").exists() and (target / f"{TOPIC}-0").is_dir()
        assert not [p for d in (a, b) for p in d.iterdir() if p.name.endswith(("-future", "-delete"))]
        expected = sorted(acked, key=int)
        assert _values(bootstrap, len(expected)) == expected  # every acked record once, in order

        proc.restart(kill=True)  # crash right after: the moved partition recovers from its new dir
        assert _where(proc.bootstrap) == [(str(target), False, 0)]
        assert _values(proc.bootstrap, len(expected)) == expected

        moved_back = CliRunner().invoke(cli, ["log-dirs", "move", TOPIC, "0", str(source), "--wait", "60", "--json",
                                              "--bootstrap-server", proc.bootstrap])
        assert moved_back.exit_code == 0, moved_back.output
        assert json.loads(moved_back.output)[0]["move"] == "done"
        proc.restart()
        assert _where(proc.bootstrap) == [(source, False, 0)]
        assert _values(proc.bootstrap, len(expected)) == expected
    finally:
        proc.stop(expect_code=None)
        proc.close()
