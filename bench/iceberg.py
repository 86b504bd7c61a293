"""Iceberg topics: rows/s into the table, the lag from produce to visible, and Spark reading the table vs the topic.

Three figures, on one broker process (the worker process it starts does the Iceberg work):
- **catch-up rows/s**: `--records` values of `--size` bytes over `--partitions` partitions are produced to
  a topic without a table, then the topic is switched to `iceberg.mode=key_value` (AlterConfigs) and the
  clock runs until the table holds them all: the worker's own rate (read the segments, build Arrow,
  write Parquet, commit), rounds of at most 64 MiB each;
- **produce -> visible lag**: a producer sends `--rate` records/s for `--seconds` to a table topic with
  `iceberg.commit.interval.ms` = `--interval-ms`; a poller loads the table every 50 ms and notes when each
  partition's covered offsets (the snapshot's `pybroker.offsets`) pass each record's offset; the lag of a
  record is that moment minus its send time (p50, p99, max). The floor is the commit interval;
- **Spark batch read**: `count(*), sum(length(value))` over the table (the Parquet files of its snapshot,
  `clients/iceberg/spark_read.py`) and over the topic (`format("pybroker")`), same records, medians of
  `--runs` after a warm-up, local[2]. Skipped with a line when Java or pyspark is missing.

The worker runs at `--niceness` (0 by default here, so the figures are its own rate rather than its share
of a busy machine) and is started by a warm-up table before any clock runs (its imports take seconds).
The 1-minute load average is printed with each figure: the machine is shared.

    .venv/bin/python -m bench.iceberg [--records N] [--partitions P] [--size B] [--rate R] [--seconds S]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

from bench.load import produce  # noqa: E402
from tests.integration.brokers import BrokerProcess, kill_all  # noqa: E402
from tests.integration.iceberg_tables import broker_catalog, wait_rows  # noqa: E402

NAMESPACE = "pybroker"


def load() -> float:
    return os.getloadavg()[0]


def make_topic(bootstrap: str, topic: str, partitions: int, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1, config=configs)])[topic].result(15)


def warm_up(bootstrap: str, log_dir: Path) -> None:
    """A first table, so the worker process runs (and has imported pyiceberg and pyarrow) before the clock does."""
    topic = f"bench-warmup-{uuid.uuid4().hex[:6]}"
    make_topic(bootstrap, topic, 1, {"iceberg.mode": "key_value", "iceberg.commit.interval.ms": "200"})
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, value=b"warm")
    producer.flush(30)
    wait_rows(broker_catalog(log_dir), (NAMESPACE, topic), 1, timeout_s=300)


def catch_up(bootstrap: str, log_dir: Path, records: int, partitions: int, size: int) -> dict[str, Any]:
    topic = f"bench-catchup-{uuid.uuid4().hex[:6]}"
    make_topic(bootstrap, topic, partitions, {"iceberg.mode": "disabled"})
    produce(bootstrap, topic, partitions, records, size)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", topic, set_config={"iceberg.mode": "key_value",
                                                          "iceberg.commit.interval.ms": "1000"})
    started = time.monotonic()
    admin.alter_configs([resource])[resource].result(15)
    wait_rows(broker_catalog(log_dir), (NAMESPACE, topic), records, timeout_s=900)
    seconds = time.monotonic() - started
    return {"records": records, "seconds": round(seconds, 2), "rows_per_s": round(records / seconds),
            "mb_per_s": round(records * size / seconds / 1e6, 1), "load": round(load(), 2), "topic": topic}


def lag(bootstrap: str, log_dir: Path, partitions: int, size: int, rate: int, seconds: float,
        interval_ms: int) -> dict[str, Any]:
    topic = f"bench-lag-{uuid.uuid4().hex[:6]}"
    make_topic(bootstrap, topic, partitions, {"iceberg.mode": "key_value", "iceberg.commit.interval.ms": str(interval_ms)})
    catalog = broker_catalog(log_dir)
    sent: dict[tuple[int, int], float] = {}  # (partition, offset) -> send time
    send_time: dict[int, float] = {}
    covered: list[tuple[float, dict[int, int]]] = []
    stop = threading.Event()

    def poll() -> None:
        last = None
        while not stop.is_set():
            try:
                table = catalog.load_table((NAMESPACE, topic))
                snapshot = table.current_snapshot()
                if snapshot is not None and snapshot.snapshot_id != last:
                    last = snapshot.snapshot_id
                    offsets = json.loads(snapshot.summary.additional_properties["pybroker.offsets"])
                    covered.append((time.monotonic(), {int(p): int(o) for p, o in offsets.items()}))
            except Exception:
                pass
            time.sleep(0.05)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    payload = b"x" * size

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            sent[(msg.partition(), msg.offset())] = send_time.pop(int(msg.key()))

    started = time.monotonic()
    n = 0
    while time.monotonic() - started < seconds:
        due = started + n / rate
        if time.monotonic() < due:
            producer.poll(max(due - time.monotonic(), 0))
            continue
        send_time[n] = time.monotonic()
        producer.produce(topic, key=str(n).encode(), value=payload, partition=n % partitions, on_delivery=delivered)
        n += 1
        producer.poll(0)
    producer.flush(60)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (covered and all(
            covered[-1][1].get(p, 0) > max((o for (q, o) in sent if q == p), default=-1) for p in range(partitions))):
        time.sleep(0.1)
    stop.set()
    poller.join(5)
    lags = []
    for (partition, offset), at in sent.items():
        seen = next((when for when, offsets in covered if offsets.get(partition, 0) > offset), None)
        if seen is not None:
            lags.append(seen - at)
    lags.sort()
    return {"records": len(sent), "visible": len(lags), "rate": rate, "interval_ms": interval_ms,
            "p50_ms": round(statistics.median(lags) * 1000) if lags else None,
            "p99_ms": round(lags[int(len(lags) * 0.99) - 1] * 1000) if lags else None,
            "max_ms": round(lags[-1] * 1000) if lags else None, "load": round(load(), 2)}


def spark_reads(bootstrap: str, log_dir: Path, topic: str, runs: int) -> dict[str, Any] | str:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "skipped: no Java for Spark"
    try:
        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F
    except ImportError:
        return "skipped: no pyspark"
    from pybroker.clients.iceberg.spark_read import read_table
    from pybroker.clients.spark import FORMAT, register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "1g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    table = broker_catalog(log_dir).load_table((NAMESPACE, topic))

    def table_read() -> Any:
        return read_table(spark, table).agg(F.count("*"), F.sum(F.length("value"))).collect()[0]

    def topic_read() -> Any:
        return (spark.read.format(FORMAT).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
                .load().agg(F.count("*"), F.sum(F.length("value"))).collect()[0])

    out: dict[str, Any] = {}
    try:
        for name, action in (("table", table_read), ("topic", topic_read)):
            answer = action()  # warm-up
            times = []
            for _ in range(runs):
                started = time.monotonic()
                answer = action()
                times.append(time.monotonic() - started)
            rows = int(answer[0])
            median = statistics.median(times)
            out[name] = {"rows": rows, "median_s": round(median, 2), "rows_per_s": round(rows / median),
                         "load": round(load(), 2)}
    finally:
        spark.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rate", type=int, default=2_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--interval-ms", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--niceness", type=int, default=0,
                        help="iceberg.process.niceness (default %(default)s: the worker's own rate, not its share "
                             "of a busy machine; the broker's default is 10)")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="pybroker-bench-iceberg-"))
    broker = BrokerProcess(workdir, {"iceberg.process.niceness": str(args.niceness)}).start()
    try:
        log_dir = broker.log_dirs[0]
        warm_up(broker.bootstrap, log_dir)
        caught = catch_up(broker.bootstrap, log_dir, args.records, args.partitions, args.size)
        print(f"catch-up into Iceberg: {caught['records']} records of {args.size} B in {caught['seconds']} s = "
              f"{caught['rows_per_s']} rows/s ({caught['mb_per_s']} MB/s), load {caught['load']}", flush=True)
        lagged = lag(broker.bootstrap, log_dir, args.partitions, args.size, args.rate, args.seconds, args.interval_ms)
        print(f"produce -> visible at {lagged['rate']} records/s, commit interval {lagged['interval_ms']} ms: "
              f"p50 {lagged['p50_ms']} ms, p99 {lagged['p99_ms']} ms, max {lagged['max_ms']} ms "
              f"({lagged['visible']} of {lagged['records']} records seen), load {lagged['load']}", flush=True)
        reads = spark_reads(broker.bootstrap, log_dir, caught["topic"], args.runs)
        if isinstance(reads, str):
            print(f"Spark reads: {reads}")
        else:
            for name, figures in reads.items():
                print(f"Spark read of the {name}: {figures['rows']} rows, median {figures['median_s']} s = "
                      f"{figures['rows_per_s']} rows/s, load {figures['load']}", flush=True)
    finally:
        broker.stop(expect_code=None)
        kill_all()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
