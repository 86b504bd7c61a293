"""What fetch sessions (KIP-227) save a consumer of many partitions: request bytes, response bytes and broker
CPU per fetch, full (sessionless) against incremental, in-process (no client, no socket).

A topic of N partitions (1,000 by default) holds one record in each; the consumer is caught up (it fetches
at offset 1 everywhere), which is where a consumer of many partitions spends its time: most of its
fetches find nothing new. The broker's cost of one fetch is timed as the server spends it: decoding the
request frame, the Fetch handler (the session lookup, reading every partition's state), and encoding the
response. A second row has new records on 1% of the partitions for each fetch (the handler returns them,
the incremental answer lists only those partitions).

    .venv/bin/python bench/fetch_sessions.py [--partitions N] [--fetches N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from pybroker.broker.context import RequestContext  # noqa: E402
from pybroker.broker.handlers.fetch import handle_fetch  # noqa: E402
from pybroker.broker.handlers.produce import handle_produce  # noqa: E402
from pybroker.broker.state import BrokerState  # noqa: E402
from pybroker.config.broker_config import BrokerConfig  # noqa: E402
from pybroker.protocol.frame_codec import decode_request, encode_request, encode_response  # noqa: E402
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic  # noqa: E402
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData  # noqa: E402
from pybroker.protocol.records.record import Record, build_batch  # noqa: E402

TOPIC = "sessions-bench"
VERSION = 12


@dataclass
class Row:
    kind: str
    request_bytes: float
    response_bytes: float
    us_per_fetch: float


def _fetch(session_id: int, epoch: int, partitions: list[tuple[int, int]]) -> FetchRequest:
    topics = [FetchTopic(topic=TOPIC, partitions=[FetchPartition(partition=p, fetch_offset=o,
                                                                 partition_max_bytes=1 << 20)
                                                  for p, o in partitions])] if partitions else []
    return FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=50 << 20, session_id=session_id,
                        session_epoch=epoch, topics=topics)


def _produce(state: BrokerState, partitions: list[int]) -> None:
    batch = build_batch([Record(0, 0, b"k", b"v" * 100)], base_timestamp=int(time.time() * 1000))
    request = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[TopicProduceData(name=TOPIC, partition_data=[
        PartitionProduceData(index=p, records=bytearray(batch)) for p in partitions])])
    answer = handle_produce(_ctx(state), request)
    assert all(p.error_code == 0 for t in answer.responses for p in t.partition_responses), answer


def _ctx(state: BrokerState, api_key: int = 0) -> RequestContext:
    return RequestContext(state=state, api_key=api_key, api_version=9 if api_key == 0 else VERSION,
                          correlation_id=1, client_id="bench", peer="127.0.0.1:1")


def _serve(state: BrokerState, frame: bytes) -> tuple[int, Any]:
    """The broker's work for one fetch frame: decode, handle, encode. (response bytes, response)."""
    _, request = decode_request(memoryview(frame)[4:])  # the frame without its size prefix
    response = handle_fetch(_ctx(state, 1), request)
    chunks = encode_response(1, 1, VERSION, response)
    return sum(len(c) for c in chunks), response


def _measure(state: BrokerState, kind: str, frames: list[bytes], between: Any = None) -> Row:
    sizes: list[int] = []
    times: list[float] = []
    for frame in frames:
        if between is not None:
            between()
        start = time.perf_counter()
        size, _ = _serve(state, frame)
        times.append(time.perf_counter() - start)
        sizes.append(size)
    # the median: the machine may be shared, and a neighbour's burst should not count as our cost
    return Row(kind, sum(map(len, frames)) / len(frames), sum(sizes) / len(sizes), statistics.median(times) * 1e6)


async def _run(partitions: int, fetches: int, workdir: Path) -> list[Row]:
    config = BrokerConfig.load({"log.dirs": str(workdir), "listeners": "PLAINTEXT://127.0.0.1:0",
                                "num.partitions": str(partitions), "max.partitions.per.request": "100000"})
    state = BrokerState(config)
    state.startup()
    state.topics.auto_create_all([TOPIC])
    _produce(state, list(range(partitions)))
    offsets = dict.fromkeys(range(partitions), 1)
    rows: list[Row] = []
    every = [(p, 1) for p in range(partitions)]
    full_frames = [encode_request(_fetch(0, -1, every), VERSION, i) for i in range(fetches)]
    rows.append(_measure(state, "full (sessionless), caught up", full_frames))
    opened = _serve(state, encode_request(_fetch(0, 0, every), VERSION, 0))[1]
    session = opened.session_id
    assert session != 0
    incremental = [encode_request(_fetch(session, epoch, []), VERSION, epoch) for epoch in range(1, fetches + 1)]
    rows.append(_measure(state, "incremental, caught up", incremental))

    # 1% of the partitions get a record before each fetch; the client then moves those positions
    step = max(1, partitions // 100)
    moving = [list(range(i % step, partitions, step)) for i in range(fetches)]
    turn = iter(range(fetches))

    def append() -> None:
        _produce(state, moving[next(turn)])

    full_moving = []
    for i in range(fetches):
        full_moving.append(encode_request(_fetch(0, -1, sorted(offsets.items())), VERSION, i))
        for p in moving[i]:
            offsets[p] += 1
    rows.append(_measure(state, "full (sessionless), 1% new", full_moving, append))
    # a new session at the positions the consumer has now, then incremental fetches naming the partitions
    # whose position moved after the previous answer
    session = _serve(state, encode_request(_fetch(session, 0, sorted(offsets.items())), VERSION, 0))[1].session_id
    turn = iter(range(fetches))
    frames = []
    moved: list[int] = []
    for i in range(fetches):
        frames.append(encode_request(_fetch(session, i + 1, [(p, offsets[p]) for p in moved]), VERSION, i))
        moved = moving[i]
        for p in moved:
            offsets[p] += 1
    rows.append(_measure(state, "incremental, 1% new", frames, append))
    state.cleaner.shutdown() if hasattr(state.cleaner, "shutdown") else None
    state.logs.shutdown()
    return rows


def run(partitions: int = 1000, fetches: int = 200) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="pybroker-sessions-") as tmp:
        rows = asyncio.run(_run(partitions, fetches, Path(tmp)))
    print(f"consumer of {partitions} partitions (one topic), Fetch v{VERSION}, {fetches} fetches each; "
          "broker time = decode + handler + encode, in-process (median)")
    print(f"  {'fetch':32} {'request B':>10} {'response B':>11} {'broker us/fetch':>16}")
    for row in rows:
        print(f"  {row.kind:32} {row.request_bytes:10.0f} {row.response_bytes:11.0f} {row.us_per_fetch:16.0f}")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--fetches", type=int, default=200)
    args = parser.parse_args(argv)
    run(args.partitions, args.fetches)
    return 0


if __name__ == "__main__":
    sys.exit(main())
