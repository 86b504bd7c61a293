"""dump-log and check-log on a log with transactions: markers shown as kafka-dump-log shows them, the
`.txnindex` dumped and checked."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from click.testing import CliRunner

from pybroker.clients.admin import commands
from pybroker.protocol.records.batch import parse_header
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage.log import Log
from pybroker.storage.transaction_index import ENTRY
from pybroker.storage.verify import check_log_dir
from tests.unit.storage.helpers import NOW, open_log


def _txn_log(path: Path) -> Log:
    log = open_log(path)
    data = bytearray(build_batch([Record(0, 0, b"k", b"v")], base_timestamp=NOW, producer_id=7, producer_epoch=2,
                                 base_sequence=0, is_transactional=True))
    log.append(data, [(0, parse_header(data))], now_ms=NOW)  # 0
    log.append_marker(7, 2, 5, False, now_ms=NOW)              # 1: abort, coordinator epoch 5
    data = bytearray(build_batch([Record(0, 0, b"k", b"w")], base_timestamp=NOW, producer_id=7, producer_epoch=2,
                                 base_sequence=1, is_transactional=True))
    log.append(data, [(0, parse_header(data))], now_ms=NOW)  # 2
    log.append_marker(7, 2, 5, True, now_ms=NOW)               # 3: commit
    return log


def test_dump_log_shows_markers_like_kafka_dump_log(tmp_path: Path) -> None:
    _txn_log(tmp_path / "t-0").close()
    segment = tmp_path / "t-0" / f"{0:020d}.log"
    result = CliRunner().invoke(commands.dump_log, [str(segment), "--print-records"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    batches = [line for line in lines if line.startswith("baseOffset")]
    assert all("isTransactional: true" in line for line in batches)
    assert ["isControl: true" in line for line in batches] == [False, True, False, True]
    markers = [line for line in lines if "endTxnMarker" in line]
    assert [m.split("endTxnMarker: ")[1] for m in markers] == ["ABORT coordinatorEpoch: 5",
                                                                "COMMIT coordinatorEpoch: 5"]
    assert all("payload" not in m for m in markers)
    as_json = CliRunner().invoke(commands.dump_log, [str(segment), "--print-records", "--json"])
    rows = [json.loads(line) for line in as_json.output.splitlines()]
    assert rows[3]["records"][0]["endTxnMarker"] == "COMMIT" and rows[3]["records"][0]["coordinatorEpoch"] == 5


def test_dump_log_reads_a_txnindex(tmp_path: Path) -> None:
    _txn_log(tmp_path / "t-0").close()
    index = tmp_path / "t-0" / f"{0:020d}.txnindex"
    result = CliRunner().invoke(commands.dump_log, [str(index)])
    assert result.exit_code == 0, result.output
    assert "version: 0 producerId: 7 firstOffset: 0 lastOffset: 1 lastStableOffset: 2" in result.output
    with index.open("ab") as f:
        f.write(b"\x00" * 5)
    result = CliRunner().invoke(commands.dump_log, [str(index), "--json"])
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert rows[0]["producerId"] == 7 and "trailing bytes" in rows[1]["error"]


def test_check_log_accepts_a_good_txnindex_and_reports_a_bad_one(tmp_path: Path) -> None:
    _txn_log(tmp_path / "t-0").close()
    assert check_log_dir(tmp_path).problems == []
    index = tmp_path / "t-0" / f"{0:020d}.txnindex"
    good = index.read_bytes()
    cases = [
        (good + b"\x00" * 3, "multiple"),
        (good + ENTRY.pack(0, 8, 0, 1, 2), "out of order"),
        (ENTRY.pack(0, 7, 0, 9, 10), "outside the segment"),
        (ENTRY.pack(0, 7, 0, 2, 3), "no control batch"),
        (ENTRY.pack(1, 7, 0, 1, 2), "version 1"),
        (ENTRY.pack(0, 7, 3, 1, 2), "first offset"),
        (ENTRY.pack(0, 7, 0, 1, 5), "last stable offset"),
    ]
    for data, words in cases:
        index.write_bytes(data)
        problems = check_log_dir(tmp_path).problems
        assert any(words in p.message and p.file.endswith(".txnindex") for p in problems), (words, problems)
    index.write_bytes(good)
    result = CliRunner().invoke(commands.check_log, [str(tmp_path)])
    assert result.exit_code == 0 and "OK" in result.output
    index.write_bytes(good + struct.pack(">h", 0))
    result = CliRunner().invoke(commands.check_log, [str(tmp_path)])
    assert result.exit_code == 1 and "txnindex" in result.output


def test_dump_log_reads_a_producer_snapshot_with_its_open_transaction(tmp_path: Path) -> None:
    log = _txn_log(tmp_path / "t-0")
    data = bytearray(build_batch([Record(0, 0, b"k", b"x")], base_timestamp=NOW, producer_id=9, producer_epoch=0,
                                 base_sequence=0, is_transactional=True))
    log.append(data, [(0, parse_header(data))], now_ms=NOW)  # 4: producer 9 opens a transaction
    log.close()
    (snapshot,) = (tmp_path / "t-0").glob("*.snapshot")
    result = CliRunner().invoke(commands.dump_log, [str(snapshot)])
    assert result.exit_code == 0, result.output
    assert "producerId: 9 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: 4" in result.output
    assert "producerId: 7 producerEpoch: 2 coordinatorEpoch: 5 currentTxnFirstOffset: -1" in result.output
    snapshot.write_bytes(b"\x00\x01")
    result = CliRunner().invoke(commands.dump_log, [str(snapshot), "--json"])
    assert "error" in json.loads(result.output.splitlines()[0])
