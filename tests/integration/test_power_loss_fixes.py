"""Regression tests for what the power-loss campaigns (`tests/powerloss/campaign.py`) found, each on the
lazy file system of `tests/powerloss/`: the storage call under test runs in this process against the
mount, the power is cut while it still holds its files (a crash, not a stop), and the backing dir, which
holds only what was made durable, must hold what the call promised.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest

from pybroker.storage.log import Log
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_dir import META_PROPERTIES
from pybroker.storage.log_manager import LogManager
from tests.integration.test_power_loss import lazy  # noqa: F401 (the lazy mount fixture)
from tests.powerloss.mount import LazyMount, fuse_unavailable
from tests.unit.storage.helpers import NOW, append, batch

pytestmark = pytest.mark.skipif(fuse_unavailable() is not None, reason=fuse_unavailable() or "")


def _crash(manager: LogManager, lazy: LazyMount) -> None:  # noqa: F811
    """Cut the power under a running log manager, then let go of its (now dead) files."""
    lazy.cut()
    with contextlib.suppress(OSError):
        manager.shutdown()


def test_a_log_dir_the_broker_creates_survives_a_power_cut(lazy: LazyMount) -> None:  # noqa: F811
    """The campaign's first cut lost everything: the broker made its log dirs (and their parent) with a
    plain mkdir, fsynced the files inside, but never the parent's entry, so the dirs themselves vanished."""
    log_dir = lazy.mountpoint / "new" / "logs"
    manager = LogManager([log_dir], node_id=1, log_config_for=lambda _: LogConfig(), clock_ms=lambda: 0)
    manager.startup()
    manager.create_topic("orders", 1, {})
    _crash(manager, lazy)
    survived = lazy.backing / "new" / "logs"
    assert (survived / META_PROPERTIES).exists(), sorted(p.name for p in lazy.backing.rglob("*"))
    assert (survived / "orders-0").is_dir()


def test_a_log_dir_move_fsyncs_what_its_swap_copied(lazy: LazyMount, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """The campaign cut the power at a move's promotion (the rename of the `-future` dir) and lost an
    acknowledged record: the swap copied what came since the copy's last fsync under its pause, then
    closed the future (which syncs indexes, not log data) and renamed the source away. Here a batch is
    appended and fsynced in the source right after that last fsync, as an acks=all produce would be."""
    dirs = [lazy.mountpoint / "a", lazy.mountpoint / "b"]
    manager = LogManager(dirs, node_id=1, log_config_for=lambda _: LogConfig(), clock_ms=lambda: NOW)
    manager.startup()
    manager.create_topic("t", 1, {})
    log = manager.get_log("t", 0)
    assert log is not None
    batches = [batch(3, value=b"early-%d-" % i) for i in range(5)] + [batch(3, value=b"late-")]
    for data in batches[:-1]:
        append(log, data)
    log.flush()
    real_sync = manager.moves._sync

    def sync_then_append(future: Log, target: Path) -> bool:
        synced = real_sync(future, target)
        append(log, batches[-1])
        log.flush()  # acknowledged: durable in the source
        return synced

    monkeypatch.setattr(manager.moves, "_sync", sync_then_append)
    target = next(d for d in manager.dirs if d != manager.dir_of("t", 0))
    manager.moves.move("t", 0, str(target))
    deadline = time.monotonic() + 60
    while manager.moves.busy or manager.dir_of("t", 0) != target:
        assert time.monotonic() < deadline, "the move did not finish"
        time.sleep(0.01)
    _crash(manager, lazy)
    survived = lazy.backing / target.name / "t-0"
    size = sum(p.stat().st_size for p in survived.glob("*.log"))
    assert size == sum(len(data) for data in batches), f"{size} bytes of the moved log survived"
