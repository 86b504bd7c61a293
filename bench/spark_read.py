"""The Spark connector's batch read: rows/s of `spark.read.format("pybroker")` beside one direct consumer.

The question (issue 14): does a Spark batch read of 1M records of 100 B over 8 partitions on local[2]
go at least as fast as one direct confluent-kafka (librdkafka) consumer of the same topic? That
consumer (`bench.load.consume`: all partitions by assignment, from offset 0) is the ceiling printed
beside the figures; it runs right after each Spark read, in the same process, so that both see the
same load on a shared machine. The Spark figure is one action over the whole
topic, `count(*), sum(length(value))` (every value decoded and moved to the JVM, nothing collected),
timed from the action to its answer, so it includes planning (the driver's offset lookups) and task
scheduling, as a user's job would. Two readers, each in its own driver process (the reader is chosen
by the workers' environment, see `datasource.READER_ENV`):
- before: the kafka-python reader (a ConsumerRecord per record, then `pa.array` per column);
- after: our own Fetch client and the compiled decoder (`fetch_reader`, `arrow_records`);
- and Spark's own `format("kafka")` (spark-sql-kafka-0-10, Java), when `make spark-kafka` resolved it: what a
  Spark user would otherwise run, on the same topic.
Each is run once to warm up (the JVM, Python workers) and then `--runs` times; medians are printed
with the 1-minute load average after each run.

Skipped, with a line saying why, when Java or pyspark is missing.

    .venv/bin/python -m bench.spark_read [--records N] [--partitions P] [--runs R]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.load import consume, create_topic, produce  # noqa: E402
from tests.integration.brokers import BrokerProcess, kill_all  # noqa: E402
from tests.integration.spark.spark_kafka import spark_kafka_jars  # noqa: E402

RECORDS = 1_000_000
SIZE = 100
PARTITIONS = 8
RUNS = 3
MASTER = "local[2]"
#: the reader that is not ours: Spark's own Kafka source (its jars from `make spark-kafka`)
SPARK_KAFKA = "spark-kafka"
#: reader label -> the workers' PYBROKER_SPARK_READER value (see clients/spark/datasource.py), or SPARK_KAFKA
READERS = {"before (kafka-python)": "kafka-python", "after (compiled)": "",
           'Spark\'s own format("kafka") (spark-sql-kafka-0-10)': SPARK_KAFKA}
SPARK_RUN_TIMEOUT_S = 900


@dataclass
class Runs:
    """Timed runs of one reader: seconds and the load average when each ended."""

    label: str
    seconds: list[float] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)
    note: str = ""

    def add(self, seconds: float) -> None:
        self.seconds.append(seconds)
        self.loads.append(os.getloadavg()[0])

    def median_rate(self, records: int) -> float:
        return records / statistics.median(self.seconds) if self.seconds else 0.0


def missing() -> str | None:
    """Why this phase cannot run here, or None."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (the spark extra)"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java (Spark needs Java 17+)"
    return None


