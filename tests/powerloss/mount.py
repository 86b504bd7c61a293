"""Mount, power-cut and remount the lazy file system (`tests/powerloss/lazyfs.py`) from a test.

`LazyMount(backing, mountpoint).mount()` starts the file system process and waits until the mount is
there; `cut()` is the power cut: the file system process is stopped between two requests (SIGTERM) and
everything it held only in memory is gone, leaving the backing directory with what was durable;
`mount()` again serves what survived. Stop whatever writes to the mount (`kill -9` the broker) before a
cut: a process with a file open on the mount keeps it busy.

`fuse_unavailable()` says why FUSE cannot mount here (no /dev/fuse, no fusermount3, no mfusepy or
libfuse), for the tests to skip with that reason; where it can, a failure to mount is a test failure.

Called from the test's main thread; not thread-safe.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
MOUNT_TIMEOUT_S = 60.0  # polled: only a mount that never comes waits it out


def fuse_unavailable() -> str | None:
    """None when FUSE can mount here, otherwise the reason it cannot."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine (a container without the FUSE device)"
    if shutil.which("fusermount3") is None and shutil.which("fusermount") is None:
        return "no fusermount3 (Debian's fuse3 package; `make test` installs it)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"mfusepy or libfuse cannot load: {exc}"
    return None


class LazyMount:
    """One lazy file system process over `backing`, mounted at `mountpoint`."""

    def __init__(self, backing: Path, mountpoint: Path) -> None:
        self.backing = Path(backing)
        self.mountpoint = Path(mountpoint)
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.backing.parent / f"{self.backing.name}.lazyfs.out"
        self.cuts = 0

    def mount(self) -> LazyMount:
        assert self.proc is None, "already mounted"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.powerloss.lazyfs", str(self.backing), str(self.mountpoint)],
                cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not os.path.ismount(self.mountpoint):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._reap(signal.SIGKILL)
                raise RuntimeError(f"lazyfs did not mount: {self.log_path.read_text(errors='replace')[-2000:]}")
            time.sleep(0.02)
        return self

    def cut(self) -> None:
        """The power cut: drop everything not yet durable and unmount; the backing dir holds what survived."""
        self._reap(signal.SIGTERM)
        self.cuts += 1

    def unmount(self) -> None:
        """The end of a test: the same as a cut (nothing pending is ever written back)."""
        if self.proc is not None:
            self._reap(signal.SIGTERM)

    def _reap(self, sig: int) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if os.path.ismount(self.mountpoint):  # the process died without unmounting (SIGKILL, or busy)
            tool = shutil.which("fusermount3") or shutil.which("fusermount") or "fusermount3"
            subprocess.run([tool, "-u", "-z", str(self.mountpoint)], check=False, capture_output=True)
        with contextlib.suppress(OSError):
            os.stat(self.mountpoint)

    def __enter__(self) -> LazyMount:
        return self.mount()

    def __exit__(self, *exc: object) -> None:
        self.unmount()
