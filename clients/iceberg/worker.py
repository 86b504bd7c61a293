"""The Iceberg worker process: committed records of Iceberg topics into their tables, one round per job.

Run by the broker as `python -m pybroker.clients.iceberg.worker` (`broker/iceberg_tables.py`), niced, off
the broker's interpreter lock. It speaks JSON lines: it says `{"ready": true}`, then for each job line
(the catalog settings and, per Iceberg topic, its settings and each partition's dir and readable end)
answers one status line. A topic is committed when its `iceberg.commit.interval.ms` has passed since its
last commit, or at once while it is behind by more than one round's budget (`ROUND_BYTES`). Each
commit is one snapshot holding the rows of every partition read and the offsets it covers
(`tables.commit`), so a kill -9 at any point loses no row and writes none twice.

It exits when its input closes (the broker stopped or died) or on `{"exit": true}`. Nothing it meets in a
topic stops the others: the error is that topic's status, and the next round tries again. Its standard
output is the protocol's alone (fd 1 is pointed at stderr, so a library's print cannot break a line).

One thread; the broker never imports this module.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pyiceberg.exceptions import CommitFailedException

from pybroker.clients.iceberg.columns import key_value_rows, key_value_schema
from pybroker.clients.iceberg.decoded_rows import dlq_schema, in_range, split
from pybroker.clients.iceberg.segment_reader import READ_BYTES, read_chunk
from pybroker.clients.iceberg.tables import (
    commit,
    committed_offsets,
    coordinates_schema,
    evolve,
    load_catalog,
    open_table,
)
from pybroker.clients.iceberg.value_decoders import DECODING_MODES, RegistrySchemas, UnservedMode, check_mode
from pybroker.clients.spark.arrow_records import ColumnBuilder
from pybroker.clients.spark.record_set import CorruptRecords, walk

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

#: record bytes one topic's commit takes at most (its memory); more waiting means commit again at once
ROUND_BYTES = 64 * 1024 * 1024
#: a batch larger than the read size is read with a doubled size, up to this
MAX_READ_BYTES = 256 * 1024 * 1024
#: the longest the broker is told to wait before the next job when nothing is due
IDLE_WAIT_MS = 1_000


@dataclass
class TopicSink:
    """One topic's table and how far it is filled."""

    table: Table
    offsets: dict[int, int]
    last_commit: float = 0.0  # monotonic seconds; 0: never in this process
    rows_written: int = 0
    skipped: int = 0  # offsets that retention removed before they were read
    last_commit_ms: int | None = None
    error: str | None = None
    behind: bool = False
    ends: dict[int, int] = field(default_factory=dict)
    topic_id: str | None = None
    mode: str = "key_value"
    #: the decoding modes' dead-letter table (None: key_value, or iceberg.invalid.record.action=drop)
    dlq: Table | None = None
    #: the offsets the dead-letter table's newest snapshot covers: a row below them is in it already (its
    #: commit went before the main table's, and a kill between the two must not write it twice)
    dlq_offsets: dict[int, int] = field(default_factory=dict)
    dlq_rows_written: int = 0
    dropped: int = 0  # records that did not decode, with iceberg.invalid.record.action=drop


def read_partition(directory: Path, start: int, end: int, builder: Any, budget: int) -> tuple[int, int]:
    """Add the committed records of [start, end) to `builder`, until `budget` bytes of rows; (next offset, skipped)."""
    position, skipped, max_bytes = start, 0, READ_BYTES
    name = f"{directory.name} offset {start}"
    while position < end and builder.size < budget:
        chunk = read_chunk(directory, position, end, max_bytes)
        if chunk is None:
            break
        if chunk.skipped_to is not None:
            skipped += chunk.skipped_to - position
            position = chunk.skipped_to
        walked = walk(chunk.data, builder, name=name, position=position, end=end, read_committed=True,
                      aborted=chunk.aborted)
        if walked.position > position:
            position = min(walked.position, end)  # a batch cut by the end is read again from there next time
        elif chunk.segment_end is not None:
            position = max(position, chunk.segment_end)
        elif not walked.batches and len(chunk.data) >= max_bytes and max_bytes < MAX_READ_BYTES:
            max_bytes *= 2
        else:
            break
    return position, skipped


