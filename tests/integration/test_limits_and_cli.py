"""Refusals that must be clear and harmless: oversized messages, bad flags and config values, a log dir
already in use. Each refusal names the problem, and a running broker keeps serving after it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from kafka.errors import MessageSizeTooLargeError

from tests.integration.brokers import REPO_ROOT, BrokerProcess, api_versions_ok, free_port
from tests.integration.clients import ck_flush, ck_producer, kp_producer, kp_read

MAX_BYTES = 2000


@pytest.fixture
def small_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory({"message.max.bytes": str(MAX_BYTES)})


def test_kafka_python_gets_message_size_too_large_and_broker_keeps_serving(
        small_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    with kp_producer(small_broker.bootstrap, acks=1, retries=0) as producer:
        assert producer.send(topic, b"fits" * 100, partition=0).get(timeout=10).offset == 0
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(topic, b"x" * (MAX_BYTES * 3), partition=0).get(timeout=10)
    with kp_producer(small_broker.bootstrap, acks=1) as producer:
        assert producer.send(topic, b"still serving", partition=0).get(timeout=10).offset == 1
    assert [r.value for r in kp_read(small_broker.bootstrap, topic, 1, 2)] == [b"fits" * 100, b"still serving"]
    assert small_broker.is_running()


def test_librdkafka_gets_msg_size_too_large_and_broker_keeps_serving(
        small_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    producer = ck_producer(small_broker.bootstrap, acks="all", **{"enable.idempotence": False, "retries": 0})
    results: list[tuple[int | None, int]] = []

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        results.append((err.code() if err else None, -1 if err else msg.offset()))  # type: ignore[attr-defined]

    producer.produce(topic, value=b"y" * (MAX_BYTES * 3), partition=0, on_delivery=on_delivery)
    ck_flush(producer)
    producer.produce(topic, value=b"small", partition=0, on_delivery=on_delivery)
    ck_flush(producer)
    assert results == [(KafkaError.MSG_SIZE_TOO_LARGE, -1), (None, 0)]
    assert api_versions_ok(small_broker.host, small_broker.port)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker.broker.cli", *args], capture_output=True, text=True,
                          timeout=30, cwd=cwd, env=None, check=False)


@pytest.mark.parametrize(("args", "key"), [
    (["--override", "num.partitions=zero"], "num.partitions"),
    (["--override", "log.segment.bytes=-1"], "log.segment.bytes"),
    (["--listeners", "nonsense"], "listeners"),
    (["--override", "novalue"], "--override"),
    (["--no-such-flag"], "--no-such-flag"),
])
def test_bad_flags_and_values_exit_2_with_one_line(broker_target: str, tmp_path: Path, args: list[str],
                                                   key: str) -> None:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own command line")
    result = _cli("start", "--log-dirs", str(tmp_path / "d"), *args, cwd=REPO_ROOT)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0], result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_second_broker_on_the_same_dir_is_refused(broker_factory: Callable[..., BrokerProcess],
                                                  tmp_path: Path) -> None:
    first = broker_factory(needs_restart=True)
    result = _cli("start", "--log-dirs", str(first.log_dirs[0]),
                  "--listeners", f"PLAINTEXT://127.0.0.1:{free_port()}", cwd=tmp_path)
    assert result.returncode != 0
    assert "in use" in (result.stdout + result.stderr).lower()
    assert "Traceback" not in result.stdout + result.stderr
    assert first.is_running() and api_versions_ok(first.host, first.port)
