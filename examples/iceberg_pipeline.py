"""A batch job on an Iceberg topic with PySpark: the same question asked of the topic's table and of the topic.

It reads the `--topic` twice, once as the Iceberg table pybroker keeps of it (the Parquet files of the
table's current snapshot, `pybroker.clients.iceberg.spark_read`) and once from the broker with the
pybroker Spark connector (`format("pybroker")`, read_committed), counts the records per key in each, and
prints both answers with the time each read took. The two agree on every key the table holds; the
table may lag the topic by one `iceberg.commit.interval.ms`, so the topic is read up to the offsets the
table covers (its newest snapshot records them).

Against the broker that `make run` starts, for a topic made with `iceberg.mode=key_value`:

    .venv/bin/python examples/iceberg_pipeline.py --bootstrap 127.0.0.1:9092 --log-dir ./data --topic events

`--log-dir` finds the broker's default catalog (the SQLite file and warehouse under `<log dir>/iceberg`);
`--catalog-uri` and `--warehouse` name another. Needs the spark and iceberg extras and Java 17+.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pybroker.clients.iceberg.spark_read import read_table
from pybroker.clients.iceberg.tables import OFFSETS_PROPERTY, committed_offsets
from pybroker.clients.spark import FORMAT, register


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="broker host:port (default: %(default)s)")
    parser.add_argument("--topic", required=True, help="an Iceberg topic (iceberg.mode=key_value)")
    parser.add_argument("--log-dir", type=Path, help="the broker's first log dir (its default catalog)")
    parser.add_argument("--catalog-uri", help="the SQL catalog's SQLAlchemy URL (instead of --log-dir)")
    parser.add_argument("--warehouse", help="the warehouse URL (instead of --log-dir)")
    parser.add_argument("--namespace", default="pybroker", help="iceberg.catalog.namespace (default: %(default)s)")
    return parser.parse_args(argv)


def open_table(args: argparse.Namespace) -> Any:
    from pyiceberg.catalog import load_catalog

    if args.catalog_uri is None:
        if args.log_dir is None:
            raise SystemExit("give --log-dir, or --catalog-uri and --warehouse")
        home = args.log_dir.absolute() / "iceberg"
        args.catalog_uri, args.warehouse = f"sqlite:///{home / 'catalog.db'}", (home / "warehouse").as_uri()
    catalog = load_catalog("pybroker", type="sql", uri=args.catalog_uri, warehouse=args.warehouse)
    return catalog.load_table((args.namespace, args.topic))


def counts_per_key(rows: DataFrame, key: Any) -> dict[str, int]:
    return {(r["key"] or b"").decode(errors="replace"): r["count"]
            for r in rows.groupBy(key.alias("key")).count().collect()}


def compare(spark: SparkSession, args: argparse.Namespace) -> dict[str, Any]:
    """Both reads and their answers: the table's counts, the topic's, and the seconds each took."""
    table = open_table(args)
    covered = committed_offsets(table)  # partition -> next offset, as of the table's newest snapshot
    started = time.monotonic()
    from_table = counts_per_key(read_table(spark, table), F.col("kafka.key"))
    table_s = time.monotonic() - started
    ending = json.dumps({args.topic: {str(p): o for p, o in covered.items()}})
    started = time.monotonic()
    topic = (spark.read.format(FORMAT).option("kafka.bootstrap.servers", args.bootstrap)
             .option("subscribe", args.topic).option("startingOffsets", "earliest")
             .option("endingOffsets", ending).load())
    from_topic = counts_per_key(topic, F.col("key"))
    topic_s = time.monotonic() - started
    return {"table": from_table, "topic": from_topic, "table_seconds": table_s, "topic_seconds": topic_s,
            "snapshot": table.current_snapshot().snapshot_id if table.current_snapshot() else None,
            "offsets_property": OFFSETS_PROPERTY, "covered": covered}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    spark = (SparkSession.builder.appName("pybroker-iceberg-compare")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    register(spark)
    try:
        result = compare(spark, args)
    finally:
        spark.stop()
    same = result["table"] == result["topic"]
    print(f"table: {sum(result['table'].values())} rows in {result['table_seconds']:.2f} s; "
          f"topic: {sum(result['topic'].values())} records in {result['topic_seconds']:.2f} s; "
          f"per-key counts {'agree' if same else 'DIFFER'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
