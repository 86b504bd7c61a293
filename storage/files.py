"""Durable-file primitives shared by the storage modules.

`os.write` may write less than asked (a signal, a full disk), so every write here loops until done.
Small metadata files (checkpoints, topic metadata, meta.properties, snapshots) are replaced atomically:
temp file, fsync, rename over the old one, fsync the directory, so a crash leaves the old or the new
file and never half of one.
"""

from __future__ import annotations

import os
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


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace `path` with `data` all at once; with `sync`, durably."""
    tmp = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_fully(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)
