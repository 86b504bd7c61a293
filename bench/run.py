"""`make bench`: the same librdkafka load on a fresh pybroker and on Tansu, side by side.

Why Tansu: it is a Kafka-compatible broker written in Rust, so the ratio pybroker/tansu says how far a
Python broker is from a compiled one on the same machine and the same client settings. Note the
difference in durability: pybroker fsyncs before it acknowledges acks=all, Tansu here keeps everything
in memory (`memory://`), so Tansu does strictly less work per record.

Phases, per broker: produce N records of 100 B, then N of 1 KiB, then N/10 of 10 KiB (the same payload
bytes as the 1 KiB phase) (msgs/s, MB/s of payload); consume each set back from offset 0, and for
pybroker the share of fetched bytes that left by `os.sendfile` rather than copied (from its
`pybroker_fetch_bytes_total{path}` metric) and the broker process's CPU seconds per GB consumed (less
sensitive to a busy machine than msgs/s); then end-to-end latency (p50/p99) at a fixed moderate rate.
Then, on pybroker alone, its RSS under the big-frame attack (`bench/big_frames.py`: 8 connections each sending 95 MB of a
100 MB request and stalling) beside its idle RSS, with the default settings. Tansu is fetched
once with pip into the git-ignored `bench/.cache/`; if it cannot be had, pybroker runs alone.

First, in-process, what produce-path validation costs per batch and per record at 100 B, 1 KiB and
10 KiB, uncompressed and compressed, with the compiled record walk and the pure-Python one
(`bench/validation.py`); and what fetch sessions (KIP-227) save a consumer of 1,000 partitions: request
and response bytes and broker time per fetch, full against incremental (`bench/fetch_sessions.py`).

Then, on pybroker alone, produce and consume over an SSL listener beside a PLAINTEXT one of the same
broker (`bench/tls.py`, `--skip-tls` to leave it out): what TLS costs, consume most (no sendfile).

Last, on pybroker alone, transactional produce (`bench/txn.py`, `--skip-txn` to leave it out): records/s
at 100 transactions/s and commit latency p50/p99, for 10, 100, 1000 and 3000 records per transaction.

Last of all, on pybroker alone, the Spark connector's batch read of 1M records of 100 B over 8 partitions on
local[2] (`bench/spark_read.py`, `--skip-spark` to leave it out; skipped without Java or pyspark): rows/s
with the previous kafka-python reader and with the compiled one, each beside one direct confluent-kafka
consumer run right after it.

Then, on pybroker alone, acks=all produce of 100 B records over 1, 16, 256 and 1,024 partitions
(`bench/partitions.py`, `--skip-partitions` to leave it out): how much of the single-partition throughput
group commit keeps when every partition is its own log to fsync, beside the client-only ceiling.

    .venv/bin/python bench/run.py [--records N] [--only pybroker|tansu] [--skip-tansu] [--skip-validation]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.big_frames import measure as measure_big_frames  # noqa: E402
from bench.load import (  # noqa: E402
    CONSUMER_SETTINGS,
    LATENCY_PRODUCER_SETTINGS,
    PRODUCER_SETTINGS,
    Latency,
    Throughput,
    consume,
    create_topic,
    group_join,
    latency,
    produce,
)
from tests.integration.brokers import BrokerProcess, TansuProcess, ensure_tansu, kill_all  # noqa: E402
from tests.integration.metrics_broker import MetricsBrokerProcess  # noqa: E402

SIZES = (100, 1024, 10240)
#: above this record size the phase moves the payload bytes of a 1 KiB phase, not N records
SCALED_ABOVE = 1024
STORAGE = {"pybroker": "log segments on disk, fsync before acks=all is answered",
           "tansu": "memory:// (nothing on disk)"}


@dataclass
class BrokerResult:
    name: str
    produce: dict[int, Throughput] = field(default_factory=dict)
    consume: dict[int, Throughput] = field(default_factory=dict)
    latency: Latency | None = None
    group_join_s: float | None = None
    #: pybroker: (bytes sent by sendfile, bytes copied) while consuming each size
    fetch_paths: dict[int, tuple[float, float]] = field(default_factory=dict)
    #: the broker process's CPU seconds (user + system) per consume phase
    consume_cpu_s: dict[int, float] = field(default_factory=dict)
    error: str = ""


def records_for(size: int, records: int) -> int:
    """Records of a phase: N up to 1 KiB, then the same payload bytes as the 1 KiB phase."""
    return records if size <= SCALED_ABOVE else max(1, records * SCALED_ABOVE // size)


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of a process so far (Linux `/proc`); None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fetch_paths(broker: BrokerProcess) -> tuple[float, float] | None:
    """pybroker's `pybroker_fetch_bytes_total` by path (sendfile, copy); None for a broker without it."""
    if not isinstance(broker, MetricsBrokerProcess):
        return None
    _, page = broker.http_get("/metrics")
    values = {"sendfile": 0.0, "copy": 0.0}
    for line in page.splitlines():
        if line.startswith("pybroker_fetch_bytes_total{"):
            path = line.split('path="', 1)[1].split('"', 1)[0]
            values[path] = float(line.rsplit(" ", 1)[1])
    return values["sendfile"], values["copy"]


