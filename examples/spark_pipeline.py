"""A streaming pipeline on pybroker with PySpark: counts of events per key in 1-minute windows.

It reads the `--source` topic, counts records per key in 1-minute event-time windows (by the records'
timestamps), and writes each window's final count to the `--sink` topic as JSON, keyed by the event key.
A window is final, and written, once the stream has seen records `--watermark` later than its end (records
that arrive later than that are dropped): Spark's append output mode, the one its Python sinks support. The checkpoint directory makes it restartable: stop it and start it again with the same
`--checkpoint`, and it goes on from where it stopped, reading each record once.

Against the broker that `make run` starts:

    .venv/bin/python examples/spark_pipeline.py --bootstrap 127.0.0.1:9092 \\
        --source events --sink event-counts --checkpoint /tmp/event-counts-checkpoint

Add `--available-now` to process what is in the topic now and stop (a batch-style run of the same job).
Ctrl-C (or SIGTERM) stops the query cleanly and exits 0; restarting with the same checkpoint resumes.
Needs the spark extra (`pip install 'pybroker[spark]'`) and Java 17+.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from pybroker.clients.spark import FORMAT, register

#: how often the wait looks at Ctrl-C (a signal only sets an event; see `wait_until_stopped`)
POLL_SECONDS = 1


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="broker host:port (default: %(default)s)")
    parser.add_argument("--source", required=True, help="topic to read events from")
    parser.add_argument("--sink", required=True, help="topic to write the counts to")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (keep it to restart)")
    parser.add_argument("--starting-offsets", default="earliest", choices=("earliest", "latest"),
                        help="where a new query starts (a restart always resumes; default: %(default)s)")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=10_000,
                        help="most records per micro-batch (default: %(default)s)")
    parser.add_argument("--watermark", default="2 minutes", help="how late events may be (default: %(default)s)")
    parser.add_argument("--available-now", action="store_true",
                        help="process what is in the topic now, then stop")
    return parser.parse_args(argv)


def windowed_counts(events: DataFrame, watermark: str) -> DataFrame:
    """Records per key and 1-minute window, as rows ready for the sink: the key, and the count as JSON."""
    counts = (events.withWatermark("timestamp", watermark)
              .groupBy(F.window("timestamp", "1 minute"), F.col("key"))
              .count())
    value = F.to_json(F.struct(F.col("window.start").alias("window_start"),
                               F.col("window.end").alias("window_end"),
                               F.col("key").cast("string").alias("key"),
                               F.col("count")))
    return counts.select(F.col("key"), value.alias("value"))


def start_pipeline(spark: SparkSession, args: argparse.Namespace) -> StreamingQuery:
    """Start the query; the caller waits for it (or stops it)."""
    register(spark)
    events = (spark.readStream.format(FORMAT)
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.source)
              .option("startingOffsets", args.starting_offsets)
              .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
              .load())
    writer = (windowed_counts(events, args.watermark).writeStream.format(FORMAT)
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("topic", args.sink)
              .option("checkpointLocation", args.checkpoint)
              .outputMode("append")
              .queryName(f"{args.source}-to-{args.sink}"))
    writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(processingTime="5 seconds")
    return writer.start()


def stop_on_signals(stop: threading.Event) -> dict[int, Any]:
    """Ctrl-C and SIGTERM only set `stop`, from before Spark starts until after it stopped.

    Ctrl-C must never land inside a call into the JVM: a KeyboardInterrupt raised while py4j waits on its
    socket breaks that connection, and Spark then prints dozens of lines of py4j tracebacks on the way out.
    So no signal raises here; the wait is a loop of short `awaitTermination(timeout)` calls that looks at
    the event. PySpark's SparkContext installs a SIGINT handler of its own (it cancels the jobs and raises
    KeyboardInterrupt), so this is called again once the session exists. Returns the previous handlers, for
    `restore_signals`.
    """
    def request_stop(signum: int, frame: object) -> None:
        stop.set()

    return {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}


def restore_signals(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def wait_until_stopped(query: StreamingQuery, stop: threading.Event) -> None:
    """Wait for the query to end, or for `stop` (set by a signal); then stop the query."""
    while not stop.is_set() and not query.awaitTermination(POLL_SECONDS):
        pass
    if query.isActive:
        print("stopping the query ...", file=sys.stderr)
        query.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    stop = threading.Event()
    previous = stop_on_signals(stop)
    try:
        spark = (SparkSession.builder.appName("pybroker-windowed-counts")
                 .config("spark.sql.session.timeZone", "UTC")
                 .config("spark.sql.shuffle.partitions", "4")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("WARN")
        stop_on_signals(stop)  # again: creating the SparkContext installed PySpark's own SIGINT handler
        try:
            if not stop.is_set():
                query = start_pipeline(spark, args)
                print(f"query {query.name} started; Ctrl-C stops it", file=sys.stderr, flush=True)
                wait_until_stopped(query, stop)
        finally:
            spark.stop()
    finally:
        restore_signals(previous)
    print("stopped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
