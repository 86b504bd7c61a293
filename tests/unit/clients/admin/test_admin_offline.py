"""The admin tools' pure parts: assignment decoding, the offline verifier on torn and shuffled files,
the table renderer, and check-log's progress bar path."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from pybroker.clients.admin import cli_support, offline_commands
from pybroker.clients.admin.output import emit
from pybroker.protocol.member_assignment import decode_assignment
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage.verify import check_log_dir, check_segment


def _assignment(pairs: dict[str, list[int]]) -> bytes:
    out = struct.pack(">hi", 0, len(pairs))
    for topic, partitions in pairs.items():
        out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(partitions))
        out += struct.pack(f">{len(partitions)}i", *partitions)
    return out + struct.pack(">i", -1)


def test_decode_assignment() -> None:
    assert decode_assignment(_assignment({"b": [1, 0], "a": [2]})) == [("a", 2), ("b", 0), ("b", 1)]
    assert decode_assignment(b"") == []
    assert decode_assignment(b"\x00\x00\x00\x00\x00\x05xx") is None


def _segment(tmp_path: Path, base: int, batches: list[bytes]) -> Path:
    partition = tmp_path / "t-0"
    partition.mkdir(exist_ok=True)
    path = partition / f"{base:020d}.log"
    path.write_bytes(b"".join(batches))
    return path


def _batch(base: int, n: int = 2) -> bytes:
    return bytes(build_batch([Record(i, 0, b"k", b"v") for i in range(n)], base_offset=base,
                             base_timestamp=1_700_000_000_000))


def test_torn_tail_and_backwards_offsets_are_reported_with_positions(tmp_path: Path) -> None:
    first, second = _batch(0), _batch(2)
    path = _segment(tmp_path, 0, [first, second, _batch(1), second[:20]])
    next_offset, batches, problems = check_segment(path)
    assert (next_offset, batches) == (4, 3)
    assert [(p.position, p.message.split()[0]) for p in problems] == [
        (2 * len(first), "offset"), (3 * len(first), "20")]
    report = check_log_dir(tmp_path)
    assert (report.partitions, report.segments, len(report.problems)) == (1, 1, 2)


def test_a_topic_whose_name_contains_delete_is_checked_and_only_dirs_being_deleted_are_skipped(
        tmp_path: Path) -> None:
    for name in ("was-delete-0", "x-delete-me-0", "t-0.0123456789abcdef0123456789abcdef-delete"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{0:020d}.log").write_bytes(_batch(0))
    report = check_log_dir(tmp_path)
    assert (report.partitions, report.segments, report.problems) == (2, 2, [])


def test_table_and_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    emit([{"topic": "a", "lag": None, "isr": [1, 2]}], ["topic", "lag", "isr"], False)
    assert capsys.readouterr().out.splitlines() == ["TOPIC  LAG  ISR", "a      -    1,2"]
    emit([], ["topic"], False, empty="(none)")
    assert capsys.readouterr().out == "(none)\n"


def test_check_log_shows_a_progress_bar_for_large_dirs_at_a_terminal(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _segment(tmp_path, 0, [_batch(0), _batch(2)])
    monkeypatch.setattr(offline_commands, "PROGRESS_BAR_BYTES", 0)
    plain = CliRunner().invoke(offline_commands.check_log, [str(tmp_path)])  # not a terminal: no bar
    assert plain.exit_code == 0 and "checking" not in plain.output and "OK" in plain.output
    monkeypatch.setattr(cli_support, "shows_progress", lambda quiet: not quiet)  # as at a terminal
    result = CliRunner().invoke(offline_commands.check_log, [str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "checking" in result.output and "2 batch(es)" in result.output and "OK" in result.output
    as_json = CliRunner().invoke(offline_commands.check_log, [str(tmp_path), "--json"])
    assert "checking" not in as_json.output


def test_offline_errors_are_json_under_json(tmp_path: Path) -> None:
    stray = tmp_path / "notes.txt"
    stray.write_text("hello")
    result = CliRunner().invoke(offline_commands.dump_log, [str(stray), "--json"])
    assert result.exit_code == 1 and result.stdout == ""
    assert json.loads(result.stderr) == {"error": "notes.txt is not a segment file (expected a 20-digit base "
                                                  "offset name)", "kafka_error": None}
