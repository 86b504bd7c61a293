"""The decoding modes on partitions written by storage's own `Log`: typed columns, evolution, the dead-letter
table, and exactly once for both tables across a kill between their commits.

No broker: the schemas come in the job as the broker's registry sends them (`broker/iceberg_schemas.py`),
values are encoded with fastavro and Confluent's prefix, the tables live in a real SQL catalog on SQLite.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from pybroker.clients.iceberg import worker as worker_module
from pybroker.clients.iceberg.worker import Worker
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage.log import Log
from tests.unit.storage.helpers import NOW, append, open_log

pytest.importorskip("pyiceberg")
fastavro = pytest.importorskip("fastavro")

V1 = {"type": "record", "name": "Click", "namespace": "shop", "fields": [
    {"name": "user", "type": "string"},
    {"name": "count", "type": "int"},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["VIEW", "BUY"]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "where", "type": ["null", {"type": "record", "name": "Place", "fields": [
        {"name": "city", "type": "string"}]}], "default": None},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
]}
#: v2: count widened to long, a new optional field
V2 = {**V1, "fields": [*(dict(f, type="long") if f["name"] == "count" else f for f in V1["fields"]),
                        {"name": "note", "type": ["null", "string"], "default": None}]}
#: a change Iceberg cannot follow (string to int): its records go to the dead-letter table
V3 = {"type": "record", "name": "Click", "namespace": "shop", "fields": [{"name": "user", "type": "int"}]}
SCHEMAS = {"1": {"type": "AVRO", "schema": json.dumps(V1), "refs": []},
           "2": {"type": "AVRO", "schema": json.dumps(V2), "refs": []},
           "3": {"type": "AVRO", "schema": json.dumps(V3), "refs": []},
           "4": {"type": "JSON", "schema": "{}", "refs": []}}


def _value(i: int, note: bool = False) -> dict[str, Any]:
    value: dict[str, Any] = {
        "user": f"u{i}", "count": i, "kind": "BUY" if i % 2 else "VIEW", "tags": ["a", f"t{i}"],
        "attrs": {"n": i}, "where": {"city": "Lyon"} if i % 3 == 0 else None,
        "day": datetime.date(2026, 1, 1 + i % 28),
        "at": datetime.datetime(2026, 1, 1, 0, 0, i % 60, tzinfo=datetime.UTC),
        "price": decimal.Decimal(f"{i}.25"), "id": f"00000000-0000-0000-0000-{i:012d}"}
    if note:
        value["note"] = f"n{i}"
    return value


def framed(schema_id: int, schema: dict[str, Any], value: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return struct.pack(">bI", 0, schema_id) + out.getvalue()


def _append_values(log: Log, values: list[bytes | None]) -> None:
    records = [Record(i, i, b"k", v) for i, v in enumerate(values)]
    append(log, bytearray(build_batch(records, base_timestamp=NOW)))


def _job(tmp_path: Path, end: int, mode: str = "value_schema_id_prefix", **topic: Any) -> dict[str, Any]:
    home = tmp_path / "iceberg"
    (home / "warehouse").mkdir(parents=True, exist_ok=True)
    return {"catalog": {"type": "sql", "uri": f"sqlite:///{home / 'catalog.db'}",
                        "warehouse": (home / "warehouse").as_uri(), "namespace": "pybroker", "s3": {}},
            "registry": True, "schemas": SCHEMAS,
            "topics": [{"topic": "t", "mode": mode, "interval_ms": 100, "spec": "(hour(timestamp))",
                        "invalid_action": "dlq_table", "dlq_suffix": "~dlq", **topic,
                        "partitions": [{"partition": 0, "dir": str(tmp_path / "t-0"), "end": end}]}]}


def _scan(table: Any) -> list[dict[str, Any]]:
    table.refresh()
    return sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["kafka"]["offset"])


def test_values_become_typed_columns_the_table_evolves_and_bad_ones_go_to_the_dead_letter_table(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _append_values(log, [framed(1, V1, _value(i)) for i in range(3)])                      # 0-2
    _append_values(log, [framed(2, V2, _value(i, note=True)) for i in range(3, 5)])        # 3-4
    _append_values(log, [b"not framed", b"\x00\x00\x00\x00\x01\xff", b"\x00\x00\x00\x00\x63ab",
                         framed(3, V3, {"user": 1}), b"\x00\x00\x00\x00\x04{}", None])    # 5-10
    log.flush()
    worker = Worker()
    status = worker.run(_job(tmp_path, log.last_stable_offset))["topics"]["t"]
    assert status["error"] is None, status
    assert status["rows_written"] == 6 and status["dlq_rows_written"] == 5, status
    sink = worker.sinks["t"]
    fields = {f.name: str(f.field_type) for f in sink.table.schema().fields}
    assert fields["count"] == "long" and fields["note"] == "string" and fields["day"] == "date"
    assert fields["at"] == "timestamptz" and fields["price"] == "decimal(9, 2)" and fields["kind"] == "string"
    rows = _scan(sink.table)
    assert [r["kafka"]["offset"] for r in rows] == [0, 1, 2, 3, 4, 10]
    assert rows[5]["user"] is None and rows[5]["kafka"]["key"] == b"k"  # a tombstone: a row, value columns null
    first, last = rows[0], rows[4]
    assert first["user"] == "u0" and first["count"] == 0 and first["kind"] == "VIEW" and first["note"] is None
    assert first["tags"] == ["a", "t0"] and dict(first["attrs"]) == {"n": 0} and first["where"] == {"city": "Lyon"}
    assert first["day"] == datetime.date(2026, 1, 1) and first["price"] == decimal.Decimal("0.25")
    assert first["id"] == "00000000-0000-0000-0000-000000000000"
    assert last["note"] == "n4" and last["count"] == 4 and last["where"] is None
    dead = _scan(sink.dlq)
    assert [r["kafka"]["offset"] for r in dead] == list(range(5, 10))
    assert dead[0]["value"] == b"not framed"
    reasons = [r["reason"] for r in dead]
    assert "magic byte" in reasons[0] and "does not decode" in reasons[1]
    assert "not in the broker's schema registry" in reasons[2] and "cannot evolve" in reasons[3]
    assert "has no table columns" in reasons[4]  # the JSON Schema {} names no type
    log.close()


def test_a_kill_between_the_dead_letter_commit_and_the_main_commit_writes_each_row_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(tmp_path / "t-0")
    _append_values(log, [framed(1, V1, _value(0)), b"junk", framed(1, V1, _value(2)), b"junk"])
    log.flush()
    commits = []
    real_commit = worker_module.commit

    def commit_then_die(table: Any, rows: Any, offsets: dict[int, int], topic_id: str | None = None) -> None:
        commits.append(table.name()[-1])
        if len(commits) == 2:  # the main table's commit: the process dies before it
            raise SystemExit("killed")
        real_commit(table, rows, offsets, topic_id)

    monkeypatch.setattr(worker_module, "commit", commit_then_die)
    with pytest.raises(SystemExit):
        Worker().run(_job(tmp_path, 4))
    assert commits == ["t~dlq", "t"]
    monkeypatch.setattr(worker_module, "commit", real_commit)
    _append_values(log, [b"junk", framed(1, V1, _value(5))])
    log.flush()
    worker = Worker()
    worker.run(_job(tmp_path, 6))
    assert [r["kafka"]["offset"] for r in _scan(worker.sinks["t"].table)] == [0, 2, 5]
    assert [r["kafka"]["offset"] for r in _scan(worker.sinks["t"].dlq)] == [1, 3, 4]
    log.close()


def test_latest_mode_decodes_unframed_values_by_the_subjects_latest_schema(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    plain = io.BytesIO()
    fastavro.schemaless_writer(plain, fastavro.parse_schema(V2), _value(7, note=True))
    _append_values(log, [plain.getvalue(), b"\x01"])
    log.flush()
    worker = Worker()
    status = worker.run(_job(tmp_path, 2, mode="value_schema_latest", latest_id=2))["topics"]["t"]
    assert status["rows_written"] == 1 and status["dlq_rows_written"] == 1, status
    assert _scan(worker.sinks["t"].table)[0]["note"] == "n7"
    log.close()


def test_drop_keeps_no_dead_letter_table_and_counts_what_it_dropped(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _append_values(log, [framed(1, V1, _value(0)), b"junk"])
    log.flush()
    worker = Worker()
    status = worker.run(_job(tmp_path, 2, invalid_action="drop"))["topics"]["t"]
    assert status["rows_written"] == 1 and status["dropped_records"] == 1 and "dlq_table" not in status
    assert worker.sinks["t"].dlq is None
    log.close()