class Worker:
    """The state kept between jobs: the catalog and one sink per topic."""

    def __init__(self) -> None:
        self.catalog: Catalog | None = None
        self.catalog_settings: dict[str, Any] | None = None
        self.sinks: dict[str, TopicSink] = {}
        self.schemas = RegistrySchemas()

    def _catalog(self, settings: dict[str, Any]) -> Catalog:
        if self.catalog is None or settings != self.catalog_settings:
            self.catalog, self.catalog_settings, self.sinks = load_catalog(settings), settings, {}
        return self.catalog

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        """One round: each topic that is due is read and committed; the status of every topic."""
        wait_ms = IDLE_WAIT_MS
        status: dict[str, Any] = {}
        now = time.monotonic()
        self.schemas.add(job.get("schemas") or {})
        for topic in job["topics"]:
            name = topic["topic"]
            try:
                check_mode(topic["mode"], bool(job.get("registry")))
                sink = self._sink(job["catalog"], topic)
                due_in = sink.last_commit + topic["interval_ms"] / 1000 - now
                if sink.behind or due_in <= 0:
                    self._fill(sink, topic)
                    due_in = topic["interval_ms"] / 1000
                sink.error = None
                wait_ms = min(wait_ms, 0 if sink.behind else int(due_in * 1000))
            except CommitFailedException as exc:  # another writer committed first: start again from its offsets
                self.sinks.pop(name, None)
                status[name] = {"mode": topic["mode"], "error": f"commit lost a race, reloading: {exc}"}
                wait_ms = 0
                continue
            except UnservedMode as exc:
                status[name] = {"mode": topic["mode"], "error": str(exc)}
                continue
            except Exception as exc:  # this topic's trouble is its status; the others go on
                if name in self.sinks:
                    self.sinks[name].error = f"{type(exc).__name__}: {exc}"
                else:
                    status[name] = {"mode": topic["mode"], "error": f"{type(exc).__name__}: {exc}"}
                    continue
            status[name] = self._status(self.sinks[name], topic)
        return {"wait_ms": max(wait_ms, 0), "topics": status}

    def _sink(self, catalog_settings: dict[str, Any], topic: dict[str, Any]) -> TopicSink:
        catalog = self._catalog(catalog_settings)
        sink = self.sinks.get(topic["topic"])
        keeps_dead = topic["mode"] in DECODING_MODES and topic.get("invalid_action", "dlq_table") == "dlq_table"
        if sink is not None and (sink.topic_id != topic.get("topic_id")  # deleted and made again meanwhile
                                 or sink.mode != topic["mode"] or (sink.dlq is not None) != keeps_dead):
            sink = None
        if sink is None:
            namespace, topic_id = catalog_settings["namespace"], topic.get("topic_id")
            decoding = topic["mode"] in DECODING_MODES
            table = open_table(catalog, namespace, topic["topic"], topic["spec"],
                               coordinates_schema() if decoding else None)
            sink = TopicSink(table, committed_offsets(table, topic_id), topic_id=topic_id, mode=topic["mode"])
            if keeps_dead:
                sink.dlq = open_table(catalog, namespace, topic["topic"] + topic.get("dlq_suffix", "~dlq"),
                                      topic["spec"], dlq_schema())
                sink.dlq_offsets = committed_offsets(sink.dlq, topic_id)
            self.sinks[topic["topic"]] = sink
        return sink

    def _fill(self, sink: TopicSink, topic: dict[str, Any]) -> None:
        import pyarrow as pa

        # the decoding modes read the raw rows first (the dead-letter table keeps them); they decode after
        schema = (key_value_schema() if sink.mode in DECODING_MODES else sink.table.schema()).as_arrow()
        offsets = dict(sink.offsets)
        pieces = []
        used = 0
        sink.behind = False
        for part in topic["partitions"]:
            partition, end = int(part["partition"]), int(part["end"])
            sink.ends[partition] = end
            start = offsets.get(partition, 0)
            if start >= end or used >= ROUND_BYTES:
                sink.behind = sink.behind or start < end
                continue
            builder = ColumnBuilder(True)
            try:
                position, skipped = read_partition(Path(part["dir"]), start, end, builder, ROUND_BYTES - used)
            except CorruptRecords:
                raise
            used += builder.size
            sink.skipped += skipped
            if builder.rows:
                pieces.append(key_value_rows(builder.finish(), partition, schema))
            offsets[partition] = position
            sink.behind = sink.behind or position < end
        if pieces and sink.mode in DECODING_MODES:
            self._commit_decoded(sink, topic, pa.concat_tables(pieces), offsets)
        elif pieces:
            rows = pa.concat_tables(pieces)
            commit(sink.table, rows, offsets, sink.topic_id)
            sink.rows_written += rows.num_rows
            sink.last_commit_ms = int(time.time() * 1000)
        sink.offsets = offsets  # offsets that only passed markers or aborted records go with the next commit
        sink.last_commit = time.monotonic()

    def _commit_decoded(self, sink: TopicSink, topic: dict[str, Any], rows: Any, offsets: dict[int, int]) -> None:
        """Decode the values; the dead-letter rows are committed first (with the offsets), then the typed
        rows, the table first evolved to each schema's columns. A schema the table cannot take (a change
        Iceberg does not allow) sends its rows to the dead-letter table with the reason."""
        import pyarrow as pa

        parts = split(rows, sink.mode, self.schemas, topic.get("latest_id"), sink.dlq is not None)
        typed = []
        dead = [parts.dead] if parts.dead is not None else []
        for schema_id, (found, group, indexes) in parts.decoded.items():
            try:
                evolve(sink.table, found.arrow_fields)
            except Exception as exc:  # pyiceberg's ValidationError, ValueError, ...
                reason = f"schema id {schema_id} cannot evolve the table: {type(exc).__name__}: {exc}"[:500]
                if sink.dlq is not None:
                    raw = rows.take(indexes)
                    dead.append(raw.append_column("reason", pa.array([reason] * raw.num_rows, pa.string())))
                continue
            typed.append(group)
        dead_rows = in_range(pa.concat_tables(dead), sink.dlq_offsets) if dead else None
        if sink.dlq is not None and dead_rows is not None and dead_rows.num_rows:
            commit(sink.dlq, dead_rows, offsets, sink.topic_id)
            sink.dlq_offsets = dict(offsets)
            sink.dlq_rows_written += dead_rows.num_rows
        elif sink.dlq is None:
            sink.dropped += rows.num_rows - sum(g.num_rows for g in typed)
        if typed:  # none: the offsets go with the next commit (the dead-letter table's own keep its rows once)
            good = pa.concat_tables(typed, promote_options="permissive")
            commit(sink.table, good, offsets, sink.topic_id)
            sink.rows_written += good.num_rows
        sink.last_commit_ms = int(time.time() * 1000)

    @staticmethod
    def _status(sink: TopicSink, topic: dict[str, Any]) -> dict[str, Any]:
        snapshot = sink.table.current_snapshot()
        total = snapshot.summary.additional_properties.get("total-records") if snapshot and snapshot.summary else None
        lag = sum(max(end - sink.offsets.get(p, 0), 0) for p, end in sink.ends.items())
        return {"mode": topic["mode"], "table": ".".join(sink.table.name()), "rows_written": sink.rows_written,
                "total_records": int(total) if total is not None else 0,
                "snapshot_id": snapshot.snapshot_id if snapshot else None, "last_commit_ms": sink.last_commit_ms,
                "offsets": {str(p): o for p, o in sorted(sink.offsets.items())}, "lag_offsets": lag,
                "skipped_offsets": sink.skipped, "error": sink.error,
                **({"dlq_table": ".".join(sink.dlq.name()), "dlq_rows_written": sink.dlq_rows_written}
                   if sink.dlq is not None else {}),
                **({"dropped_records": sink.dropped} if sink.mode in DECODING_MODES and sink.dlq is None else {})}


def _send(out: IO[bytes], message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def _die_with_parent() -> None:
    """Linux: be killed when the broker dies, so a restarted broker's worker is the table's only writer
    (a commit cut short by the kill is no snapshot; `Worker` handles a race lost anyway)."""
    with contextlib.suppress(Exception):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
        if os.getppid() == 1:  # the parent died before prctl
            os._exit(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pybroker.clients.iceberg.worker")
    parser.add_argument("--nice", type=int, default=0)
    args = parser.parse_args(argv)
    _die_with_parent()
    with contextlib.suppress(OSError):
        os.nice(args.nice)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stdout is the protocol's alone
    sys.stdout = sys.stderr
    worker = Worker()
    _send(out, {"ready": True})
    for line in sys.stdin.buffer:
        job = json.loads(line)
        if job.get("exit"):
            break
        _send(out, worker.run(job))
    return 0


if __name__ == "__main__":
    sys.exit(main())
