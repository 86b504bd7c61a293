"""Regression tests for what the power-loss campaigns (`tests/powerloss/campaign.py`) found, each on the
lazy file system of `tests/powerloss/`: the storage call under test runs in this process against the
mount, the power is cut while it still holds its files (a crash, not a stop), and the backing dir, which
holds only what was made durable, must hold what the call promised.
"""

from __future__ import annotations

import contextlib

import pytest

from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_dir import META_PROPERTIES
from pybroker.storage.log_manager import LogManager
from tests.integration.test_power_loss import lazy  # noqa: F401 (the lazy mount fixture)
from tests.powerloss.mount import LazyMount, fuse_unavailable

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
