"""Request latency while a partition moves between log dirs: does the copy thread stall the broker?

One broker process with two log dirs. A topic is filled with about `--mb` MB, then a probe (one
connection: Produce acks=1 of one 100 B record, then a Fetch of it, at `--rate` pairs a second, on the
moving partition itself, or with `--probe-other` on another topic) runs for `--baseline-seconds` idle and again while AlterReplicaLogDirs moves the big partition to
the other dir (unthrottled unless `--throttle` bytes/s), until DescribeLogDirs shows it landed. Reports
p50/p99/max per request type, the move's duration and copy rate.

    .venv/bin/python bench/log_dir_move_latency.py [--mb N] [--rate N] [--throttle BYTES_PER_S]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.cleaner_latency import Client, create, percentile, probe, produce, row  # noqa: E402
from pybroker.protocol.messages.alter_replica_log_dirs import (  # noqa: E402
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirTopic,
)
from pybroker.protocol.messages.describe_log_dirs import DescribableLogDirTopic, DescribeLogDirsRequest  # noqa: E402
from pybroker.protocol.records.record import Record  # noqa: E402
from tests.integration.brokers import BrokerProcess  # noqa: E402

BIG = "big"


def where(client: Client) -> list[tuple[str, bool]]:
    answer = client.call(DescribeLogDirsRequest(topics=[DescribableLogDirTopic(topic=BIG, partitions=[0])]), 4)
    return sorted((r.log_dir, p.is_future_key) for r in answer.results for t in r.topics for p in t.partitions)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--rate", type=int, default=200, help="probe produce+fetch pairs per second")
    parser.add_argument("--baseline-seconds", type=float, default=5.0)
    parser.add_argument("--probe-other", action="store_true", help="probe another topic, not the moving one")
    parser.add_argument("--throttle", type=int, default=None, help="replica.alter.log.dirs.io.max.bytes.per.second")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="move-bench-"))
    dirs = [workdir / "a", workdir / "b"]
    overrides = {} if args.throttle is None else {"replica.alter.log.dirs.io.max.bytes.per.second": str(args.throttle)}
    broker = BrokerProcess(workdir, overrides, log_dirs=dirs)
    try:
        broker.start()
        client, watcher = Client(broker.bootstrap), Client(broker.bootstrap)
        create(client, BIG, **{"segment.bytes": str(64 << 20)})
        create(client, "probe")
        value = b"x" * 100
        for _ in range(args.mb * 10):  # 1,000 records of ~100 B: about 0.1 MB a request
            produce(client, BIG, [Record(i, 0, None, value) for i in range(1000)])
        probed = "probe" if args.probe_other else BIG
        [(source, _)] = where(watcher)
        target = next(str(d) for d in dirs if str(d) != source)
        deadline = time.monotonic() + args.baseline_seconds
        baseline = probe(client, probed, args.rate, lambda: time.monotonic() > deadline)
        answer = watcher.call(AlterReplicaLogDirsRequest(dirs=[AlterReplicaLogDir(path=target, topics=[
            AlterReplicaLogDirTopic(name=BIG, partitions=[0])])]), 2)
        assert answer.results[0].partitions[0].error_code == 0, answer
        started = time.monotonic()
        checked = [started]

        def landed() -> bool:
            if time.monotonic() - checked[0] < 0.2:
                return False
            checked[0] = time.monotonic()
            return where(watcher) == [(target, False)] or time.monotonic() - started > 600

        during = probe(client, probed, args.rate, landed)
        move_s = time.monotonic() - started
        size = sum(p.stat().st_size for p in (Path(target) / f"{BIG}-0").glob("*.log"))
        client.close()
        watcher.close()
        broker.stop()
    finally:
        broker.close()
    print(f"\npybroker log dir move latency bench ({platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f})")
    print(f"  moved {size / 1e6:.1f} MB in {move_s:.1f} s ({size / 1e6 / move_s:.1f} MB/s), throttle "
          f"{args.throttle or 'none'}; probe {args.rate}/s produce (acks=1, 100 B) + fetch on {probed!r}, one "
          "connection\n")
    print(f"  {'request (ms)':<28} {'count':>7} {'p50':>8} {'p99':>8} {'max':>8}")
    for name, (produce_ms, fetch_ms) in (("idle", baseline), ("during the move", during)):
        print(row(f"produce, {name}", produce_ms))
        print(row(f"fetch, {name}", fetch_ms))
    ratio = percentile(during[0], 99) / max(percentile(baseline[0], 99), 1e-9)
    print(f"\n  produce p99 during / idle: {ratio:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
