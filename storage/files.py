"""Durable-file primitives shared by the storage modules.

`os.write` may write less than asked (a signal, a full disk), so every write here loops until done.
Small metadata files (checkpoints, topic metadata, meta.properties, snapshots) are replaced atomically:
temp file, fsync, rename over the old one, fsync the directory, so a crash leaves the old or the new
file and never half of one.

Several threads rewrite the same files (DeleteRecords, retention and checkpoint passes run on worker
threads), so each replacement takes the path's own writer lock and writes a temp file of a name no other
writer uses (`<file>.<random>.tmp`): two writers never truncate or rename each other's temp file, and
the rename that lands last is the whole of one writer's content. A crash can leave temp files behind;
`remove_temp_files` deletes them at startup (every temp name ends in `.tmp`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

TEMP_SUFFIX = ".tmp"


def write_fully(fd: int, data: Any) -> None:
    """Write all of `data` at the file's current position (its end, for O_APPEND files)."""
    with memoryview(data) as view:
        written = os.write(fd, view)
        while written < len(view):
            written += os.write(fd, view[written:])


def pwrite_fully(fd: int, data: Any, position: int) -> None:
    """Write all of `data` at `position`, whatever the file's current position."""
    with memoryview(data) as view:
        written = os.pwrite(fd, view, position)
        while written < len(view):
            written += os.pwrite(fd, view[written:], position + written)


def fsync_dir(directory: Path) -> None:
    """Make a directory's entries (created, renamed, removed files) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs_durably(directory: Path) -> None:
    """Create `directory` and any missing parents, each made durable in its parent (as Kafka's log
    manager flushes a new log dir's parent): a dir whose own entry was never fsynced vanishes, with
    everything in it, at a power cut, however durably its files were written."""
    directory = Path(directory)
    missing = []
    while not directory.exists():
        missing.append(directory)
        if directory.parent == directory:
            break
        directory = directory.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            path.mkdir()
        fsync_dir(path.parent)


class _PathLocks:
    """One lock per file path, kept only while someone holds or waits for it (snapshot paths are many)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._entries: dict[str, tuple[threading.Lock, list[int]]] = {}

    @contextlib.contextmanager
    def hold(self, path: Path) -> Iterator[None]:
        key = os.path.abspath(path)
        with self._guard:
            lock, users = self._entries.setdefault(key, (threading.Lock(), [0]))
            users[0] += 1
        try:
            with lock:
                yield
        finally:
            with self._guard:
                users[0] -= 1
                if not users[0]:
                    del self._entries[key]


_writers = _PathLocks()


def temp_path(path: Path) -> Path:
    """A temp file name beside `path` that no other writer uses, removable at startup (`.tmp` suffix)."""
    return path.with_name(f"{path.name}.{uuid.uuid4().hex[:16]}{TEMP_SUFFIX}")


#: absolute path -> what to call once `atomic_write` replaced that file. The live metadata log's one hook
#: (`broker/live_metadata.py`): every store of metadata is replaced through `atomic_write`, so watching their
#: paths sees every change, from whichever thread saved it, before the saver goes on to answer.
_watchers: dict[str, Callable[[], None]] = {}


def watch_replacements(paths: Iterable[Path], callback: Callable[[], None]) -> None:
    """Call `callback` (on the writer's thread, after the new file is durable) whenever one of `paths` is
    replaced by `atomic_write`; an exception it raises reaches the writer."""
    for path in paths:
        _watchers[os.path.abspath(path)] = callback


def unwatch_replacements(paths: Iterable[Path]) -> None:
    for path in paths:
        _watchers.pop(os.path.abspath(path), None)


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace `path` with `data` all at once; with `sync`, durably. One writer per path at a time.
    A watcher of the path (`watch_replacements`) is called once the replacement is done."""
    with _writers.hold(path):
        tmp = temp_path(path)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                write_fully(fd, data)
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        if sync:
            fsync_dir(path.parent)
    if _watchers:
        callback = _watchers.get(os.path.abspath(path))
        if callback is not None:
            callback()


def remove_temp_files(directory: Path) -> int:
    """Delete the temp files that interrupted `atomic_write`s left in `directory`; how many there were."""
    removed = 0
    for child in directory.iterdir():
        if child.name.endswith(TEMP_SUFFIX) and child.is_file():
            child.unlink(missing_ok=True)
            removed += 1
    return removed
