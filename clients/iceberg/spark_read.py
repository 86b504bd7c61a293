"""Spark reads a topic's Iceberg table: the Parquet data files of its current snapshot, planned by pyiceberg.

Why not Iceberg's own Spark runtime: Maven Central serves `iceberg-spark-runtime-<spark>_2.13` for Spark
up to 4.1 (Iceberg 1.12.0), and the 4.1 runtime does not load in the Spark 4.3 this project installs (an
IncompatibleClassChangeError on Spark's CatalogManager). A Spark 4.1 session can use that runtime and read
the table by its metadata file (`spark.read.format("iceberg").load(table.metadata_location)`); on a newer
Spark, this module is what a user does instead: pyiceberg plans the scan (the snapshot's manifests give the
data files, pruned by a row filter on the partition column), and Spark reads those files as Parquet in
parallel. That is exact for the tables pybroker writes, which are append-only (no delete files;
`data_files` refuses a table that has them).

Runs in the Spark driver; needs the iceberg and spark extras.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyspark.sql import DataFrame, SparkSession


class HasDeletes(ValueError):
    """The table has delete files: reading its data files alone would show deleted rows."""


def data_files(table: Table, row_filter: Any = None) -> list[str]:
    """The data files of the table's current snapshot (those that may hold rows matching `row_filter`)."""
    scan = table.scan(row_filter=row_filter) if row_filter is not None else table.scan()
    files = []
    for task in scan.plan_files():
        if task.delete_files:
            raise HasDeletes(f"{'.'.join(table.name())} has delete files; read it with Iceberg's Spark runtime")
        files.append(task.file.file_path)
    return files


def read_table(spark: SparkSession, table: Table, row_filter: Any = None) -> DataFrame:
    """The table's rows as a Spark DataFrame (`kafka` struct and `value`, as the table's schema has them)."""
    files = data_files(table, row_filter)
    if not files:
        from pyspark.sql.pandas.types import from_arrow_schema

        return spark.createDataFrame([], from_arrow_schema(table.schema().as_arrow()))
    return spark.read.parquet(*files)
