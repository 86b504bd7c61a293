"""The Iceberg worker on partitions written by storage's own `Log`: rolls, aborted transactions, ends, resumes.

No broker: the partition dirs are made with `Log` (as the broker makes them), the worker reads them from
the files and commits to a real SQL catalog on SQLite in the test's dir.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.clients.iceberg import worker as worker_module
from pybroker.clients.iceberg.segment_reader import index_position, read_chunk, segment_bases
from pybroker.clients.iceberg.tables import committed_offsets
from pybroker.clients.iceberg.worker import Worker
from pybroker.storage.log import Log
from tests.unit.storage.helpers import NOW, append, batch, open_log
from tests.unit.storage.test_transactions import marker, txn_batch

pytest.importorskip("pyiceberg")


def _job(tmp_path: Path, ends: dict[int, int], mode: str = "key_value") -> dict[str, Any]:
    home = tmp_path / "iceberg"
    (home / "warehouse").mkdir(parents=True, exist_ok=True)
    return {"catalog": {"type": "sql", "uri": f"sqlite:///{home / 'catalog.db'}",
                        "warehouse": (home / "warehouse").as_uri(), "namespace": "pybroker", "s3": {}},
            "topics": [{"topic": "t", "mode": mode, "interval_ms": 100, "spec": "(hour(timestamp))",
                        "partitions": [{"partition": p, "dir": str(tmp_path / f"t-{p}"), "end": end}
                                       for p, end in ends.items()]}]}


def _rows(worker: Worker) -> list[tuple[int, int, bytes | None]]:
    table = worker.sinks["t"].table
    table.refresh()
    rows = table.scan().to_arrow().to_pylist()
    return sorted((r["kafka"]["partition"], r["kafka"]["offset"], r["value"]) for r in rows)


def _small_segments(path: Path) -> Log:
    return open_log(path, segment_bytes=300, index_interval_bytes=1)


def test_rolled_segments_and_aborted_transactions_read_as_read_committed(tmp_path: Path) -> None:
    log = _small_segments(tmp_path / "t-0")
    for i in range(6):
        append(log, batch(3, value=b"plain%d-" % i))          # 0-17 over several segments
    append(log, txn_batch(7, 0))                              # 18-19, aborted below
    append(log, txn_batch(8, 0))                              # 20-21, committed
    marker(log, 7, commit=False)                              # 22
    marker(log, 8, commit=True)                               # 23
    append(log, batch(2, value=b"after"))                     # 24-25
    end = log.last_stable_offset
    log.flush()
    assert len(segment_bases(tmp_path / "t-0")) > 2 and end == 26

    worker = Worker()
    status = worker.run(_job(tmp_path, {0: end}))["topics"]["t"]
    assert status["error"] is None, status
    rows = _rows(worker)
    offsets = [o for _, o, _ in rows]
    assert offsets == [*range(18), 20, 21, 24, 25]
    assert status["offsets"] == {"0": 26} and status["total_records"] == 22
    log.close()


def test_the_end_given_is_a_hard_stop_even_inside_a_batch_and_a_new_worker_resumes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(5, value=b"a"))                         # 0-4
    append(log, batch(5, value=b"b"))                         # 5-9
    log.flush()
    first = Worker()
    first.run(_job(tmp_path, {0: 7}))                         # 7 is inside the second batch
    assert [o for _, o, _ in _rows(first)] == list(range(7))
    assert committed_offsets(first.sinks["t"].table) == {0: 7}

    second = Worker()                                         # a restart: offsets from the snapshot
    second.run(_job(tmp_path, {0: 10}))
    assert [o for _, o, _ in _rows(second)] == list(range(10))
    log.close()


def test_retention_past_the_position_skips_forward_and_says_so(tmp_path: Path) -> None:
    log = _small_segments(tmp_path / "t-0")
    for _ in range(6):
        append(log, batch(3))
    log.flush()
    bases = segment_bases(tmp_path / "t-0")
    (tmp_path / "t-0" / f"{bases[0]:020d}.log").unlink()      # as retention removes a segment
    chunk = read_chunk(tmp_path / "t-0", 0, 18)
    assert chunk is not None and chunk.skipped_to == bases[1]
    worker = Worker()
    status = worker.run(_job(tmp_path, {0: 18}))["topics"]["t"]
    assert status["skipped_offsets"] == bases[1] and status["offsets"] == {"0": 18}
    log.close()


def test_a_read_starts_at_the_batch_holding_the_offset_though_the_index_lags(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from pybroker.clients.iceberg import segment_reader

    monkeypatch.setattr(segment_reader, "SEEK_BYTES", 150)    # several steps of the header walk
    log = open_log(tmp_path / "t-0", index_interval_bytes=1)
    for _ in range(20):
        append(log, batch(2))
    log.flush()
    for offset in (0, 1, 7, 39):
        chunk = read_chunk(tmp_path / "t-0", offset, 40)
        assert chunk is not None
        first = next(iter(segment_reader.iter_batches(chunk.data)))[1]
        assert first.base_offset <= offset <= first.base_offset + first.last_offset_delta
    assert index_position(tmp_path / "t-0", 0, 0) == 0
    log.close()


def test_a_mode_that_needs_a_registry_is_a_status_not_a_crash(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(1))
    log.flush()
    status = Worker().run(_job(tmp_path, {0: 1}, mode="value_schema_id_prefix"))["topics"]["t"]
    assert "schema registry" in status["error"]
    log.close()


def test_a_round_takes_at_most_its_budget_and_says_it_is_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module, "ROUND_BYTES", 200)  # checked between reads: a round may pass it by one read
    monkeypatch.setattr(worker_module, "READ_BYTES", 300)
    log = open_log(tmp_path / "t-0")
    for _ in range(10):
        append(log, batch(3, value=b"x" * 50))
    log.flush()
    worker = Worker()
    answer = worker.run(_job(tmp_path, {0: 30}))
    assert answer["wait_ms"] == 0 and 0 < answer["topics"]["t"]["offsets"]["0"] < 30
    for _ in range(30):
        answer = worker.run(_job(tmp_path, {0: 30}))
        if answer["topics"]["t"]["offsets"]["0"] == 30:
            break
    assert [o for _, o, _ in _rows(worker)] == list(range(30))
    assert NOW  # the batches' timestamps: the table's hour partitions come from them
    log.close()


@settings(max_examples=200)
@given(garbage=st.binary(max_size=400), start=st.integers(0, 50), cut=st.integers(0, 400))
def test_a_segment_of_any_bytes_is_read_or_refused_by_name_never_a_crash(tmp_path_factory: pytest.TempPathFactory,
                                                                        garbage: bytes, start: int, cut: int) -> None:
    """The reader's fuzz target: a valid batch followed by anything, cut anywhere, with an index of anything."""
    from pybroker.clients.iceberg.worker import read_partition
    from pybroker.clients.spark.arrow_records import ColumnBuilder
    from pybroker.clients.spark.record_set import CorruptRecords

    directory = tmp_path_factory.mktemp("fuzz") / "t-0"
    directory.mkdir()
    data = (bytes(batch(3)) + garbage)[: max(cut, 1)]
    (directory / f"{0:020d}.log").write_bytes(data)
    (directory / f"{0:020d}.index").write_bytes(garbage[:64])
    (directory / f"{0:020d}.txnindex").write_bytes(garbage[:68])
    try:
        position, _ = read_partition(directory, start, 60, ColumnBuilder(True), 1 << 20)
    except CorruptRecords:
        return
    assert start <= position <= 60


def test_a_topic_made_again_under_the_same_name_is_read_from_its_start(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(3):
        append(log, batch(2))
    log.flush()
    job = _job(tmp_path, {0: 6})
    job["topics"][0]["topic_id"] = "old"
    worker = Worker()
    worker.run(job)
    assert committed_offsets(worker.sinks["t"].table, "old") == {0: 6}
    log.close()
    for leftover in (tmp_path / "t-0").iterdir():
        leftover.unlink()
    log = open_log(tmp_path / "t-0")                          # the new topic: offsets from 0 again
    append(log, batch(2, value=b"new"))
    log.flush()
    job = _job(tmp_path, {0: 2})
    job["topics"][0]["topic_id"] = "new"
    status = worker.run(job)["topics"]["t"]
    assert status["offsets"] == {"0": 2} and status["total_records"] == 8
    log.close()