def _spark_runs(bootstrap: str, topic: str, partitions: int, records: int, runs: int,
                reader: str) -> dict[str, list[list[float]]]:
    """In a driver process of its own: a warm-up read, then `runs` timed reads, each followed by one of the
    direct consumer (seconds and load averages of both)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from pybroker.clients.spark import register

    spark = (SparkSession.builder.master(MASTER).appName("pybroker-bench-spark-read")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "1g").config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.extraClassPath", ":".join(str(jar) for jar in spark_kafka_jars()))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    source = "kafka" if reader == SPARK_KAFKA else "pybroker"
    spark_runs, direct_runs = Runs(reader), Runs("direct")
    try:
        for run in range(runs + 1):
            df = (spark.read.format(source).option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).load())
            started = time.perf_counter()
            count, total = df.selectExpr("count(*)", "sum(length(value))").first()
            seconds = time.perf_counter() - started
            if count != records or total != records * SIZE:
                raise RuntimeError(f"read {count} rows, {total} value bytes; expected {records}, {records * SIZE}")
            if run:  # the first read warms up the JVM's code and Spark's Python workers
                spark_runs.add(seconds)
                # the ceiling right after, under the same load (the machine may be shared)
                direct = consume(bootstrap, topic, partitions, records, SIZE)
                if direct.note:
                    raise RuntimeError(f"the direct consumer: {direct.note}")
                direct_runs.add(direct.seconds)
    finally:
        spark.stop()
    return {"spark": [spark_runs.seconds, spark_runs.loads], "direct": [direct_runs.seconds, direct_runs.loads]}


def spark_reader(bootstrap: str, topic: str, partitions: int, records: int, runs: int, label: str,
                 reader: str) -> tuple[Runs, Runs]:
    """(the Spark reads, the direct consumer's reads between them)."""
    env = {**os.environ, "PYBROKER_SPARK_READER": reader}
    command = [sys.executable, "-m", "bench.spark_read", "--spark-run", bootstrap, topic, "--records", str(records),
               "--partitions", str(partitions), "--runs", str(runs)]
    result, direct = Runs(label), Runs("  one confluent-kafka consumer after each (the ceiling)")
    try:
        proc = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                              timeout=SPARK_RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        result.note = f"timed out after {SPARK_RUN_TIMEOUT_S} s"
        return result, direct
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        result.note = f"failed (exit {proc.returncode}): {tail}"
        return result, direct
    answer = json.loads(lines[-1])
    result.seconds, result.loads = answer["spark"]
    direct.seconds, direct.loads = answer["direct"]
    return result, direct


def run(records: int = RECORDS, partitions: int = PARTITIONS, runs: int = RUNS,
        workdir: Path | None = None) -> list[Runs] | str:
    """Every reader's runs, or a sentence saying why the phase was skipped."""
    why = missing()
    if why is not None:
        return why
    with tempfile.TemporaryDirectory(prefix="pybroker-bench-spark-", dir=workdir) as tmp:
        broker = BrokerProcess(Path(tmp) / "broker").start()
        try:
            topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
            create_topic(broker.bootstrap, topic, partitions)
            print(f"  [pybroker] Spark read: producing {records} x {SIZE} B over {partitions} partitions ...",
                  flush=True)
            sent = produce(broker.bootstrap, topic, partitions, records, SIZE)
            if sent.records != records:
                return f"produce fell short ({sent.records} of {records}: {sent.note})"
            results: list[Runs] = []
            for label, reader in READERS.items():
                if reader == SPARK_KAFKA and not spark_kafka_jars():
                    print(f"  [pybroker] Spark read, {label}: skipped (`make spark-kafka` resolves it)", flush=True)
                    continue
                print(f"  [pybroker] Spark read, {label}: {runs} runs on {MASTER} ...", flush=True)
                results += spark_reader(broker.bootstrap, topic, partitions, records, runs, label, reader)
            return results
        finally:
            broker.stop(expect_code=None)


def print_table(results: list[Runs] | str, records: int = RECORDS, partitions: int = PARTITIONS) -> None:
    print(f"\n== Spark batch read: {records} records of {SIZE} B over {partitions} partitions, {MASTER}, "
          "count(*) + sum(length(value)) ==")
    if isinstance(results, str):
        print(f"  skipped: {results}")
        return
    print(f"  {'reader':<58} {'rows/s (median)':>15} {'runs (s)':>20} {'load avg':>15} {'vs ceiling':>10}")
    for spark_runs, direct in zip(results[::2], results[1::2], strict=True):
        ceiling = direct.median_rate(records)
        for r in (spark_runs, direct):
            rate = r.median_rate(records)
            runs = ", ".join(f"{s:.2f}" for s in r.seconds)
            loads = ", ".join(f"{x:.1f}" for x in r.loads)
            ratio = f"{rate / ceiling:.2f}x" if ceiling and rate else "-"
            print(f"  {r.label:<58} {rate:>15,.0f} {runs:>20} {loads:>15} {ratio:>10}"
                  + (f"  ({r.note})" if r.note else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--partitions", type=int, default=PARTITIONS)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--spark-run", nargs=2, metavar=("BOOTSTRAP", "TOPIC"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.spark_run:
        answer = _spark_runs(*args.spark_run, args.partitions, args.records, args.runs,
                             os.environ.get("PYBROKER_SPARK_READER", ""))
        print(json.dumps(answer), flush=True)
        return 0
    try:
        results = run(args.records, args.partitions, args.runs)
    finally:
        kill_all()
    print_table(results, args.records, args.partitions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
