"""`make bench`: the broker measured, not the client: several client processes, pybroker beside Apache Kafka
and Tansu.

Why Kafka: pybroker stands in for it. It runs in two profiles (`bench/kafka_peer.py`): `kafka`, its
defaults (acks=all answered from the page cache), and `kafka-fsync`, `log.flush.interval.messages=1`
(every append fsynced before the answer: pybroker's durability), both the version the tests use, in a JVM
with the flags Kafka's start scripts give a broker (stated in the output). pybroker runs with its defaults.
Without Java or the jars (`make kafka`) the bench says so and goes on without Kafka; `--skip-kafka` leaves
it out on purpose.

Why Tansu: it is a Kafka-compatible broker written in Rust, so the ratio pybroker/tansu says how far a
Python broker is from a compiled one on the same machine and the same client settings. Note the
difference in durability: pybroker fsyncs before it acknowledges acks=all, Tansu here keeps everything
in memory (`memory://`), so Tansu does strictly less work per record. Tansu is fetched once with pip
into the git-ignored `bench/.cache/`; if it cannot be had, pybroker runs alone (and says so).

The throughput grid (`bench/grid.py`): 100 B / 1 KiB / 10 KiB records over 1 / 16 / 256 / 1,024 partitions,
acks=all produce then consume from offset 0, by N librdkafka client processes (`bench/fleet.py`; one
Python process is itself a ceiling of a few hundred thousand msgs/s), on pybroker, on Tansu and on the null
broker (`bench/null_broker.py`: answers at once, stores nothing), whose figure is the client-only ceiling
printed beside each broker's. Beside the rates: the brokers' CPU seconds per GB moved, RSS, and the share
of pybroker's fetched bytes sent by `os.sendfile`. Then end-to-end latency (p50/p99) at 1,000 msgs/s and
the consumer-group join time. The issue 14 goals are printed as ratios with met/not met, and everything
is written as JSON to the git-ignored `bench/results/` (`latest.json` and one file per run).

Beside the grid, per broker: start-to-ready (process start to its first Metadata answer listing a broker),
peak RSS (VmHWM) over the run, end-to-end p50/p99 at 1,000 msgs/s and the consumer-group join time. The
goals (`bench/goals.py`: issue 14 against Tansu, issue 34 against Kafka) are judged cell by cell against the
lower of the goal and the ceiling, and printed with met/not met.

Every cell starts with the disk in the same state: before each produce phase (and the latency phase), on
every target alike, the harness calls `os.sync()` and waits until the kernel's dirty pages are written back
(`bench/disk.py`; pybroker writes and fsyncs its log, Tansu and the null broker write nothing, and a disk
that is still writing back the previous cell's pages halved pybroker's produce figure in later cells). The
header shows the disk ceiling for each partition count: MB/s written to the brokers' directory for a produce
phase's seconds the way pybroker writes its logs (appends over one file per partition, while 8 threads fsync
each file whenever something was appended to it: group commit), with no broker. It is pybroker's produce
ceiling, as the null broker is the client's: it is printed beside pybroker's produce MB/s, and under the
goals wherever a goal asks for more fsynced MB/s than the disk takes (Tansu keeps its records in memory).

A produce phase lasts a fixed time (2.5 s); then 1 GB more records are written, untimed, and every
target's consume phase reads those back (`run_grid` in `bench/grid.py`); `--repeats 3` runs
the grid three times over and prints medians (the default, once, with both Kafka profiles and Tansu, took
18 minutes on 2 cores).
`BENCH_QUICK=1` (or `--quick`): a quick subset (1 KiB and 10 KiB, 1 and 16 partitions, one repetition, the
per-broker figures, nothing else: about 2.5 minutes without Kafka, about 6 with both profiles). The full run adds, before the load, in-process: what produce-path validation
costs per batch and per record (`bench/validation.py`) and what fetch sessions (KIP-227) save a consumer
of 1,000 partitions (`bench/fetch_sessions.py`) and what the hot codecs cost compiled (mypyc) against pure
Python (`bench/codecs.py`); and after it, on pybroker alone: its CPU per produce request from pre-encoded
frames, no librdkafka (`bench/request_cost.py`: the broker's own cost, steady where the grid moves with the
host), one consumer's 1 MiB fetch round trip beside the null broker's (`bench/fetch_cost.py`), its RSS under the big-frame attack (`bench/big_frames.py`), TLS against PLAINTEXT (`bench/tls.py`) and
transactional produce (`bench/txn.py`). `bench/partitions.py` (single-process acks=all produce by partition count)
still runs on its own; the grid's partition counts cover it with several processes and Tansu beside.

Last of all, on pybroker alone, the Spark connector's batch read of 1M records of 100 B over 8 partitions on
local[2] (`bench/spark_read.py`, `--skip-spark` to leave it out; skipped without Java or pyspark): rows/s
with the previous kafka-python reader and with the compiled one, each beside one direct confluent-kafka
consumer run right after it.

    .venv/bin/python bench/run.py [--quick] [--processes N] [--repeats R] [--only TARGET] [--skip-kafka] ...
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.big_frames import measure as measure_big_frames  # noqa: E402
from bench.disk import settle_disk, write_bandwidth  # noqa: E402
from bench.fleet import Fleet  # noqa: E402
from bench.goals import cpu_limits, judge, latency_limits, share_limits  # noqa: E402
from bench.grid import (  # noqa: E402
    CEILING,
    CONSUME_BYTES,
    CONSUME_PASSES,
    DELETE_SOON,
    LOOP_STALL_S,
    RETIRED_PEAK_MB,
    NullBrokerProcess,
    cpu_seconds,
    create_topic,
    loop_late_wakes,
    peak_rss_mb,
    rotated,
    run_grid,
    start_to_ready,
)
from bench.idle_peers import PRIORITIES_CAN_RETURN, WAITING_NICE  # noqa: E402
from bench.kafka_peer import PROFILES, KafkaProcess, describe  # noqa: E402
from bench.kafka_peer import STORAGE as KAFKA_STORAGE  # noqa: E402
from bench.load import (  # noqa: E402
    CONSUMER_SETTINGS,
    LATENCY_PRODUCER_SETTINGS,
    PRODUCER_SETTINGS,
    LatencyWindows,
    group_join,
    latency,
)
from bench.readiness import PybrokerTarget, TansuTarget  # noqa: E402
from bench.report import brokers_text, print_goals, print_grid, write_json  # noqa: E402
from tests.integration.brokers import BrokerProcess, ensure_tansu, kill_all  # noqa: E402

SIZES = (100, 1024, 10240)
COUNTS = (1, 16, 256, 1024)
PRODUCE_SECONDS = 2.5
QUICK = {"sizes": (1024, 10240), "counts": (1, 16), "seconds": 2.0, "repeats": 1, "latency_seconds": 5.0}
STORAGE = {"pybroker": "log segments on disk, fsync before acks=all is answered (its defaults)",
           **KAFKA_STORAGE, "tansu": "memory:// (nothing on disk)",
           CEILING: "the null broker: answers at once, stores nothing"}
TARGETS = ("pybroker", *PROFILES, "tansu")


def default_processes() -> int:
    """Client processes: as many as cores (at least 2) — more only add contention with the broker."""
    return max(2, os.cpu_count() or 2)


#: starts of each target whose start-to-ready and start CPU are taken (their medians are reported): one
#: start's figure moves by half from one run to the next on the shared 2-core VM (pybroker 0.27-0.54 s,
#: Kafka 2.0-2.8 s), and the goal is a ratio of two such figures
START_SAMPLES = 3


def start_brokers(names: list[str], workdir: Path, pybroker_config: dict[str, str] | None = None,
                  kafka_heap: str = "1g", start_samples: int = START_SAMPLES
                  ) -> tuple[dict[str, BrokerProcess], dict[str, Callable[[], BrokerProcess]],
                             dict[str, float], dict[str, float]]:
    """Every target up at once (each idles while another is measured), one after the other on a settled
    disk and before the client processes start, so each one's start-to-ready time (also returned) is its
    own; one that cannot start is left out. Also how to make a fresh Tansu (its memory:// storage keeps
    deleted topics' data), and each one's CPU seconds at that first answer (its start's cost, which a loaded
    machine does not stretch as it stretches the wall time). Both figures are medians over `start_samples`
    starts, each on a fresh dir: all but the last are stopped again at once; the last is the one kept."""
    brokers: dict[str, BrokerProcess] = {}
    fresh: dict[str, Callable[[], BrokerProcess]] = {}
    ready: dict[str, float] = {}
    start_cpu: dict[str, float] = {}
    for name in names:
        make: Callable[[Path], BrokerProcess]
        if name in PROFILES:
            from tests.kafka_node import missing_reason

            missing = missing_reason()
            if missing:
                print(f"{name} cannot run, so no ratios to it: {missing}", flush=True)
                continue
            make = partial(KafkaProcess, name=name, heap=kafka_heap)
        elif name == "tansu":
            try:
                binary = ensure_tansu()
            except Exception as exc:
                print(f"Tansu cannot be had, so no ratios: {exc}", flush=True)
                continue
            make = partial(TansuTarget, binary=binary)
            fresh[name] = lambda binary=binary: TansuTarget(workdir / "tansu", binary)  # type: ignore[misc]
        elif name == CEILING:
            make = NullBrokerProcess
        else:
            # Kafka's 3 s initial rebalance delay batches joins of many members; a lone consumer should not wait
            make = partial(PybrokerTarget, overrides={"group.initial.rebalance.delay.ms": "0", **DELETE_SOON,
                                                      **(pybroker_config or {})})
        print(f"starting {name} ({STORAGE[name]}) ...", flush=True)
        samples = 1 if name == CEILING else max(1, start_samples)
        walls: list[float] = []
        cpus: list[float] = []
        for attempt in range(samples):
            kept = attempt == samples - 1
            broker = make(workdir / (name if kept else f"{name}-start-{attempt}"))
            settle_disk()  # a start's fsyncs must not wait behind the disk ceiling's write-back (or the last start's)
            try:
                broker.start()
            except Exception as exc:
                print(f"{name} did not start: {exc}", flush=True)
                broker.close()
                break
            if name != CEILING:
                walls.append(start_to_ready(broker))
                cpus.append(cpu_seconds(broker.pid))
            if kept:
                brokers[name] = broker
            else:
                broker.close()
        if name in brokers and name != CEILING:
            ready[name] = statistics.median(walls)
            start_cpu[name] = statistics.median(cpus)
            print(f"  start-to-ready {', '.join(f'{w:.2f}' for w in walls)} s: median {ready[name]:.2f} s", flush=True)
    return brokers, fresh, ready, start_cpu


def measure_latency(brokers: dict[str, BrokerProcess], args: argparse.Namespace) -> tuple[dict[str, LatencyWindows],
                                                                                        dict[str, float | None]]:
    """End-to-end latency in `args.repeats` windows (one per repetition of the grid; `LatencyWindows` says
    why), each window on every broker in turn, a fresh topic each, the first broker one further on each
    window (as the grid's cells); and each broker's group join, once."""
    latencies: dict[str, LatencyWindows] = {}
    joins: dict[str, float | None] = {}
    names = [name for name in brokers if name != CEILING]
    for window in range(args.repeats):
        for name in rotated(names, window):
            broker = brokers[name]
            topic = f"bench-latency-{time.monotonic_ns() % 10**8}"
            try:
                create_topic(broker.bootstrap, topic, 1)
                # as before every produce phase: pybroker's fsyncs must not wait behind the grid's write-back
                unsettled = settle_disk()
                print(f"  [{name}] latency at {args.latency_rate} msgs/s for {args.latency_seconds:.0f} s"
                      f" (window {window + 1} of {args.repeats}) ...", end="", flush=True)
                late_before = loop_late_wakes(broker)
                measured = latency(broker.bootstrap, topic, args.latency_rate, args.latency_seconds)
                late_after = loop_late_wakes(broker)
                if late_before is not None and late_after is not None:
                    measured.loop_stalls = late_after - late_before
                if unsettled:
                    measured.note += unsettled
                latencies.setdefault(name, LatencyWindows(args.latency_rate)).windows.append(measured)
                stalls = "" if measured.loop_stalls is None else \
                    f", its event loop {measured.loop_stalls:.0f} time(s) over {LOOP_STALL_S * 1000:.0f} ms late"
                print(f" p50 {measured.percentile(0.5):.2f} ms, p99 {measured.percentile(0.99):.2f} ms, "
                      f"max {max(measured.samples_ms, default=float('nan')):.1f} ms{stalls}", flush=True)
                if name not in joins:
                    print(f"  [{name}] consumer group: subscribe to first record ...", flush=True)
                    joins[name] = group_join(broker.bootstrap, topic)
            except Exception as exc:
                print(f"  [{name}] latency failed: {exc!r}", flush=True)
    return latencies, joins


def stop_brokers(brokers: dict[str, BrokerProcess]) -> dict[str, str]:
    """Stop every target; pybroker must exit cleanly (0), the others may exit as they like. Then remove
    what each stored: the grid deletes its topics as it goes (`drop_topic`), but not the latency phase's,
    the group joins' or the internal topics, and a stop must leave the disk as the run found it."""
    problems = {}
    for name, broker in brokers.items():
        try:
            broker.stop(timeout=120, expect_code=0 if name == "pybroker" else None)
        except AssertionError as exc:
            problems[name] = f"unclean stop: {str(exc).splitlines()[0]}"
            print(f"{name}: {problems[name]}\n{broker.log_tail(20)}", flush=True)
        finally:
            broker.close()
            for data in broker.log_dirs:
                shutil.rmtree(data, ignore_errors=True)
    return problems


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    import confluent_kafka

    return {"processes": args.processes, "repeats": args.repeats, "sizes": list(args.sizes),
            "partitions": list(args.counts), "produce_seconds": args.seconds,
            "client": f"confluent-kafka {confluent_kafka.__version__} / librdkafka {confluent_kafka.libversion()[0]}",
            "producer": PRODUCER_SETTINGS, "consumer": {k: v for k, v in CONSUMER_SETTINGS.items() if k != "group.id"},
            "latency": {"rate": args.latency_rate, "seconds": args.latency_seconds, "size": 100,
                        "linger.ms": LATENCY_PRODUCER_SETTINGS["linger.ms"]},
            "load_average_start": list(os.getloadavg()), "quick": args.quick,
            "pybroker_config": dict(kv.split("=", 1) for kv in args.pybroker_config),
            "peers_wait_niced": not args.peers_share_cpu and PRIORITIES_CAN_RETURN}


def print_settings(settings: dict[str, Any]) -> None:
    load = settings["load_average_start"]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f}; clients and brokers share it; Python {platform.python_version()}")
    disk = ", ".join(f"{n}p {'-' if v != v else f'{v:,.0f}'}" for n, v in settings["disk_ceiling_mb_per_s"].items())
    print(f"disk ceiling, MB/s: {disk} (the disk alone, written and fsynced for a produce phase's seconds the way "
          "pybroker writes its logs: appends over one file per partition, 8 threads fsyncing them as they grow, the "
          "page cache held to pybroker's budget)")
    print(f"client: {settings['client']}, {settings['processes']} processes, each its share of a phase's records")
    print("while one target runs a cell, the others wait " + (f"at nice {WAITING_NICE} (bench/idle_peers.py)"
          if settings.get("peers_wait_niced") else "at their own priority"))
    if settings.get("kafka"):
        print(f"kafka: {settings['kafka']}")
    if settings["pybroker_config"]:
        print("pybroker settings (not its defaults): "
              + ", ".join(f"{k}={v}" for k, v in settings["pybroker_config"].items()))
    print(f"record sizes: {', '.join(f'{s} B' for s in settings['sizes'])}, no keys; partitions: "
          f"{', '.join(map(str, settings['partitions']))}; produce {settings['produce_seconds']:g} s per phase, "
          f"then {CONSUME_BYTES / 1e9:g} GB more records written untimed (an even share of each partition) and "
          "consumed from where the phase's records end, "
          + ", ".join(f"{passes}x from {least} B" for least, passes in reversed(CONSUME_PASSES)) + "; "
          f"repetitions: {settings['repeats']}")
    print("producer: " + ", ".join(f"{k}={v}" for k, v in PRODUCER_SETTINGS.items()))
    print("consumer: " + ", ".join(f"{k}={v}" for k, v in settings["consumer"].items())
          + " (assign, no group, nothing committed)")
    print("MB/s counts payload bytes (10^6). A phase is timed from one common start instant of all client "
          "processes (clients set up before it) to the last ack (produce) or the last record (consume).\n",
          flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", default=os.environ.get("BENCH_QUICK", "") not in ("", "0"),
                        help="a quick subset, about 2.5 minutes (also BENCH_QUICK=1)")
    parser.add_argument("--processes", type=int, default=int(os.environ.get("BENCH_PROCESSES", 0)) or None,
                        help=f"client processes (default: cores, at least 2; here {default_processes()})")
    parser.add_argument("--repeats", type=int, help="repetitions of the grid (default 1; 3 gives medians)")
    parser.add_argument("--sizes", help="record sizes, comma-separated (default 100,1024,10240)")
    parser.add_argument("--counts", help="partition counts, comma-separated (default 1,16,256,1024)")
    parser.add_argument("--seconds", type=float, help=f"length of a produce phase (default {PRODUCE_SECONDS:g}, quick 2)")
    parser.add_argument("--only", choices=TARGETS, help="benchmark one broker only")
    parser.add_argument("--skip-tansu", action="store_true", help="no Tansu")
    parser.add_argument("--skip-kafka", action="store_true", help="no Apache Kafka (neither profile)")
    parser.add_argument("--start-samples", type=int, default=START_SAMPLES,
                        help=f"starts of each broker whose start-to-ready median is reported (default {START_SAMPLES})")
    parser.add_argument("--kafka-heap", default="1g",
                        help="Kafka's JVM heap, -Xms and -Xmx (default 1g, as Kafka's start script)")
    parser.add_argument("--skip-ceiling", action="store_true", help="no null-broker runs (no client ceiling)")
    parser.add_argument("--latency-rate", type=int, default=1000, help="msgs/s in the latency phase")
    parser.add_argument("--latency-seconds", type=float, help="length of the latency phase (default 10, quick 5)")
    parser.add_argument("--phase-timeout", type=float, default=120.0, help="seconds a phase may take")
    parser.add_argument("--skip-memory", action="store_true", help="skip the big-frame memory attack")
    parser.add_argument("--skip-validation", action="store_true", help="skip the validation cost table")
    parser.add_argument("--pybroker-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker setting for pybroker (repeatable; the defaults are what is measured)")
    parser.add_argument("--peers-share-cpu", action="store_true",
                        help="the waiting targets keep their priority while another runs its cell (default: "
                             "nice 19, bench/idle_peers.py)")
    parser.add_argument("--skip-load", action="store_true", help="the in-process tables only")
    parser.add_argument("--skip-tls", action="store_true", help="skip the TLS vs PLAINTEXT phase")
    parser.add_argument("--skip-txn", action="store_true", help="skip the transactional produce phase")
    parser.add_argument("--skip-request-cost", action="store_true",
                        help="skip pybroker's CPU per produce request and its fetch round trip, from "
                             "pre-encoded frames")
    parser.add_argument("--skip-spark", action="store_true",
                        help="skip the Spark connector's batch read (skipped anyway without Java or pyspark)")
    parser.add_argument("--txn-seconds", type=float, default=10.0,
                        help="seconds per records-per-transaction load in the transactional phase (default 10)")
    parser.add_argument("--tls-records", type=int, default=200_000,
                        help="records per size in the TLS vs PLAINTEXT phase (default 200000)")
    args = parser.parse_args(argv)
    quick: dict[str, Any] = QUICK if args.quick else {}
    args.processes = args.processes or default_processes()
    args.repeats = args.repeats or 1
    args.sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else quick.get("sizes", SIZES)
    args.counts = tuple(int(c) for c in args.counts.split(",")) if args.counts else quick.get("counts", COUNTS)
    args.seconds = args.seconds or quick.get("seconds", PRODUCE_SECONDS)
    args.latency_seconds = args.latency_seconds or quick.get("latency_seconds", 10.0)
    if args.quick:
        args.skip_validation = args.skip_memory = args.skip_tls = args.skip_txn = args.skip_spark = True
        args.skip_request_cost = True
    if min(args.processes, args.repeats, args.latency_rate, *args.sizes, *args.counts) < 1 \
            or min(args.latency_seconds, args.seconds) <= 0:
        parser.error("processes, repeats, sizes, partition counts and the latency settings must be positive")
    return args


def run_in_process_tables() -> None:
    from bench import fetch_sessions, validation

    print("== validation cost (in-process, no broker) ==")
    validation.run(seconds=0.3)
    print("\n== fetch sessions (KIP-227): full vs incremental fetches (in-process, no broker) ==")
    fetch_sessions.run()
    from bench import codecs

    print("\n== codecs: compiled (mypyc) vs pure Python, CPU per call (in-process, no broker) ==")
    codecs.run()


def client_ceilings(records: int) -> dict[int, float]:
    """One process handing records to librdkafka with no broker (the TLS and txn tables' ceiling)."""
    from bench.load import client_ceiling
    from tests.integration.brokers import free_port

    return {size: client_ceiling(records, size, f"127.0.0.1:{free_port()}") for size in SIZES}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # a SIGTERM unwinds like an exception, so client processes and brokers are stopped, not left behind
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    names = [args.only] if args.only else [
        n for n in TARGETS if not (n == "tansu" and args.skip_tansu) and not (n in PROFILES and args.skip_kafka)]
    if not args.skip_ceiling:
        names.append(CEILING)
    started = time.monotonic()
    if not args.skip_validation:
        run_in_process_tables()
    if args.skip_load:
        return 0
    settings = settings_of(args)
    if any(name in PROFILES for name in names):
        settings["kafka"] = describe(args.kafka_heap)
    workdir = tempfile.TemporaryDirectory(prefix="pybroker-bench-")
    settings["disk_ceiling_mb_per_s"] = {n: write_bandwidth(Path(workdir.name), seconds=settings["produce_seconds"],
                                                            files=n) for n in settings["partitions"]}
    print_settings(settings)
    extra: dict[str, Any] = {}
    tls_result = txn_results = None
    memory: list[str] = []
    costs: list[Any] = []
    fetch_costs: list[Any] = []
    spark_results = None
    try:
        with workdir as tmp:
            brokers, fresh, ready, start_cpu = start_brokers(names, Path(tmp), settings["pybroker_config"],
                                                             args.kafka_heap, args.start_samples)
            extra["start_to_ready_s"] = ready
            extra["start_cpu_s"] = start_cpu
            # the client processes only now: their own start (importing the client) must not share the
            # machine with a broker's
            fleet = Fleet(args.processes)
            try:
                cells = run_grid(fleet, brokers, fresh, args.sizes, args.counts, args.seconds, args.repeats,
                                 args.phase_timeout, peers_wait_niced=settings["peers_wait_niced"])
                latencies, joins = measure_latency(brokers, args)
                extra["rss_peak_mb"] = {name: max(peak_rss_mb(b.pid), RETIRED_PEAK_MB.get(name, 0.0))
                                        for name, b in brokers.items()}
                extra["group_join_s"] = joins
            finally:
                fleet.close()
                extra["stop_problems"] = stop_brokers(brokers)
            if "pybroker" in brokers and not args.skip_request_cost:
                from bench import request_cost

                costs = request_cost.run(Path(tmp))
                extra["request_cost"] = [asdict(cost) for cost in costs]
                from bench import fetch_cost

                fetch_costs = fetch_cost.run(Path(tmp))
                extra["fetch_cost"] = [asdict(cost) for cost in fetch_costs]
            if "pybroker" in brokers and not args.skip_memory:
                print("  [pybroker] big-frame attack: 8 x 95 MB of a 100 MB request ...", flush=True)
                memory = measure_big_frames(Path(tmp) / "big-frames").lines(8, 100, 95)
            if "pybroker" in brokers and not args.skip_tls:
                from bench import tls

                print("  [pybroker] TLS vs PLAINTEXT ...", flush=True)
                tls_result = tls.run(args.tls_records, 1)
            if "pybroker" in brokers and not args.skip_txn:
                from bench import txn

                txn_results = txn.run(args.txn_seconds)
            if "pybroker" in brokers and not args.skip_spark:
                from bench import spark_read

                spark_results = spark_read.run(workdir=Path(tmp))
    finally:
        kill_all()
    disk = settings["disk_ceiling_mb_per_s"]
    print_grid(cells, args.processes, args.repeats, disk)
    print(brokers_text(extra["start_to_ready_s"], extra["rss_peak_mb"], latencies, extra["group_join_s"], STORAGE,
                       extra["start_cpu_s"]))
    print("  start-to-ready: process start to its first Metadata answer listing a broker (Kafka: after its storage "
          "format, not counted); start CPU: the broker's user + system CPU seconds by then (every thread, worker "
          "processes included), what its start costs whatever the load; peak RSS: VmHWM over the run, worker processes' peaks added; e2e: "
          f"{args.latency_rate:,} msgs/s of 100 B, linger.ms=0, disk settled first, the median of {args.repeats} "
          "window(s)' percentiles (one per repetition); group join: subscribe with a "
          "new group id to the first record, median of 3")
    verdicts = judge(cells, disk)
    limits = [*cpu_limits(cells), *share_limits("peak RSS", extra["rss_peak_mb"], "MB"),
              *share_limits("start-to-ready", extra["start_to_ready_s"], "s"),
              *latency_limits({name: lat.percentile(0.99) for name, lat in latencies.items()})]
    print_goals(verdicts, limits, sorted(args.counts))
    if costs:
        from bench import request_cost

        request_cost.print_table(costs)
    if fetch_costs:
        from bench import fetch_cost

        fetch_cost.print_table(fetch_costs)
    if memory:
        print("\n== pybroker memory under the big-frame attack (default settings) ==")
        print("\n".join(memory))
    if tls_result is not None:
        from bench import tls

        tls.print_table(tls_result, client_ceilings(args.tls_records))
    if txn_results is not None:
        from bench import txn

        txn.print_table(txn_results, client_ceilings(200_000)[txn.SIZE])
    if spark_results is not None:
        from bench import spark_read

        spark_read.print_table(spark_results)
    extra["seconds"] = time.monotonic() - started
    path = write_json(settings, cells, latencies, verdicts, limits, extra)
    print(f"\nbenchmark took {extra['seconds']:.0f} s, load average now {os.getloadavg()[0]:.2f}; "
          f"figures in {path.relative_to(REPO_ROOT)} (and bench/results/latest.json)")
    return 1 if "pybroker" in extra["stop_problems"] or "pybroker" not in brokers else 0


if __name__ == "__main__":
    sys.exit(main())
