"""Power cuts under a share group (`tests/powerloss/share_cuts.py`): one right after a consumer's ACCEPT
was answered, one at the write of `__share_group_state` that would have made the next ACCEPT durable.
After each: nothing accepted is delivered again, nothing is lost, and what another member held (acquired,
never acknowledged) comes back with its delivery count kept. The longer run is in `make soak`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.brokers import BrokerProcess
from tests.powerloss.mount import LazyMount, fuse_unavailable
from tests.powerloss.share_cuts import OVERRIDES, RECORDS, run

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(fuse_unavailable() is not None, reason=fuse_unavailable() or "")]


@pytest.fixture
def lazy(tmp_path: Path) -> Iterator[LazyMount]:
    mount = LazyMount(tmp_path / "backing", tmp_path / "mnt").mount()
    try:
        yield mount
    finally:
        mount.unmount()


@pytest.mark.parametrize("cut", ["after-answer", "at-state-write"])
def test_a_power_cut_keeps_what_a_share_consumer_was_answered(
        cut: str, lazy: LazyMount, broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(OVERRIDES, needs_restart=True, log_dirs=[lazy.mountpoint])
    out = run(broker, lazy, cut, accept_at_least=RECORDS // 3)
    assert not out.violations, out.violations
    assert out.held and out.accepted and out.after
    if cut != "after-answer":
        assert out.cut_short and out.cut_short <= set(out.after), "the cut-short commit's records did not come back"
