"""Per-request instruments: how many, how long, which errors — the only metrics on the hot path.

Children of each labelled family are looked up once per (api, version) or (api, error) and kept in
dicts keyed by ints, so a request costs a dict lookup and an `inc`/`observe`, never label formatting.
The families live in prometheus-client's default registry, beside the process and platform collectors
and any other module's families (the cleaner's), so one `/metrics` page shows them all.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import Counter, Histogram

from pybroker.broker.metrics.names import api_name, error_name
from pybroker.broker.metrics.response_errors import error_codes

#: seconds; from sub-millisecond metadata answers to long polls and fsync waits
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

REQUESTS = Counter("pybroker_requests", "Requests received, by API and version.", ["api", "version"])
REQUEST_DURATION = Histogram("pybroker_request_duration_seconds",
                             "Time from a request's decoding to its response being written, by API.",
                             ["api"], buckets=LATENCY_BUCKETS)
REQUEST_ERRORS = Counter("pybroker_request_errors",
                         "Error codes in responses (every topic and partition counts), and refused requests, "
                         "by API and error name.", ["api", "error"])
FLUSH_DURATION = Histogram("pybroker_log_flush_duration_seconds",
                           "Time one partition log's fsync took (group commit and the flush policy).",
                           buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5))


class RequestMetrics:
    """The hot-path face of the request families, with children cached per label tuple."""

    __slots__ = ("_counts", "_durations", "_errors")

    def __init__(self) -> None:
        self._counts: dict[tuple[int, int], Any] = {}
        self._durations: dict[int, Any] = {}
        self._errors: dict[tuple[int, int | str], Any] = {}

    def received(self, api_key: int, version: int) -> float:
        """Count a decoded request; returns its start time for `answered`."""
        child = self._counts.get((api_key, version))
        if child is None:
            child = self._counts[(api_key, version)] = REQUESTS.labels(api_name(api_key), str(version))
        child.inc()
        return time.perf_counter()

    def answered(self, api_key: int, started: float, response: Any) -> None:
        """Observe the latency and count the error codes of a response about to be written."""
        child = self._durations.get(api_key)
        if child is None:
            child = self._durations[api_key] = REQUEST_DURATION.labels(api_name(api_key))
        child.observe(time.perf_counter() - started)
        if response is not None and not isinstance(response, bytes | bytearray):
            for code in error_codes(response):
                self.error(api_key, code)

    def error(self, api_key: int, error: int | str) -> None:
        """Count one error: a Kafka error code, or a reason the connection was closed."""
        child = self._errors.get((api_key, error))
        if child is None:
            label = error_name(error) if isinstance(error, int) else error
            child = self._errors[(api_key, error)] = REQUEST_ERRORS.labels(api_name(api_key), label)
        child.inc()


#: the broker's one instance; connections share it (all on the event loop's thread)
REQUEST_METRICS = RequestMetrics()
