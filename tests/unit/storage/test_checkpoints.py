"""Offset checkpoint files: a damaged line costs that line only, and no line is written that reads back wrong."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from pybroker.storage.checkpoints import read_checkpoint, write_checkpoint


def test_checkpoint_files_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_checkpoint(path, {("a", 0): 5, ("b-c", 12): 7})
    assert path.read_text() == "0\n2\na 0 5\nb-c 12 7\n"
    assert read_checkpoint(path) == {("a", 0): 5, ("b-c", 12): 7}
    assert not list(tmp_path.glob("*.tmp"))
    assert read_checkpoint(tmp_path / "missing") == {}


def test_files_of_another_version_or_without_one_read_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    for broken in (b"1\n1\na 0 1\n", b"", b"\n", b"x\n0\n", b"\xff\n1\na 0 1\n"):
        path.write_bytes(broken)
        assert read_checkpoint(path) == {}, broken


def test_a_damaged_line_costs_only_that_line_and_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_bytes(b"0\n6\na 0 5\nevil\n 0 9\nb 1 7\nc x 1\n\xff 0 1\nd 2 +3\nd 3 1_0\ne 0 4\n")
    with capture_logs() as logs:
        assert read_checkpoint(path) == {("a", 0): 5, ("b", 1): 7, ("e", 0): 4}
    assert [entry["event"] for entry in logs] == ["checkpoint_damaged"]
    assert logs[0]["lines_skipped"] == 6 and logs[0]["first_bad_line"] == [4]


def test_a_wrong_count_line_keeps_the_entries(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    for text in (b"0\n3\na 0 1\n", b"0\nx\na 0 1\n", b"0\n0\na 0 1\n", b"0\n1\na 0 1"):
        path.write_bytes(text)
        with capture_logs():
            assert read_checkpoint(path) == {("a", 0): 1}, text


def test_a_name_that_cannot_be_one_line_is_left_out_and_logged_once(tmp_path: Path) -> None:
    """Topics an older version let in ("evil\\n") must not damage the lines of the others."""
    path = tmp_path / "cp"
    offsets = {("evil\n", 0): 9, ("good", 0): 5, ("sp ace", 1): 3, ("tab\t", 0): 1, ("\x85odd", 0): 2,
               ("\udcff", 0): 4, ("also-good", 3): 8}
    with capture_logs() as logs:
        write_checkpoint(path, offsets)
        write_checkpoint(path, offsets)
    assert path.read_bytes() == b"0\n2\nalso-good 3 8\ngood 0 5\n"
    assert read_checkpoint(path) == {("good", 0): 5, ("also-good", 3): 8}
    skipped = sorted(entry["topic"] for entry in logs if entry["event"] == "checkpoint_topic_skipped")
    assert len(skipped) == 5  # once per name, not once per write


names = st.text(min_size=1, max_size=12)


@given(st.dictionaries(st.tuples(names, st.integers(0, 2**31 - 1)), st.integers(0, 2**63 - 1), max_size=8))
def test_what_is_written_reads_back_exactly(offsets: dict[tuple[str, int], int]) -> None:
    with tempfile.TemporaryDirectory() as tmp, capture_logs():
        path = Path(tmp) / "cp"
        write_checkpoint(path, offsets)
        back = read_checkpoint(path)
    assert back.items() <= offsets.items()
    plain = {k: v for k, v in offsets.items() if k[0].isascii() and k[0].isprintable() and " " not in k[0]}
    assert plain.items() <= back.items()