def run_load(name: str, broker: BrokerProcess, args: argparse.Namespace) -> BrokerResult:
    result = BrokerResult(name)
    tag = uuid.uuid4().hex[:6]
    for size in SIZES:
        topic = f"bench-{size}b-{tag}"
        create_topic(broker.bootstrap, topic, args.partitions)
        produce(broker.bootstrap, topic, args.partitions, 100, size)  # warm-up: connections, metadata, code paths
        records = records_for(size, args.records)
        print(f"  [{name}] produce {records} x {size} B ...", flush=True)
        result.produce[size] = produce(broker.bootstrap, topic, args.partitions, records, size)
        if result.produce[size].note:
            result.error = f"produce {size} B: {result.produce[size].note}; later phases skipped"
            return result
        print(f"  [{name}] consume {records + 100} x {size} B ...", flush=True)
        before = fetch_paths(broker)
        cpu_before = cpu_seconds(broker.pid)
        result.consume[size] = consume(broker.bootstrap, topic, args.partitions, records + 100, size)
        cpu_after = cpu_seconds(broker.pid)
        if cpu_before is not None and cpu_after is not None:
            result.consume_cpu_s[size] = cpu_after - cpu_before
        after = fetch_paths(broker)
        if before is not None and after is not None:
            result.fetch_paths[size] = (after[0] - before[0], after[1] - before[1])
    topic = f"bench-latency-{tag}"
    create_topic(broker.bootstrap, topic, 1)
    print(f"  [{name}] latency at {args.latency_rate} msg/s for {args.latency_seconds:.0f} s ...", flush=True)
    result.latency = latency(broker.bootstrap, topic, args.latency_rate, args.latency_seconds)
    print(f"  [{name}] consumer group: subscribe to first record ...", flush=True)
    result.group_join_s = group_join(broker.bootstrap, topic)
    return result


def bench_one(name: str, args: argparse.Namespace, workdir: Path) -> BrokerResult:
    """Start the broker, run the load, and always stop it; a failure is reported, not raised."""
    broker: BrokerProcess
    if name == "tansu":
        try:
            binary = ensure_tansu()
        except Exception as exc:
            print(f"Tansu cannot be had, running pybroker alone: {exc}", flush=True)
            return BrokerResult(name, error=f"not fetched: {exc}")
        broker = TansuProcess(workdir / "tansu", binary)
    else:
        # Kafka's 3 s initial rebalance delay batches joins of many members; a lone consumer should not wait
        broker = MetricsBrokerProcess(workdir / "pybroker", {"group.initial.rebalance.delay.ms": "0"})
    print(f"starting {name} ...", flush=True)
    try:
        broker.start()
        result = run_load(name, broker, args)
    except Exception as exc:
        print(f"{name} failed: {exc!r}\n{broker.log_tail(20)}", flush=True)
        broker.close()
        return BrokerResult(name, error=repr(exc))
    if result.error:
        print(f"{name}: {result.error}\n{broker.log_tail(20)}", flush=True)
    try:
        broker.stop(expect_code=None if name == "tansu" else 0)
    except AssertionError as exc:
        result.error += f"{'; ' if result.error else ''}unclean stop: {str(exc).splitlines()[0]}"
    finally:
        broker.close()
    return result


def _fmt(value: float, digits: int = 1) -> str:
    return "-" if value != value else f"{value:,.{digits}f}"  # NaN check without math


