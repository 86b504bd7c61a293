"""The catalog, the topics' tables, and the offsets each snapshot covers (the exactly-once record).

Exactly once: every snapshot the worker commits carries, in its summary, the property `pybroker.offsets`:
the JSON map partition -> next offset to read, for every partition of the topic, as of that snapshot.
The snapshot and its offsets are one catalog commit (a compare-and-swap of the table's metadata
pointer), so after a kill -9 or a power cut the worker reads the offsets of the newest snapshot that has
them and goes on from there: rows written to data files but never committed are not in any snapshot (they
are orphan files, never read), and no committed row is read twice. A snapshot made by someone else
(a compaction, a schema change) has no such property; the walk goes back through its parents.

Catalogs (`iceberg.catalog.type`): `sql`, by default a SQLite file in the first log dir; `rest`, an
Iceberg REST catalog. The warehouse is a file:// path or an s3:// URL (S3-compatible object storage,
with the endpoint and keys of `iceberg.s3.*`; the secret comes in the job, never on a command line). A
file warehouse is written through `durable_io.DurableFileIO`: each file fsynced before the commit that
names it, so a power cut leaves no snapshot naming a file it took.

Called by the worker process's one thread.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from pybroker.clients.iceberg.columns import key_value_schema, partition_spec

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

OFFSETS_PROPERTY = "pybroker.offsets"
#: the topic id the offsets are of (a topic deleted and made again under the same name starts again at 0)
TOPIC_ID_PROPERTY = "pybroker.topic-id"
#: no retry of a commit that lost a race: pyiceberg would append the same rows on top of the winner's
#: snapshot (a second writer, e.g. the worker of a broker killed a moment ago); the worker reloads the
#: offsets from the new snapshot instead (`Worker`)
TABLE_PROPERTIES = {"write.parquet.compression-codec": "zstd", "commit.retry.num-retries": "0"}
CATALOG_NAME = "pybroker"


def catalog_properties(settings: dict[str, Any]) -> dict[str, str]:
    """pyiceberg's catalog properties from the job's catalog settings (plain values from the broker)."""
    props: dict[str, str] = {"type": settings["type"], "uri": settings["uri"], "warehouse": settings["warehouse"]}
    if settings["type"] == "sql":
        props["init_catalog_tables"] = "true"
    if settings["warehouse"].startswith(("file:", "/")):  # files fsynced before the commit that names them
        props["py-io-impl"] = "pybroker.clients.iceberg.durable_io.DurableFileIO"
    s3 = settings.get("s3") or {}
    for ours, theirs in (("endpoint", "s3.endpoint"), ("region", "s3.region"),
                         ("access_key_id", "s3.access-key-id"), ("secret_access_key", "s3.secret-access-key")):
        if s3.get(ours):
            props[theirs] = s3[ours]
    return props


def load_catalog(settings: dict[str, Any]) -> Catalog:
    from pyiceberg.catalog import load_catalog as pyiceberg_load_catalog

    catalog = pyiceberg_load_catalog(CATALOG_NAME, **catalog_properties(settings))
    if settings["type"] == "sql" and settings["uri"].startswith("sqlite:///"):
        # SQLite fsyncs its commits, not the directory entry of the database file it just made
        from pybroker.clients.iceberg.durable_io import fsync_path

        fsync_path(os.path.dirname(settings["uri"].removeprefix("sqlite:///")) or ".")
    return catalog


def open_table(catalog: Catalog, namespace: str, topic: str, spec_text: str, schema: Schema | None = None) -> Table:
    """The table `topic` (a topic's, or its dead-letter table), made (with its namespace) when missing. A tuple
    identifier: a topic name may hold dots. `schema` is the table's first schema: key_value's by default;
    the decoding modes start with the Kafka coordinates alone (`coordinates_schema`) and add the value's
    columns as schemas come (`evolve`)."""
    catalog.create_namespace_if_not_exists(namespace)
    schema = schema or key_value_schema()
    return catalog.create_table_if_not_exists((namespace, topic), schema=schema,
                                              partition_spec=partition_spec(schema, spec_text),
                                              properties=TABLE_PROPERTIES)


def coordinates_schema() -> Schema:
    """The decoding modes' first schema: the Kafka coordinates, no value column yet."""
    from pyiceberg.schema import Schema

    return Schema(key_value_schema().find_field("kafka"))


def evolve(table: Table, fields: pa.Schema) -> None:
    """Give `table` the value columns `fields` (pyiceberg's `union_by_name`: new columns added as optional,
    types widened as Iceberg allows: int to long, float to double, a decimal's precision). Raises
    pyiceberg's ValidationError (or ValueError) for a change Iceberg does not allow; nothing changes then.
    A schema that adds nothing commits nothing."""
    current = table.schema().as_arrow()
    if all(f.name in current.names and current.field(f.name).type.equals(f.type, check_metadata=False)
           for f in fields):
        return
    with table.update_schema() as update:
        update.union_by_name(fields)


def committed_offsets(table: Table, topic_id: str | None = None) -> dict[int, int]:
    """partition -> next offset, from the newest snapshot of the current branch that records them ({} for none).

    A snapshot written for another topic of the same name (deleted and made again: `TOPIC_ID_PROPERTY`
    differs from `topic_id`) covers nothing of this one: the new topic is read from its start."""
    snapshot = table.current_snapshot()
    while snapshot is not None:
        properties = snapshot.summary.additional_properties if snapshot.summary else {}
        text = properties.get(OFFSETS_PROPERTY)
        if text is not None:
            recorded = properties.get(TOPIC_ID_PROPERTY)
            if topic_id is not None and recorded is not None and recorded != topic_id:
                return {}
            return {int(p): int(o) for p, o in json.loads(text).items()}
        snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
    return {}


def commit(table: Table, rows: pa.Table, offsets: dict[int, int], topic_id: str | None = None) -> None:
    """Append `rows` as one snapshot that records `offsets` (all of the topic's partitions) and the topic id."""
    properties = {OFFSETS_PROPERTY: json.dumps({str(p): o for p, o in sorted(offsets.items())})}
    if topic_id is not None:
        properties[TOPIC_ID_PROPERTY] = topic_id
    table.append(rows, snapshot_properties=properties)
