"""kcat (librdkafka 2.0.2 in Debian) against a real broker: metadata listing, produce, consume.

kcat links an older librdkafka than confluent-kafka does, which is exactly why it is here: old clients
switch features off unless the broker advertises old API minimums (see DESIGN.md, version policy).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable

import pytest

from tests.integration.brokers import BrokerProcess

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (`make test` installs it with apt)")
TIMEOUT_S = 30


def _kcat(*args: str, stdin: str | None = None) -> str:
    assert KCAT is not None
    result = subprocess.run([KCAT, *args, "-X", "socket.timeout.ms=10000"], input=stdin, capture_output=True,
                            text=True, timeout=TIMEOUT_S, check=False)
    assert result.returncode == 0, f"kcat {' '.join(args)} exited {result.returncode}: {result.stderr[-2000:]}"
    return result.stdout


@pytest.mark.parametrize("codec", ["none", "snappy", "zstd"])
def test_list_produce_consume(broker: BrokerProcess, new_topic: Callable[..., str], codec: str) -> None:
    topic = new_topic()
    lines = [f"line {i} " + "x" * (i % 50) for i in range(50)]
    _kcat("-P", "-b", broker.bootstrap, "-t", topic, "-z", codec, stdin="\n".join(lines) + "\n")
    listing = _kcat("-L", "-b", broker.bootstrap)
    assert f'topic "{topic}" with 1 partitions' in listing, listing
    assert "1 brokers:" in listing, listing
    consumed = _kcat("-C", "-b", broker.bootstrap, "-t", topic, "-e", "-o", "beginning", "-q")
    assert consumed.splitlines() == lines


def test_keys_and_offsets_format(broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    _kcat("-P", "-b", broker.bootstrap, "-t", topic, "-K", ":", stdin="a:1\nb:2\na:3\n")
    out = _kcat("-C", "-b", broker.bootstrap, "-t", topic, "-e", "-o", "beginning", "-q",
                "-f", "%p %o %k=%s\n")
    assert out.splitlines() == ["0 0 a=1", "0 1 b=2", "0 2 a=3"]