def print_table(result: BrokerResult, ceilings: dict[int, float]) -> None:
    print(f"\n== {result.name} ({STORAGE.get(result.name, '')}) ==")
    if result.error:
        print(f"  stopped early: {result.error}")
        if not result.produce:
            return
    print(f"  {'phase':<22}{'records':>10}{'msgs/s':>14}{'MB/s':>10}{'seconds':>10}{'client ceiling':>16}  note")
    for kind, table in (("produce", result.produce), ("consume", result.consume)):
        for size, t in table.items():
            notes = [t.note] if t.note else []
            if kind == "consume" and size in result.consume_cpu_s and t.payload_bytes:
                notes.insert(0, f"broker CPU {result.consume_cpu_s[size] / (t.payload_bytes / 1e9):.2f} s/GB")
            if kind == "consume" and size in result.fetch_paths:
                notes.insert(0, sendfile_share(*result.fetch_paths[size]))
            note = "; ".join(notes)
            ceiling = f"{ceilings[size]:,.0f}" if kind == "produce" and size in ceilings else "-"
            print(f"  {kind + f' {size} B':<22}{t.records:>10,}{_fmt(t.msgs_per_s, 0):>14}"
                  f"{_fmt(t.mb_per_s, 2):>10}{t.seconds:>10.2f}{ceiling:>16}  {note}")
    lat = result.latency
    if lat is not None:
        print(f"  {'end-to-end latency':<22}{len(lat.samples_ms):>10,}  at {lat.rate} msg/s: "
              f"p50 {_fmt(lat.percentile(0.50), 2)} ms, p99 {_fmt(lat.percentile(0.99), 2)} ms, "
              f"max {_fmt(max(lat.samples_ms, default=float('nan')), 2)} ms  {lat.note}")
    if result.latency is not None:
        joined = "timed out" if result.group_join_s is None else f"{result.group_join_s:.3f} s (median of 3)"
        print(f"  {'group: subscribe to first record':<34}{joined}")


def sendfile_share(sent: float, copied: float) -> str:
    """'sendfile 99.9% of 1,234 MB fetched': the zero-copy share of a consume phase."""
    total = sent + copied
    share = f"{100 * sent / total:.1f}%" if total else "-"
    return f"sendfile {share} of {total / 1e6:,.0f} MB fetched"


def print_ratios(ours: BrokerResult, theirs: BrokerResult) -> None:
    if not ours.produce or not theirs.produce:
        return
    print("\n== pybroker / tansu (throughput: > 1 means pybroker is faster; latency: < 1 means lower) ==")
    for kind, a, b in (("produce", ours.produce, theirs.produce), ("consume", ours.consume, theirs.consume)):
        for size in SIZES:
            if size in a and size in b and b[size].msgs_per_s > 0:
                print(f"  {kind + f' {size} B':<22}{a[size].msgs_per_s / b[size].msgs_per_s:>8.3g}x")
    if ours.latency and theirs.latency:
        for q in (0.50, 0.99):
            them = theirs.latency.percentile(q)
            if them and them == them:
                print(f"  {f'latency p{int(q * 100)}':<22}{ours.latency.percentile(q) / them:>8.3g}x")


def print_settings(args: argparse.Namespace) -> dict[int, float]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load average {load[0]:.2f}; "
          f"client and broker share it; Python {platform.python_version()}")
    import confluent_kafka

    print(f"client: confluent-kafka {confluent_kafka.__version__} / librdkafka {confluent_kafka.libversion()[0]}")
    print("records per size: " + ", ".join(f"{records_for(s, args.records):,} x {s} B" for s in SIZES)
          + f", no keys, {args.partitions} partition(s)")
    print("producer: " + ", ".join(f"{k}={v}" for k, v in PRODUCER_SETTINGS.items()))
    print("consumer: " + ", ".join(f"{k}={v}" for k, v in CONSUMER_SETTINGS.items() if k != "group.id")
          + " (assign from offset 0, no group, nothing committed)")
    print(f"latency: {args.latency_rate} msg/s for {args.latency_seconds:.0f} s, 100 B, linger.ms="
          f"{LATENCY_PRODUCER_SETTINGS['linger.ms']}, acks={LATENCY_PRODUCER_SETTINGS['acks']}; "
          "consumer fetch.wait.max.ms=100")
    ceilings = client_ceilings(args.records)
    print("client ceiling (Python handing records to librdkafka, no broker): "
          + ", ".join(f"{size} B: {rate:,.0f} msgs/s" for size, rate in ceilings.items()))
    print("MB/s counts payload bytes (10^6), not protocol overhead. Produce is timed from the first send to "
          "the last ack; consume from assign() to the last record (bootstrap metadata fetched before).\n",
          flush=True)
    return ceilings


