"""The short power-loss campaign of `make test`: a few cuts of a busy broker, each checked.

One campaign (`tests/powerloss/campaign.py`) is shared by the module: one lazy mount, one broker with two
log dirs, and the whole workload of `tests/powerloss/workload.py` (idempotent and transactional
producers, group commits, a compacting cleaner, retention, topic churn, log-dir moves, acks=1 records).
Each test makes one cut, at a targeted operation or at a random moment, restarts the broker and runs
every check of `tests/powerloss/checks.py`; the last one also stops the broker cleanly and runs
`pybroker check-log`. The long campaign, with every target and a hundred cuts, is `make soak`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.powerloss.campaign import Campaign
from tests.powerloss.checks import check_log
from tests.powerloss.mount import fuse_unavailable

pytestmark = pytest.mark.skipif(fuse_unavailable() is not None, reason=fuse_unavailable() or "")

SEED = 28
TARGETED = (
    "segment roll (create of a new .log)",
    "cleaner swap (rename of a .swap)",
    "__transaction_state append",
)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Campaign]:
    running = Campaign(tmp_path_factory.mktemp("campaign"), SEED, check_log_every=0, say=lambda line: None)
    try:
        running.begin()
        yield running
    finally:
        running.close()


@pytest.mark.parametrize("target", TARGETED)
def test_a_cut_at_a_targeted_operation_loses_nothing_acknowledged(campaign: Campaign, target: str) -> None:
    findings = campaign.cut_and_check(target)
    assert campaign.summary.targeted[target] == 1, f"the trigger never fired: {target}"
    assert not findings.violations, "\n".join(findings.violations)


def test_a_cut_at_a_random_moment_loses_nothing_acknowledged_and_the_dirs_check_clean(campaign: Campaign) -> None:
    findings = campaign.cut_and_check(None)
    assert not findings.violations, "\n".join(findings.violations)
    campaign.broker.stop()
    try:
        assert not check_log(campaign.log_dirs)
    finally:
        campaign.broker.start()
    acknowledged = campaign.summary.acknowledged
    assert acknowledged["pl-idem"] and acknowledged["transactions"] and acknowledged["offset commits"], acknowledged
