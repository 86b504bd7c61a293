"""The offline tools, on the files themselves: `pybroker dump-log` and `pybroker check-log`.

`check-log` reads segments a running broker may be writing: a batch half-written at the moment of
reading would look torn. So it takes the log dir's `.lock` (shared, the broker takes it exclusively)
for the whole check: while a broker holds the dir, check-log refuses, saying so, unless `--force` (then
it warns that a torn tail may be the broker's write in progress); while check-log runs, a broker cannot
start on the dir.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from pybroker.clients.admin.cli_support import fail, progress, warn
from pybroker.clients.admin.dump_log import (
    DECODER_OF_TOPIC,
    format_batch,
    index_entries,
    log_batches,
    snapshot_entries,
    txn_index_entries,
)
from pybroker.clients.admin.output import emit
from pybroker.storage.offline import LOCK_FILE, check_log_dir, segment_files

#: check-log shows a progress bar (to a person at a terminal) when the segments add up to more than this
PROGRESS_BAR_BYTES = 64 * 1024 * 1024


@click.command("dump-log", short_help="Decode a segment or index file (kafka-dump-log).")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--print-records", is_flag=True, help="Decode each batch's records too.")
@click.option("--offsets-decoder", "decoder", flag_value="offsets",
              help="Decode records as __consumer_offsets keys and values (offset commits, group metadata).")
@click.option("--transaction-log-decoder", "decoder", flag_value="transactions",
              help="Decode records as __transaction_state keys and values (transactional ids and their state).")
@click.option("--no-decoder", "decoder", flag_value="none",
              help="Show keys and values as text even in an internal topic's segment.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per batch or index entry, a line each.")
def dump_log(file: Path, print_records: bool, decoder: str | None, as_json: bool) -> None:
    """Decode a segment (.log), index (.index, .timeindex, .txnindex) or producer snapshot (.snapshot) file,
    like kafka-dump-log.

    A segment of __consumer_offsets or __transaction_state is decoded with that topic's decoder unless
    --no-decoder (or another decoder) is given."""
    try:
        base = int(file.stem)
    except ValueError:
        fail(f"{file.name} is not a segment file (expected a 20-digit base offset name)")
    if decoder is None:
        decoder = DECODER_OF_TOPIC.get(file.resolve().parent.name.rpartition("-")[0])
    chosen = None if decoder == "none" else decoder
    readers: dict[str, Callable[[], Iterator[dict[str, Any]]]] = {
        ".log": lambda: log_batches(file, print_records, chosen), ".index": lambda: index_entries(file),
        ".timeindex": lambda: index_entries(file), ".txnindex": lambda: txn_index_entries(file),
        ".snapshot": lambda: snapshot_entries(file)}
    reader = readers.get(file.suffix)
    if reader is None:
        fail(f"{file.name}: expected a .log, .index, .timeindex, .txnindex or .snapshot file")
        return
    try:
        items = list(reader())
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    if as_json:
        for item in items:
            click.echo(json.dumps(item, default=str))
        return
    click.echo(f"Dumping {file}")
    if file.suffix == ".log":
        click.echo(f"Log starting offset: {base}")
        for batch in items:
            for line in format_batch(batch):
                click.echo(line)
    else:
        for entry in items:
            click.echo(" ".join(f"{k}: {v}" for k, v in entry.items()))


@contextlib.contextmanager
def _shared_lock(log_dir: Path, force: bool) -> Iterator[None]:
    """Hold the dir's `.lock` shared while checking; refuse (or warn, with force) when a broker holds it."""
    root = log_dir if (log_dir / LOCK_FILE).exists() else log_dir.parent
    lock = root / LOCK_FILE
    if not lock.exists():
        yield
        return
    fd = os.open(lock, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            message = f"log dir {root} is in use by a running broker (its {LOCK_FILE} is locked)"
            if not force:
                fail(f"{message}: stop the broker first, or pass --force to check it anyway")
            warn(f"{message}: checking anyway; a torn last batch may be a write in progress, not damage")
        yield
    finally:
        os.close(fd)


@click.command("check-log", short_help="Verify a log dir's segments and indexes, offline.")
@click.argument("log_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Check even while a running broker holds the log dir.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def check_log(log_dir: Path, force: bool, as_json: bool) -> None:
    """Verify every batch's CRC and framing and the indexes of a log dir, offline (stop the broker first)."""
    try:
        with _shared_lock(log_dir, force):
            total = sum(path.stat().st_size for path in segment_files(log_dir))
            with progress(total, "checking", as_json or total <= PROGRESS_BAR_BYTES) as bar:
                report = check_log_dir(log_dir, bar.update)
    except OSError as exc:
        fail(f"cannot read {exc.filename or log_dir}: {exc.strerror or exc}")
    problems = [{"file": p.file, "position": p.position, "problem": p.message} for p in report.problems]
    if as_json:
        click.echo(json.dumps({"partitions": report.partitions, "segments": report.segments,
                               "batches": report.batches, "bytes": report.bytes, "problems": problems}, indent=2))
    else:
        click.echo(f"checked {report.partitions} partition(s), {report.segments} segment(s), "
                   f"{report.batches} batch(es), {report.bytes} bytes: "
                   + (f"{len(problems)} problem(s)" if problems else "OK"))
        emit(problems, ["file", "position", "problem"], False)
    if problems:
        sys.exit(1)
