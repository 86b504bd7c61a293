"""A FUSE file system that forgets, at a power cut, everything that was not fsynced.

Run as its own process: `python -m tests.powerloss.lazyfs BACKING MOUNTPOINT [--cut-at KIND:GLOB:N] [--status FILE] [--control FILE]`. It mounts MOUNTPOINT over
the model of `tests/powerloss/lazy_tree.py`, whose backing directory only ever holds durable state. So a
power cut needs nothing from this process but to stop: SIGTERM makes libfuse leave its loop between two
requests and unmount, and the process exits without writing anything more; what was only in its memory
(unsynced bytes, unsynced directory entries) is gone, as after a real power loss. Mounting again over the
same backing directory starts from what survived. `tests/powerloss/mount.py` drives this from tests.

Why a process of its own: the test process must not serve its own file operations (a test that opens a
file on the mount would wait on itself under the interpreter lock), and SIGKILL-safe cleanup is simpler.
libfuse runs single-threaded (`nothreads`), so every operation runs alone and the model needs no lock;
one (`_mutex`, not `lock`: that name is FUSE's
locking operation) is kept anyway in case the loop is ever made multi-threaded.

With `--cut-at` (a `tests/powerloss/triggers.py` trigger), or once `--control FILE` names one (read at
most every `CONTROL_POLL_S` while operations come in: arming a running mount), the file system freezes
at the Nth matching operation: it writes FILE (outside the mount) naming the operation, and from then on every operation
blocks, so nothing more becomes durable. The harness then SIGKILLs the broker and this process (nothing
is half-written to the backing dir while frozen) and unmounts.
"""

from __future__ import annotations

import argparse
import errno
import functools
import itertools
import logging
import os
import stat
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import mfusepy

from tests.powerloss.lazy_tree import LazyTree, Node
from tests.powerloss.triggers import Trigger

F = TypeVar("F", bound=Callable[..., Any])
#: how often the control file (`--control`) is read, in seconds: arming takes effect within this
CONTROL_POLL_S = 0.1


_ERRNO_OF: dict[type[OSError], int] = {
    FileNotFoundError: errno.ENOENT, FileExistsError: errno.EEXIST,
    NotADirectoryError: errno.ENOTDIR, IsADirectoryError: errno.EISDIR,
}


def _op(method: F) -> F:
    """Run under the lock, and turn an OSError of the model into the errno FUSE answers with."""

    @functools.wraps(method)
    def wrapper(self: LazyFS, *args: Any) -> Any:
        with self._mutex:
            try:
                return method(self, *args)
            except mfusepy.FuseOSError:
                raise
            except OSError as exc:
                code = exc.errno or _ERRNO_OF.get(type(exc), errno.EIO)
                raise mfusepy.FuseOSError(code) from None

    return wrapper  # type: ignore[return-value]


