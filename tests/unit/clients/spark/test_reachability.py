"""A stopped broker fails a Spark read or write within the documented bound, not after minutes of retries."""

from __future__ import annotations

import socket
import time

import pytest

from pybroker.clients.spark import reachability
from pybroker.clients.spark.offset_reader import OffsetReader
from pybroker.clients.spark.options import parse_read_options
from pybroker.clients.spark.reachability import BrokerUnreachable, host_and_port, require_a_broker


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_addresses_parse_as_kafka_writes_them() -> None:
    assert host_and_port("broker:9093") == ("broker", 9093)
    assert host_and_port("[::1]:9094") == ("::1", 9094)
    assert host_and_port("broker") == ("broker", 9092)


def test_a_listening_server_is_enough() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        started = time.monotonic()
        require_a_broker([f"127.0.0.1:{_closed_port()}", f"127.0.0.1:{server.getsockname()[1]}"], timeout_s=60)
        assert time.monotonic() - started < 30  # at the first answer, not at the timeout (slack for a busy machine)


def test_a_read_against_a_stopped_broker_fails_within_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reachability, "REACH_TIMEOUT_S", 1.5)
    options = parse_read_options({"kafka.bootstrap.servers": f"127.0.0.1:{_closed_port()}", "subscribe": "events"},
                                 streaming=False)
    started = time.monotonic()
    with pytest.raises(BrokerUnreachable, match=r"no broker reachable .* within 2 s"):
        OffsetReader(options).partitions()
    assert time.monotonic() - started < 10  # the patched bound, not the 15 s default (slack for a busy machine)
