"""The lazy file system keeps exactly what was made durable across a power cut, and nothing more.

Each test writes through a real FUSE mount with ordinary system calls, cuts the power (`LazyMount.cut`),
mounts again over what survived and looks. Skipped only where FUSE cannot mount at all.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.powerloss.mount import LazyMount, fuse_unavailable

pytestmark = pytest.mark.skipif(fuse_unavailable() is not None, reason=fuse_unavailable() or "")


@pytest.fixture
def lazy(tmp_path: Path) -> Iterator[LazyMount]:
    mount = LazyMount(tmp_path / "backing", tmp_path / "mnt").mount()
    try:
        yield mount
    finally:
        mount.unmount()


def _write(path: Path, data: bytes, *, fsync: bool, flags: int = os.O_CREAT | os.O_WRONLY) -> None:
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _power_cut(lazy: LazyMount) -> None:
    lazy.cut()
    lazy.mount()


def test_unsynced_data_is_gone_after_a_cut_but_was_readable_before(lazy: LazyMount) -> None:
    f = lazy.mountpoint / "f"
    _write(f, b"", fsync=True)
    _fsync_dir(lazy.mountpoint)
    _write(f, b"never synced", fsync=False, flags=os.O_WRONLY)
    assert f.read_bytes() == b"never synced"  # reads see unsynced writes
    _power_cut(lazy)
    assert f.read_bytes() == b""


def test_synced_data_stays(lazy: LazyMount) -> None:
    f = lazy.mountpoint / "f"
    _write(f, b"durable", fsync=True)
    _fsync_dir(lazy.mountpoint)
    _power_cut(lazy)
    assert f.read_bytes() == b"durable"


def test_data_written_after_the_last_fsync_is_gone(lazy: LazyMount) -> None:
    f = lazy.mountpoint / "f"
    fd = os.open(f, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
    os.write(fd, b"one,")
    os.fdatasync(fd)
    os.write(fd, b"two,")
    os.close(fd)
    _fsync_dir(lazy.mountpoint)
    _power_cut(lazy)
    assert f.read_bytes() == b"one,"


def test_an_overwrite_in_the_middle_and_a_growing_truncate_become_durable_with_the_next_fsync(
        lazy: LazyMount) -> None:
    f = lazy.mountpoint / "f"
    _write(f, b"0123456789", fsync=True)
    _fsync_dir(lazy.mountpoint)
    fd = os.open(f, os.O_RDWR)
    try:
        os.pwrite(fd, b"ab", 2)
        os.ftruncate(fd, 12)
        os.fsync(fd)
        os.pwrite(fd, b"zz", 0)  # after the last fsync: gone
    finally:
        os.close(fd)
    _power_cut(lazy)
    assert f.read_bytes() == b"01ab456789\0\0"


def test_an_unsynced_truncate_is_undone(lazy: LazyMount) -> None:
    f = lazy.mountpoint / "f"
    _write(f, b"0123456789", fsync=True)
    _fsync_dir(lazy.mountpoint)
    os.truncate(f, 3)
    assert f.read_bytes() == b"012"
    _power_cut(lazy)
    assert f.read_bytes() == b"0123456789"


def test_a_rename_without_a_directory_fsync_is_undone(lazy: LazyMount) -> None:
    old, new = lazy.mountpoint / "old", lazy.mountpoint / "new"
    _write(old, b"x", fsync=True)
    _fsync_dir(lazy.mountpoint)
    os.rename(old, new)
    _power_cut(lazy)
    assert sorted(os.listdir(lazy.mountpoint)) == ["old"]
    assert old.read_bytes() == b"x"


def test_a_rename_with_a_directory_fsync_stays(lazy: LazyMount) -> None:
    old, new = lazy.mountpoint / "old", lazy.mountpoint / "new"
    _write(old, b"x", fsync=True)
    _fsync_dir(lazy.mountpoint)
    os.rename(old, new)
    _fsync_dir(lazy.mountpoint)
    _power_cut(lazy)
    assert sorted(os.listdir(lazy.mountpoint)) == ["new"]
    assert new.read_bytes() == b"x"


def test_an_atomic_replace_keeps_the_old_file_until_the_directory_is_fsynced(lazy: LazyMount) -> None:
    target, tmp = lazy.mountpoint / "checkpoint", lazy.mountpoint / "checkpoint.tmp"
    _write(target, b"old", fsync=True)
    _fsync_dir(lazy.mountpoint)
    _write(tmp, b"new", fsync=True)
    os.replace(tmp, target)
    assert target.read_bytes() == b"new"
    _power_cut(lazy)
    assert sorted(os.listdir(lazy.mountpoint)) == ["checkpoint"]
    assert target.read_bytes() == b"old"
    _write(tmp, b"new", fsync=True)
    os.replace(tmp, target)
    _fsync_dir(lazy.mountpoint)
    _power_cut(lazy)
    assert sorted(os.listdir(lazy.mountpoint)) == ["checkpoint"]
    assert target.read_bytes() == b"new"


def test_a_create_without_a_directory_fsync_is_gone(lazy: LazyMount) -> None:
    _write(lazy.mountpoint / "new", b"synced data, unsynced name", fsync=True)
    _power_cut(lazy)
    assert os.listdir(lazy.mountpoint) == []


def test_fsync_of_a_file_does_not_make_its_directory_entry_durable(lazy: LazyMount) -> None:
    sub = lazy.mountpoint / "partition-0"
    os.mkdir(sub)
    _write(sub / "00.log", b"batch", fsync=True)
    _fsync_dir(sub)  # the file's name is durable in sub, but sub's own name is not
    _power_cut(lazy)
    assert os.listdir(lazy.mountpoint) == []
    os.mkdir(sub)
    _write(sub / "00.log", b"batch", fsync=True)
    _fsync_dir(sub)
    _fsync_dir(lazy.mountpoint)
    _power_cut(lazy)
    assert (sub / "00.log").read_bytes() == b"batch"


def test_a_directory_fsynced_before_its_parent_keeps_its_entries_once_the_parent_is_fsynced(
        lazy: LazyMount) -> None:
    sub = lazy.mountpoint / "d"
    os.mkdir(sub)
    _write(sub / "f", b"data", fsync=True)
    _fsync_dir(sub)
    _fsync_dir(lazy.mountpoint)
    _power_cut(lazy)
    assert (sub / "f").read_bytes() == b"data"


def test_an_unlink_without_a_directory_fsync_is_undone(lazy: LazyMount) -> None:
    f = lazy.mountpoint / "f"
    _write(f, b"still here", fsync=True)
    _fsync_dir(lazy.mountpoint)
    os.unlink(f)
    assert not f.exists()
    _power_cut(lazy)
    assert f.read_bytes() == b"still here"
    os.unlink(f)
    _fsync_dir(lazy.mountpoint)
    _power_cut(lazy)
    assert not f.exists()


def test_an_open_unlinked_file_still_reads_and_writes(lazy: LazyMount) -> None:
    f = lazy.mountpoint / "f"
    fd = os.open(f, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.write(fd, b"abc")
        os.unlink(f)
        os.write(fd, b"def")
        assert os.pread(fd, 10, 0) == b"abcdef"
        os.fsync(fd)
    finally:
        os.close(fd)
    assert not f.exists()


def test_a_directory_rename_without_a_parent_fsync_is_undone(lazy: LazyMount) -> None:
    old, new = lazy.mountpoint / "topic-0", lazy.mountpoint / "topic-0.abc-delete"
    os.mkdir(old)
    _write(old / "00.log", b"x", fsync=True)
    _fsync_dir(old)
    _fsync_dir(lazy.mountpoint)
    os.rename(old, new)
    _power_cut(lazy)
    assert os.listdir(lazy.mountpoint) == ["topic-0"]
    os.rename(old, new)
    _fsync_dir(lazy.mountpoint)
    _power_cut(lazy)
    assert os.listdir(lazy.mountpoint) == ["topic-0.abc-delete"]
    assert (new / "00.log").read_bytes() == b"x"


def test_a_trigger_freezes_at_the_nth_matching_operation_and_keeps_only_what_was_durable(tmp_path: Path) -> None:
    """The writer runs in a process of its own: the frozen file system holds its third create for good."""
    import subprocess
    import sys
    import time

    from tests.powerloss.triggers import Trigger

    lazy = LazyMount(tmp_path / "backing", tmp_path / "mnt").mount(Trigger("create", "/seg-*.log", 3))
    script = (
        "import os, sys\n"
        "d = sys.argv[1]\n"
        "for i in range(5):\n"
        "    fd = os.open(f'{d}/seg-{i}.log', os.O_CREAT | os.O_WRONLY, 0o644)\n"
        "    os.write(fd, b'x' * 10); os.fsync(fd); os.close(fd)\n"
        "    dfd = os.open(d, os.O_RDONLY); os.fsync(dfd); os.close(dfd)\n"
        "    if i == 1:\n"
        "        fd = os.open(f'{d}/unsynced', os.O_CREAT | os.O_WRONLY, 0o644); os.close(fd)\n")
    writer = subprocess.Popen([sys.executable, "-c", script, str(lazy.mountpoint)])
    try:
        deadline = time.monotonic() + 20
        while lazy.fired() is None:
            assert writer.poll() is None, "the writer finished: the trigger never fired"
            assert time.monotonic() < deadline, "the trigger did not fire"
            time.sleep(0.02)
        assert lazy.fired() == "create /seg-2.log"
        time.sleep(0.2)
        assert writer.poll() is None, "the writer went on past the frozen operation"
    finally:
        writer.kill()
        lazy.kill_frozen()
        writer.wait(10)
        lazy.cut()
    assert sorted(os.listdir(lazy.backing)) == ["seg-0.log", "seg-1.log"]
    lazy.mount()  # the next mount is not armed: it serves what survived
    try:
        assert lazy.fired() is None
        assert (lazy.mountpoint / "seg-1.log").read_bytes() == b"x" * 10
    finally:
        lazy.unmount()


def test_a_trigger_reads_back_from_its_spec_and_matches_a_rename_by_either_path() -> None:
    from tests.powerloss.triggers import TARGETS, Trigger

    trigger = Trigger("rename", "*.swap", 4)
    assert Trigger.parse(trigger.spec()) == trigger
    assert trigger.matches("rename", ("/d1/t-0/00000000000000000000.log.cleaned", "/d1/t-0/00000000000000000000.log.swap"))
    assert not trigger.matches("create", ("/d1/t-0/00000000000000000000.log.swap",))
    for bad in ("nope:*.log:1", "write:*.log:0", "write:a:b:1"):
        with pytest.raises(ValueError):
            Trigger.parse(bad)
    assert all(Trigger.parse(t.spec()) == t for t in TARGETS.values())
