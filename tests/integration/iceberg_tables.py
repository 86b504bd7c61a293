"""Reading a pybroker's Iceberg tables from the tests: pyiceberg's catalog, DuckDB, and waiting for rows.

The catalog is the broker's default: the SQLite file and the warehouse in its first log dir, under the
catalog name `pybroker` (a SQL catalog stores that name with each table, so a reader must use it too).
DuckDB reads the tables with its iceberg extension, loaded from the `duckdb-extension-iceberg` wheel
(DuckDB cannot download extensions here, and a wheel pins the version to DuckDB's own).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

TABLE_TIMEOUT_S = 120.0


def broker_catalog(log_dir: Path, **extra: str) -> Any:
    """The broker's catalog, once the broker made its dir (at its first Iceberg topic's first round)."""
    from pyiceberg.catalog import load_catalog

    home = Path(log_dir) / "iceberg"
    deadline = time.monotonic() + TABLE_TIMEOUT_S
    while not home.is_dir():
        assert time.monotonic() < deadline, f"the broker made no {home} in {TABLE_TIMEOUT_S:.0f} s"
        time.sleep(0.1)
    props = {"type": "sql", "uri": f"sqlite:///{home / 'catalog.db'}", "warehouse": (home / "warehouse").as_uri(),
             **extra}
    return load_catalog("pybroker", **props)


def duckdb_with_iceberg() -> Any:
    """A DuckDB connection with the iceberg extension (and the avro one it reads manifests with) loaded."""
    import duckdb
    import duckdb_extension_avro
    import duckdb_extension_iceberg

    con = duckdb.connect()
    for package in (duckdb_extension_avro, duckdb_extension_iceberg):
        path = next(Path(package.__file__).parent.glob(f"extensions/v{duckdb.__version__}/*.duckdb_extension"))
        con.execute(f"LOAD '{path}'")
    return con


def wait_rows(catalog: Any, identifier: tuple[str, str], rows: int, timeout_s: float = TABLE_TIMEOUT_S) -> Any:
    """The table once its current snapshot holds at least `rows` rows (polled; fails at the deadline)."""
    from pyiceberg.exceptions import NoSuchTableError

    deadline = time.monotonic() + timeout_s
    seen = -1
    while time.monotonic() < deadline:
        try:
            table = catalog.load_table(identifier)
        except NoSuchTableError:
            time.sleep(0.2)
            continue
        snapshot = table.current_snapshot()
        seen = int(snapshot.summary.additional_properties.get("total-records", 0)) if snapshot else 0
        if seen >= rows:
            return table
        time.sleep(0.2)
    raise AssertionError(f"{identifier} holds {seen} rows after {timeout_s:.0f} s, expected {rows}")


def coordinates(table: Any) -> list[tuple[int, int]]:
    """(partition, offset) of every row of the table's current snapshot."""
    kafka = table.scan(selected_fields=("kafka.partition", "kafka.offset")).to_arrow()["kafka"].combine_chunks()
    return list(zip(kafka.field("partition").to_pylist(), kafka.field("offset").to_pylist(), strict=True))
