"""When a bench target is ready, taken the same way for every target: its first Metadata answer listing a broker.

Why one method: start-to-ready is judged as a ratio between brokers (issue 34: pybroker at most a fifth of
Kafka's), so each must be timed alike. Every target is polled with Metadata every `POLL_S` from its spawn,
and the instant of the first answer that lists a broker is its `ready_at`. Before this, pybroker was first
waited for by `BrokerProcess.start` (ApiVersions, a fresh port check and a poll every 50 ms) and only then
asked for Metadata, which added up to one poll period and two connections to its figure and not to Kafka's.

Threads: the bench's main thread (blocking).
"""

from __future__ import annotations

import time

from tests.integration.brokers import BrokerProcess, BrokerStartError, TansuProcess
from tests.integration.metrics_broker import MetricsBrokerProcess
from tests.kafka_node import metadata_brokers

#: how often a starting target is asked for Metadata
POLL_S = 0.02
#: Metadata versions tried in turn: v12 (Kafka 4 and pybroker), v9 for a target that does not serve it
VERSIONS = (12, 9)


def wait_for_metadata(broker: BrokerProcess) -> float:
    """Poll `broker` (just spawned) with Metadata every `POLL_S` until an answer lists a broker; the
    `time.monotonic()` of that answer. Raises `BrokerStartError` if the process exits or the broker's
    `startup_timeout` passes first."""
    deadline = time.monotonic() + broker.startup_timeout
    while time.monotonic() < deadline:
        if broker.proc is None or broker.proc.poll() is not None:
            code = None if broker.proc is None else broker.proc.returncode
            raise BrokerStartError(f"{broker.name} exited with {code} during startup\n{broker.log_tail()}")
        for version in VERSIONS:
            try:
                if metadata_brokers(broker.port, version) > 0:
                    return time.monotonic()
            except Exception:  # not listening yet, closed mid-answer, or that version not served: go on
                continue
        time.sleep(POLL_S)
    raise BrokerStartError(f"{broker.name} did not answer Metadata on {broker.bootstrap} within "
                           f"{broker.startup_timeout:.0f} s\n{broker.log_tail()}")


class ReadyByMetadata:
    """Mixin for a `BrokerProcess`: its start waits with `wait_for_metadata` and keeps `ready_at`."""

    ready_at: float = 0.0

    def _wait_ready(self) -> None:
        self.ready_at = wait_for_metadata(self)  # type: ignore[arg-type]


class PybrokerTarget(ReadyByMetadata, MetricsBrokerProcess):
    """pybroker as the bench starts it: with its metrics port, ready at its first Metadata answer."""


class TansuTarget(ReadyByMetadata, TansuProcess):
    """Tansu as the bench starts it, ready at its first Metadata answer."""
