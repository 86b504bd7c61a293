"""One request of a connection whose answer is not written yet, and an answer held back for a while.

A connection answers in request order (Kafka's rule): each decoded request becomes a `PendingAnswer` in the
connection's queue, holding the response, or the future of one, with what the write and the metrics need
(its api key and version, the latency clock, the quota charge). `answer_after` delays an answer: a failed
authentication's, and a throttled one's.

Event-loop thread only, like the connection that holds them.
"""

from __future__ import annotations

import asyncio
from typing import Any


class PendingAnswer:
    """A request whose response has not been written yet."""

    __slots__ = ("api_key", "charged", "client_id", "close_after", "correlation_id", "request_throttle_ms", "result",
                 "size", "started", "version")

    def __init__(self, api_key: int, version: int, correlation_id: int, result: Any, started: float,
                 client_id: str | None = None, size: int = 0) -> None:
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id
        self.result = result  # a response object, an asyncio.Future of one, or raw bytes
        self.started = started  # perf_counter at decoding, for the latency histogram
        self.client_id = client_id  # for the context of an error logged when the answer fails
        self.close_after = False  # the connection closes once this answer is written (failed authentication)
        self.size = size  # the request's bytes (charged to a producer's quota)
        self.charged = False  # already counted against the client's quota
        self.request_throttle_ms = 0  # the throttle its handler time earned (request_percentage)

    def ready(self) -> bool:
        return not isinstance(self.result, asyncio.Future) or self.result.done()


async def answer_after(delay_s: float, result: Any) -> Any:
    """`result`, `delay_s` seconds from now."""
    await asyncio.sleep(delay_s)
    return result