class LazyFS(mfusepy.Operations):
    """The FUSE operations over one `LazyTree`; handles map to nodes so unlinked open files keep working."""

    use_ns = True

    def __init__(self, backing: str, trigger: Trigger | None = None, status: str | None = None,
                 control: str | None = None) -> None:
        self.tree = LazyTree(backing)
        self._mutex = threading.Lock()
        self.handles: dict[int, tuple[Node, int]] = {}
        self._next_fh = itertools.count(1)
        self.trigger, self.status, self.control = trigger, status, control
        self.matched = 0
        self._next_poll = 0.0

    def _poll_control(self) -> None:
        """Arm (or re-arm) the trigger the control file names, at most every `CONTROL_POLL_S`."""
        now = time.monotonic()
        if self.control is None or now < self._next_poll:
            return
        self._next_poll = now + CONTROL_POLL_S
        try:
            with open(self.control) as f:
                spec = f.read().strip()
        except FileNotFoundError:
            return
        if spec and (self.trigger is None or spec != self.trigger.spec()):
            self.trigger, self.matched = Trigger.parse(spec), 0

    def _at(self, kind: str, *paths: str) -> None:
        """Count an operation against the trigger; at the Nth match, say so and block for good."""
        self._poll_control()
        if self.trigger is None or not self.trigger.matches(kind, paths):
            return
        self.matched += 1
        if self.matched < self.trigger.nth:
            return
        if self.status is not None:
            tmp = f"{self.status}.tmp"
            with open(tmp, "w") as f:
                f.write(f"{kind} {' '.join(paths)}\n")
            os.replace(tmp, self.status)
        while True:  # frozen: the harness kills the broker, then this process
            time.sleep(3600)

    def _path_of(self, node: Node) -> str:
        parts: list[str] = []
        while node.parent is not None:
            parts.append(node.name)
            node = node.parent
        return "/" + "/".join(reversed(parts))

    # -- helpers ----------------------------------------------------------------------------------------
    def _node(self, path: str | None, fh: int | None = None) -> Node:
        if fh and fh in self.handles:
            return self.handles[fh][0]
        if path is None:
            raise mfusepy.FuseOSError(errno.EBADF)
        return self.tree.lookup(path)

    def _handle(self, node: Node, flags: int) -> int:
        fh = next(self._next_fh)
        self.handles[fh] = (node, flags)
        return fh

    # -- attributes -------------------------------------------------------------------------------------
    @_op
    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        node = self._node(path, fh)
        size = 4096 if node.is_dir else self.tree.size(node)
        return {
            "st_mode": node.mode, "st_ino": node.ino, "st_size": size, "st_blocks": (size + 511) // 512,
            "st_nlink": 2 if node.is_dir else 1, "st_uid": os.getuid(), "st_gid": os.getgid(),
            "st_mtime": node.mtime_ns, "st_ctime": node.mtime_ns, "st_atime": node.mtime_ns,
        }

    @_op
    def chmod(self, path: str, mode: int) -> int:
        node = self._node(path)
        node.mode = stat.S_IFMT(node.mode) | stat.S_IMODE(mode)
        return 0

    @_op
    def chown(self, path: str, uid: int, gid: int) -> int:
        return 0

    @_op
    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        node = self._node(path)
        node.mtime_ns = times[1] if times else node.mtime_ns
        return 0

    @_op
    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self.tree.backing)
        return {key: getattr(st, key) for key in (
            "f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_namemax")}

    # -- directories ------------------------------------------------------------------------------------
    @_op
    def readdir(self, path: str, fh: int) -> list[str]:
        node = self._node(path)
        if not node.is_dir:
            raise mfusepy.FuseOSError(errno.ENOTDIR)
        return [".", "..", *node.children]

    @_op
    def mkdir(self, path: str, mode: int) -> int:
        self._at("mkdir", path)
        self.tree.create(path, stat.S_IFDIR | stat.S_IMODE(mode), is_dir=True)
        return 0

    @_op
    def rmdir(self, path: str) -> int:
        self._at("rmdir", path)
        self.tree.remove(path, is_dir=True)
        return 0

    @_op
    def unlink(self, path: str) -> int:
        self._at("unlink", path)
        self.tree.remove(path, is_dir=False)
        return 0

    @_op
    def rename(self, old: str, new: str) -> int:
        self._at("rename", old, new)
        self.tree.rename(old, new)
        return 0

    @_op
    def link(self, target: str, source: str) -> int:
        raise mfusepy.FuseOSError(errno.EPERM)  # one visible name per node (lazy_tree's simplifications)

    @_op
    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        self._at("fsyncdir", path or self._path_of(self._node(path, fh)))
        self.tree.fsync_dir(self._node(path))
        return 0

    # -- files ------------------------------------------------------------------------------------------
    @_op
    def create(self, path: str, mode: int, flags: int = os.O_RDWR) -> int:
        self._at("create", path)
        node = self.tree.create(path, stat.S_IFREG | stat.S_IMODE(mode), is_dir=False)
        return self._handle(node, flags)

    @_op
    def open(self, path: str, flags: int) -> int:
        node = self._node(path)
        if node.is_dir:
            raise mfusepy.FuseOSError(errno.EISDIR)
        if flags & os.O_TRUNC:
            self.tree.truncate(node, 0)
        return self._handle(node, flags)

    @_op
    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        data = self.tree.content(self._node(path, fh))
        return bytes(data[offset:offset + size])

    @_op
    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        self._at("write", path or self._path_of(self.handles[fh][0]))
        node, flags = self.handles[fh]
        if flags & os.O_APPEND:
            offset = self.tree.size(node)
        return self.tree.write(node, offset, data)

    @_op
    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        self._at("truncate", path or self._path_of(self._node(path, fh)))
        self.tree.truncate(self._node(path, fh), length)
        return 0

    @_op
    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        self._at("fsync", path or self._path_of(self._node(path, fh)))
        self.tree.fsync_file(self._node(path, fh))
        return 0

    @_op
    def flush(self, path: str | None, fh: int) -> int:
        return 0

    @_op
    def release(self, path: str | None, fh: int) -> int:
        self.handles.pop(fh, None)
        return 0


def main(argv: list[str]) -> int:
    """Mount in the foreground until SIGTERM (or an unmount); exit without writing anything pending."""
    parser = argparse.ArgumentParser(prog="python -m tests.powerloss.lazyfs")
    parser.add_argument("backing")
    parser.add_argument("mountpoint")
    parser.add_argument("--cut-at", type=Trigger.parse, default=None, help="kind:glob:n (tests/powerloss/triggers.py)")
    parser.add_argument("--status", default=None, help="the file written when the trigger fires")
    parser.add_argument("--control", default=None, help="a file naming a trigger to arm while mounted")
    args = parser.parse_args(argv)
    backing, mountpoint = args.backing, args.mountpoint
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)  # mfusepy logs an operation's crash
    try:  # libfuse reports the SIGTERM that ends its loop as an error: not one here
        mfusepy.FUSE(LazyFS(backing, args.cut_at, args.status, args.control), mountpoint, foreground=True, nothreads=True, hard_remove=True,
                     fsname="lazyfs", attr_timeout=0, entry_timeout=0, negative_timeout=0)
    finally:
        os._exit(0)  # nothing of the memory state may reach the backing dir after the loop ends


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
