"""What decompression bombs cost another client: a bystander's ApiVersions latency while bombs arrive.

A real `pybroker start` process gets `--bombs` produce requests (acks=all, one after the other on one
connection), each one batch whose compressed payload (about 1 MB for gzip) inflates far past the
broker's decompression cap (`tests.integration.bombs`), to a compacted topic by default (where Kafka must decompress to check that
every record has a key; pybroker walks every compressed batch whatever the policy). Meanwhile a
bystander on its own connection sends ApiVersions in a loop (`tests.integration.hostile.Canary`).

Printed per round: the bystander's p50 / p99 / max round trip alone for `--idle-seconds` before the
attack (the ceiling: what the loaded machine gives an idle broker) and during the attack, the bombs' throughput, the codes they got, and the load
average (the machine may be shared: compare rounds, report medians).

    .venv/bin/python bench/bombs.py [--codec gzip|snappy|lz4|zstd] [--bombs N] [--rounds N] [--policy compact|delete]
                                    [--first-record zeros|1GiB]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from pybroker.protocol.messages.create_topics import (  # noqa: E402
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from pybroker.protocol.messages.produce import (  # noqa: E402
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from pybroker.protocol.records.codecs import NONE, compress  # noqa: E402
from tests.integration.bombs import PAYLOADS, bomb, flagged_batch  # noqa: E402
from tests.integration.brokers import BrokerProcess, kill_all  # noqa: E402
from tests.integration.hostile import Canary, RawClient  # noqa: E402

#: room for a 1 MB batch, so max.message.bytes never answers first
MAX_MESSAGE_BYTES = 4 << 20


def _create(client: RawClient, topic: str, policy: str) -> None:
    configs = {"cleanup.policy": policy, "max.message.bytes": str(MAX_MESSAGE_BYTES)}
    answer = client.call(CreateTopicsRequest(timeout_ms=10_000, topics=[CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1,
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])]), 5)
    assert answer is not None and answer.topics[0].error_code == 0, answer


def _figures(latencies: list[float]) -> tuple[float, float, float]:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1000, p99 * 1000, ordered[-1] * 1000


def one_round(broker: BrokerProcess, batch: bytes, topic: str, policy: str, bombs: int,
              idle_seconds: float) -> dict[str, object]:
    with RawClient(broker.host, broker.port, timeout=120) as client:
        _create(client, topic, policy)
        with Canary(broker.host, broker.port) as idle:  # the ceiling: the same bystander, no bombs
            time.sleep(idle_seconds)
        with Canary(broker.host, broker.port) as canary:
            started = time.monotonic()
            codes = []
            for _ in range(bombs):
                answer = client.call(ProduceRequest(acks=-1, timeout_ms=30_000, topic_data=[TopicProduceData(
                    name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])]), 9)
                assert answer is not None, "the broker closed the producing connection"
                codes.append(answer.responses[0].partition_responses[0].error_code)
            took = time.monotonic() - started
    return {"idle": _figures(idle.latencies), "attack": _figures(canary.latencies), "trips": len(canary.latencies),
            "failures": canary.failures, "seconds": took, "codes": sorted(set(codes)),
            "load": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--codec", choices=[*sorted(PAYLOADS), "none"], default="gzip",
                        help="none: the control, 1 MB of uncompressed zeros refused on the loop (what any 1 MB "
                             "produce costs the bystander, decompression aside)")
    parser.add_argument("--bombs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--policy", choices=["compact", "delete"], default="compact")
    parser.add_argument("--first-record", choices=["zeros", "1GiB"], default="zeros",
                        help="zeros: refused for its first record; 1GiB: a first record that claims 1 GiB, so only "
                             "the cap refuses the bomb (inflated whole in the worker process)")
    parser.add_argument("--idle-seconds", type=float, default=5.0, help="the bystander alone first, for the ceiling")
    args = parser.parse_args(argv)
    batch = flagged_batch(bytes(1 << 20), NONE) if args.codec == "none" else bomb(args.codec)
    if args.first_record == "1GiB" and args.codec != "none":  # zigzag varint of 1 GiB, then 80 MiB of zeros
        codec_id = PAYLOADS[args.codec][0]
        batch = flagged_batch(compress(codec_id, b"\x80\x80\x80\x80\x08" + bytes(80 << 20)), codec_id)
    print(f"== {args.bombs} {args.codec} bombs (first record: {args.first_record}) of {len(batch) / 1e6:.2f} MB "
          f"each to a {args.policy} topic, {args.rounds} rounds ==", flush=True)
    p99s: list[float] = []
    idle_p99s: list[float] = []
    try:
        with tempfile.TemporaryDirectory(prefix="pybroker-bench-bombs-") as tmp:
            broker = BrokerProcess(Path(tmp))
            broker.start()
            try:
                for i in range(args.rounds):
                    r = one_round(broker, batch, f"bombs-{i}", args.policy, args.bombs, args.idle_seconds)
                    idle, attack = r["idle"], r["attack"]
                    assert isinstance(idle, tuple) and isinstance(attack, tuple)
                    p99s.append(attack[1])
                    idle_p99s.append(idle[1])
                    print(f"  round {i + 1}: bystander idle p50/p99/max {idle[0]:.1f}/{idle[1]:.1f}/{idle[2]:.1f} ms, "
                          f"under bombs {attack[0]:.1f}/{attack[1]:.1f}/{attack[2]:.1f} ms "
                          f"({r['trips']} trips, {r['failures']} failures); "
                          f"{args.bombs / float(r['seconds']):.1f} bombs/s ({float(r['seconds']) * 1000 / args.bombs:.0f} ms each), "  # type: ignore[arg-type]
                          f"codes {r['codes']}; load {r['load']:.2f}", flush=True)
            finally:
                broker.close()
    finally:
        kill_all()
    print(f"  median of the rounds' bystander p99: idle {statistics.median(idle_p99s):.1f} ms, "
          f"under bombs {statistics.median(p99s):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