def client_ceilings(records: int) -> dict[int, float]:
    from bench.load import client_ceiling
    from tests.integration.brokers import free_port

    return {size: client_ceiling(records_for(size, records), size, f"127.0.0.1:{free_port()}") for size in SIZES}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=500_000, help="records per record size (default 500000)")
    parser.add_argument("--partitions", type=int, default=1, help="partitions of the throughput topics")
    parser.add_argument("--only", choices=("pybroker", "tansu"), help="benchmark one broker only")
    parser.add_argument("--skip-tansu", action="store_true", help="pybroker only (same as --only pybroker)")
    parser.add_argument("--latency-rate", type=int, default=1000, help="msgs/s in the latency phase")
    parser.add_argument("--latency-seconds", type=float, default=10.0, help="length of the latency phase")
    parser.add_argument("--skip-memory", action="store_true", help="skip the big-frame memory attack")
    parser.add_argument("--skip-validation", action="store_true", help="skip the validation cost table")
    parser.add_argument("--skip-load", action="store_true", help="the validation cost table only")
    parser.add_argument("--skip-tls", action="store_true", help="skip the TLS vs PLAINTEXT phase")
    parser.add_argument("--skip-txn", action="store_true", help="skip the transactional produce phase")
    parser.add_argument("--skip-spark", action="store_true",
                        help="skip the Spark connector's batch read (skipped anyway without Java or pyspark)")
    parser.add_argument("--skip-partitions", action="store_true",
                        help="skip acks=all produce over 1/16/256/1,024 partitions")
    parser.add_argument("--txn-seconds", type=float, default=10.0,
                        help="seconds per records-per-transaction load in the transactional phase (default 10)")
    parser.add_argument("--tls-records", type=int, default=200_000,
                        help="records per size in the TLS vs PLAINTEXT phase (default 200000)")
    args = parser.parse_args(argv)
    if args.records < 1 or args.partitions < 1 or args.latency_rate < 1 or args.latency_seconds <= 0:
        parser.error("--records, --partitions, --latency-rate and --latency-seconds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = ["pybroker", "tansu"]
    if args.only:
        names = [args.only]
    elif args.skip_tansu:
        names = ["pybroker"]
    started = time.monotonic()
    if not args.skip_validation:
        from bench import validation

        print("== validation cost (in-process, no broker) ==")
        validation.run(seconds=0.3)
        from bench import fetch_sessions

        print("\n== fetch sessions (KIP-227): full vs incremental fetches (in-process, no broker) ==")
        fetch_sessions.run()
    if args.skip_load:
        return 0
    ceilings = print_settings(args)
    results: dict[str, BrokerResult] = {}
    memory: list[str] = []
    tls_result = None
    txn_results = None
    partition_results = None
    spark_results = None
    try:
        with tempfile.TemporaryDirectory(prefix="pybroker-bench-") as tmp:
            for name in names:
                results[name] = bench_one(name, args, Path(tmp))
            if "pybroker" in names and not args.skip_memory:
                print("  [pybroker] big-frame attack: 8 x 95 MB of a 100 MB request ...", flush=True)
                memory = measure_big_frames(Path(tmp) / "big-frames").lines(8, 100, 95)
            if "pybroker" in names and not args.skip_tls:
                from bench import tls

                print("  [pybroker] TLS vs PLAINTEXT ...", flush=True)
                tls_result = tls.run(args.tls_records, args.partitions)
            if "pybroker" in names and not args.skip_txn:
                from bench import txn

                txn_results = txn.run(args.txn_seconds)
            if "pybroker" in names and not args.skip_partitions:
                from bench import partitions

                partition_results = partitions.run(workdir=Path(tmp))
            if "pybroker" in names and not args.skip_spark:
                from bench import spark_read

                spark_results = spark_read.run(workdir=Path(tmp))
    finally:
        kill_all()
    for result in results.values():
        print_table(result, ceilings)
    if "pybroker" in results and "tansu" in results:
        print_ratios(results["pybroker"], results["tansu"])
    if memory:
        print("\n== pybroker memory under the big-frame attack (default settings) ==")
        print("\n".join(memory))
    if tls_result is not None:
        from bench import tls

        tls.print_table(tls_result, client_ceilings(args.tls_records))
    if txn_results is not None:
        from bench import txn

        txn.print_table(txn_results, client_ceilings(args.records)[txn.SIZE])
    if partition_results is not None:
        from bench import partitions

        partitions.print_table(partition_results)
    if spark_results is not None:
        from bench import spark_read

        spark_read.print_table(spark_results)
    print(f"\nbenchmark took {time.monotonic() - started:.0f} s")
    return 1 if any(r.error and not r.error.startswith("not fetched") for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
