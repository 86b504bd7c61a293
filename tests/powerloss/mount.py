"""Mount, power-cut and remount the lazy file system (`tests/powerloss/lazyfs.py`) from a test.

`LazyMount(backing, mountpoint).mount()` starts the file system process and waits until the mount is
there; `cut()` is the power cut: the file system process is stopped between two requests (SIGTERM) and
everything it held only in memory is gone, leaving the backing directory with what was durable;
`mount()` again serves what survived. Stop whatever writes to the mount (`kill -9` the broker) before a
cut: a process with a file open on the mount keeps it busy.

`mount(trigger)` (or `arm(trigger)` on a running mount) arms a targeted cut (`tests/powerloss/triggers.py`): `fired()` says which operation the
file system froze at, once it has. A frozen file system holds a broker thread inside a request, which a
SIGKILL alone cannot end, so the harness kills the broker and then `cut()`s, which SIGKILLs a frozen file
system process (nothing is half-written to the backing dir while it is frozen) and lazily unmounts.

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

from tests.powerloss.triggers import Trigger

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
        self.status_path = self.backing.parent / f"{self.backing.name}.lazyfs.fired"
        self.control_path = self.backing.parent / f"{self.backing.name}.lazyfs.arm"
        self.cuts = 0

    def mount(self, trigger: Trigger | None = None) -> LazyMount:
        assert self.proc is None, "already mounted"
        self.status_path.unlink(missing_ok=True)
        self.control_path.unlink(missing_ok=True)
        command = [sys.executable, "-m", "tests.powerloss.lazyfs", str(self.backing), str(self.mountpoint),
                   "--status", str(self.status_path), "--control", str(self.control_path)]
        if trigger is not None:
            command += ["--cut-at", trigger.spec()]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not os.path.ismount(self.mountpoint):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._reap(signal.SIGKILL)
                raise RuntimeError(f"lazyfs did not mount: {self.log_path.read_text(errors='replace')[-2000:]}")
            time.sleep(0.02)
        return self

    def arm(self, trigger: Trigger) -> None:
        """Arm a trigger on the running mount; it counts matching operations from when it reads it."""
        tmp = self.control_path.with_name(self.control_path.name + ".tmp")
        tmp.write_text(trigger.spec())
        os.replace(tmp, self.control_path)

    def fired(self) -> str | None:
        """The operation (`kind path...`) an armed trigger froze the file system at, or None so far."""
        try:
            return self.status_path.read_text().strip() or None
        except FileNotFoundError:
            return None

    def kill_frozen(self) -> None:
        """SIGKILL a frozen file system process: its blocked request ends (a broker thread waiting on it is
        released to die), and nothing durable changes, since a frozen process writes nothing more."""
        if self.proc is not None and self.fired() is not None:
            self.proc.kill()

    def cut(self) -> None:
        """The power cut: drop everything not yet durable and unmount; the backing dir holds what survived."""
        self._reap(signal.SIGKILL if self.fired() is not None else signal.SIGTERM)
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
        if self._listed():  # the process died without unmounting (SIGKILL, or busy)
            tool = shutil.which("fusermount3") or shutil.which("fusermount") or "fusermount3"
            subprocess.run([tool, "-u", "-z", str(self.mountpoint)], check=False, capture_output=True)
        with contextlib.suppress(OSError):
            os.stat(self.mountpoint)

    def _listed(self) -> bool:
        """Whether the kernel still lists the mount (`os.path.ismount` says no once its process is dead:
        the stat fails with "transport endpoint is not connected")."""
        target = os.fsencode(os.path.abspath(self.mountpoint))
        with open("/proc/self/mounts", "rb") as mounts:
            return any(line.split()[1:2] == [target] for line in mounts)

    def __enter__(self) -> LazyMount:
        return self.mount()

    def __exit__(self, *exc: object) -> None:
        self.unmount()
