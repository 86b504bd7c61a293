"""Refusals that must be clear and harmless: oversized messages, bad flags and config values."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaProducer
from kafka.errors import KafkaError, MessageSizeTooLargeError

from tests.integration.conftest import BrokerProcess


def test_message_over_max_bytes_is_refused_and_broker_keeps_serving(
        broker_factory: Callable[..., BrokerProcess], topic_name: str) -> None:
    broker = broker_factory(message_max_bytes="2000")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, max_request_size=10_000_000, acks=1,
                             retries=0, request_timeout_ms=10_000)
    with pytest.raises((MessageSizeTooLargeError, KafkaError)) as info:
        producer.send(topic_name, b"x" * 5000, partition=0).get(timeout=10)
    assert "MessageSizeTooLarge" in type(info.value).__name__ or "too large" in str(info.value).lower()
    assert producer.send(topic_name, b"small", partition=0).get(timeout=10).offset == 0
    producer.close()
    assert broker.alive()


def _cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker.broker.cli", *args], capture_output=True, text=True,
                          timeout=30, cwd=tmp_path)


@pytest.mark.parametrize(("args", "key"), [
    (["--override", "num.partitions=zero"], "num.partitions"),
    (["--override", "log.segment.bytes=-1"], "log.segment.bytes"),
    (["--listeners", "nonsense"], "listeners"),
    (["--override", "novalue"], "--override"),
    (["--no-such-flag"], "--no-such-flag"),
])
def test_bad_flags_and_values_exit_2_with_one_line(tmp_path: Path, args: list[str], key: str) -> None:
    result = _cli("start", "--log-dirs", str(tmp_path / "d"), *args, tmp_path=tmp_path)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0], result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_second_broker_on_the_same_dir_is_refused(broker_factory: Callable[..., BrokerProcess],
                                                  tmp_path: Path) -> None:
    broker = broker_factory()
    result = _cli("start", "--log-dirs", str(broker.log_dir), "--listeners", "PLAINTEXT://127.0.0.1:0",
                  tmp_path=tmp_path)
    assert result.returncode != 0
    assert "in use" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
