"""The open-file limit raised at start, and the partition budget taken from it."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from pybroker.broker import resource_limits
from pybroker.broker.resource_limits import apply_partition_limits, partition_budget, raise_open_file_limit
from pybroker.config.broker_config import BrokerConfig
from pybroker.storage.log_manager import LogManager


def test_the_budget_keeps_a_quarter_and_at_least_256_descriptors() -> None:
    assert partition_budget(1024) == 768
    assert partition_budget(300) == 44
    assert partition_budget(100) == 0
    assert partition_budget(1_048_576) == 786_432
    assert partition_budget(resource.RLIM_INFINITY) == 2**31 - 1


@pytest.mark.parametrize(("soft", "configured", "expected", "source"), [
    (1024, 10_000, 768, "open-file budget"),
    (1_048_576, 10_000, 10_000, "max.broker.partitions"),
])
def test_the_smaller_cap_applies_and_says_where_it_comes_from(
        tmp_path: Path, soft: int, configured: int, expected: int, source: str) -> None:
    config = BrokerConfig.load({"log.dirs": str(tmp_path), "max.broker.partitions": str(configured)})
    logs = LogManager([tmp_path], node_id=1, log_config_for=lambda _: None)  # type: ignore[arg-type, return-value]
    apply_partition_limits(logs, config, soft)
    assert logs.max_partitions == expected
    assert source in logs.max_partitions_source


def test_the_soft_limit_is_raised_to_the_hard_one(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(resource_limits.resource, "getrlimit", lambda _: (1024, 4096))
    monkeypatch.setattr(resource_limits.resource, "setrlimit", lambda _, limits: calls.append(limits))
    limits = raise_open_file_limit()
    assert calls == [(4096, 4096)]
    assert (limits.soft_before, limits.soft, limits.hard, limits.error) == (1024, 4096, 4096, None)


def test_a_refused_raise_keeps_the_soft_limit_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(_: int, __: tuple[int, int]) -> None:
        raise ValueError("not allowed")

    monkeypatch.setattr(resource_limits.resource, "getrlimit", lambda _: (1024, resource.RLIM_INFINITY))
    monkeypatch.setattr(resource_limits.resource, "setrlimit", refuse)
    limits = raise_open_file_limit()
    assert limits.soft == 1024 and limits.error is not None and "not allowed" in limits.error
