"""What one console search costs: wall time, records examined per request, rounds of "continue" to cover a
topic, and how long the event loop stalls meanwhile.

Why: a search runs in the broker for whoever can reach the console, so each request is capped (bytes,
records, time; `broker/console/search.py`); this shows what the caps mean on this machine. An in-process
broker gets RECORDS records of SIZE bytes in batches of BATCH; then, through the console's own search
function as `User:ANONYMOUS`:

- the newest page (limit 50, no filter), and the oldest page (`from=earliest`);
- a value substring that no record has, newest first from the end, continued until the whole partition
  was examined: requests, seconds per request, which cap stopped each;
- the same going newer from the start.

While the searches run, a ticker on the event loop records its worst lateness (the work is meant to be
off the loop, in `asyncio.to_thread`).

    .venv/bin/python -m bench.console_search [--records 300000] [--size 200] [--batch 500]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pybroker.broker.app import BrokerApp
from pybroker.broker.console import search
from pybroker.broker.console.local_client import LocalClient
from pybroker.config.broker_config import BrokerConfig
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.record import Record, build_batch

TOPIC = "bench-search"


async def _fill(client: LocalClient, records: int, size: int, batch: int) -> None:
    now = int(time.time() * 1000)
    value = b"x" * size
    for start in range(0, records, batch):
        count = min(batch, records - start)
        data = build_batch([Record(i, i, b"key-%d" % (start + i), value) for i in range(count)], base_timestamp=now)
        response = await client.call(ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[TopicProduceData(
            name=TOPIC, partition_data=[PartitionProduceData(index=0, records=bytearray(data))])]))
        assert response.responses[0].partition_responses[0].error_code == 0


class Ticker:
    """The event loop's worst lateness while it runs (a 10 ms sleep that wakes up late)."""

    def __init__(self) -> None:
        self.worst_ms = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            self.worst_ms = max(self.worst_ms, (time.perf_counter() - before - 0.01) * 1000)

    def __enter__(self) -> Ticker:
        self._task = asyncio.ensure_future(self._run())
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._task is not None
        self._task.cancel()


async def _sweep(client: LocalClient, params: dict[str, str], edge: str) -> tuple[int, list[float], dict[str, int]]:
    """Continue one search until it ends: (requests, seconds of each, how often each cap stopped it)."""
    times: list[float] = []
    caps: dict[str, int] = {}
    page = None
    while page is None or not page["at_end"]:
        query = dict(params) if page is None else {**params, "direction": page["direction"], "cursor": page[edge]}
        started = time.perf_counter()
        page = await search.search(client, query)
        times.append(time.perf_counter() - started)
        caps[str(page["stopped"])] = caps.get(str(page["stopped"]), 0) + 1
    return len(times), times, caps


async def main_async(records: int, size: int, batch: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = BrokerConfig.load({"log.dirs": str(Path(tmp) / "data"), "listeners": "PLAINTEXT://127.0.0.1:0",
                                    "console.enable": "false", "num.partitions": "1"})
        app = BrokerApp(config)
        await app.start()
        try:
            client = LocalClient(app.state)
            from pybroker.broker.console import writes

            await writes.create_topic(client, {"name": TOPIC, "partitions": 1})
            started = time.perf_counter()
            await _fill(client, records, size, batch)
            print(f"filled {records:,} records of {size} B in batches of {batch} in {time.perf_counter() - started:.1f} s")
            with Ticker() as ticker:
                for label, params in (("newest page", {"topic": TOPIC}),
                                      ("oldest page", {"topic": TOPIC, "from": "earliest"})):
                    started = time.perf_counter()
                    page = await search.search(client, params)
                    print(f"{label}: {len(page['messages'])} records in {(time.perf_counter() - started) * 1000:.0f} ms")
                for label, params, edge in (
                        ("absent value, older from the end", {"topic": TOPIC, "value": "needle"}, "older"),
                        ("absent value, newer from the start", {"topic": TOPIC, "value": "needle", "from": "earliest"},
                         "newer")):
                    count, times, caps = await _sweep(client, params, edge)
                    print(f"{label}: {count} requests to examine {records:,} records; per request median "
                          f"{statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms; stopped by {caps}")
            print(f"event loop: worst lateness {ticker.worst_ms:.0f} ms during the searches")
        finally:
            await app.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args(argv)
    asyncio.run(main_async(args.records, args.size, args.batch))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
