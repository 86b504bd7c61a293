"""pyiceberg's file IO for a local warehouse, made durable: every file it writes is fsynced, with its
directory entries, before the catalog commit that names it.

Why: a snapshot is one catalog commit (the SQL catalog's row, which SQLite fsyncs) naming a metadata file,
which names manifest lists, manifests and Parquet files. pyiceberg writes those through pyarrow and never
fsyncs, so after a power cut the catalog could name files the cut took, and the table would not load. With
this IO each file is synced when it is closed, and its directory (and each directory made for it, up to
the warehouse) too; pyiceberg closes every file before the commit that names it, so the commit only ever
names durable files. Object storage (s3://) needs none of it: an upload is durable when it is acknowledged.

`tables.catalog_properties` names this class as pyiceberg's `py-io-impl` for a file warehouse.

Called by the worker process's one thread (pyiceberg may write from its own threads: the set of known
directories is only ever added to, and a second fsync of a directory is harmless).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pyiceberg.io.pyarrow import BUFFER_SIZE, ONE_MEGABYTE, PyArrowFile, PyArrowFileIO

#: the class's dotted name, for pyiceberg's `py-io-impl`
IMPL = "pybroker.clients.iceberg.durable_io.DurableFileIO"


def fsync_path(path: str | Path) -> None:
    """fsync a file or a directory (its entries) by its path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _SyncedStream:
    """A pyarrow output stream whose `close` also fsyncs the file and its new directory entries."""

    def __init__(self, stream: Any, path: str, io: DurableFileIO) -> None:
        self._stream, self._path, self._io = stream, path, io

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def write(self, data: Any) -> int:
        written: int = self._stream.write(data)
        return written

    def close(self) -> None:
        if self._stream.closed:
            return
        self._stream.close()
        self._io.synced(self._path)

    def __enter__(self) -> _SyncedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DurableFile(PyArrowFile):
    """A PyArrowFile whose output stream is synced when closed (local paths only)."""

    def __init__(self, io: DurableFileIO, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._io = io

    def create(self, overwrite: bool = False) -> Any:
        return _SyncedStream(super().create(overwrite), self._path, self._io)


class DurableFileIO(PyArrowFileIO):
    """PyArrowFileIO whose local files are fsynced on close, with the directories that name them."""

    def __init__(self, properties: Any = None) -> None:
        super().__init__(properties or {})
        warehouse = str(self.properties.get("warehouse", ""))
        root = warehouse.removeprefix("file://") if warehouse.startswith(("file:", "/")) else ""
        self._root = Path(root).resolve() if root else None
        self._known: set[Path] = set()

    def new_output(self, location: str) -> PyArrowFile:
        scheme, netloc, path = self.parse_location(location, self.properties)
        if scheme not in ("file", ""):
            return super().new_output(location)
        return DurableFile(self, fs=self.fs_by_scheme(scheme, netloc), location=location, path=path,
                           buffer_size=int(self.properties.get(BUFFER_SIZE, ONE_MEGABYTE)))

    def synced(self, path: str) -> None:
        """fsync `path`, its directory, and every directory above it first seen here (up to the warehouse)."""
        fsync_path(path)
        directory = Path(path).resolve().parent
        fsync_path(directory)
        while directory not in self._known and directory != self._root and directory.parent != directory:
            if self._root is not None and self._root not in directory.parents:
                break
            self._known.add(directory)
            directory = directory.parent
            fsync_path(directory)
