"""Fail fast when no broker can be reached at all, instead of after the client's retries.

kafka-python waits `request_timeout_ms` for a bootstrap server before each attempt fails, and the driver retries
a lookup `fetchOffset.numRetries` times: with the broker down, a read used to fail only after about two minutes.
Before the first lookup (and before a task's producer starts) one TCP connection to any bootstrap server is
tried, again and again for at most `REACH_TIMEOUT_S`, so a stopped broker is reported within that bound and a
broker that is just restarting still gets the time to come back. Only reachability is checked here: everything
else (a missing topic, authentication, a slow broker) is the client's and the retries' business, as before.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence

#: how long a job waits for any bootstrap server to accept a connection before it fails (documented in README)
REACH_TIMEOUT_S = 15.0
#: one connection attempt's own limit
CONNECT_TIMEOUT_S = 2.0
RETRY_INTERVAL_S = 0.5


class BrokerUnreachable(RuntimeError):
    """No bootstrap server accepted a TCP connection within the bound."""


def host_and_port(address: str) -> tuple[str, int]:
    """`host:port`, `[v6]:port`, or a bare host (Kafka's default port)."""
    address = address.strip()
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        return host, int(rest.lstrip(":") or 9092)
    host, sep, port = address.rpartition(":")
    return (host, int(port)) if sep else (address, 9092)


def require_a_broker(bootstrap: Sequence[str], timeout_s: float | None = None) -> None:
    """Return once some bootstrap server accepts a connection; raise `BrokerUnreachable` after `timeout_s`."""
    limit = REACH_TIMEOUT_S if timeout_s is None else timeout_s
    deadline = time.monotonic() + limit
    last: Exception | None = None
    while True:
        for address in bootstrap:
            try:
                host, port = host_and_port(address)
                remaining = max(0.1, min(CONNECT_TIMEOUT_S, deadline - time.monotonic()))
                with socket.create_connection((host, port), timeout=remaining):
                    return
            except (OSError, ValueError) as exc:
                last = exc
        if time.monotonic() + RETRY_INTERVAL_S > deadline:
            raise BrokerUnreachable(
                f"no broker reachable at {','.join(bootstrap)} within {limit:.0f} s (last error: {last}); "
                "is the broker running, and is kafka.bootstrap.servers right?")
        time.sleep(RETRY_INTERVAL_S)
