"""Every conformance scenario (tests/conformance/registry.py) against pybroker and Apache Kafka.

Each scenario runs against a fresh pybroker of its own; Kafka's answers come from the recording (the
default, no Kafka started) or from a live node (`PYBROKER_CONFORMANCE=live`/`record`: tests/conformance/
recording.py), through the same `Side` code. The two answer lists are compared field by field after
normalization (tests/conformance/normalize.py). A scenario with a `known` difference is a strict xfail.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.config.broker_config import BrokerConfig
from tests.conformance import recording
from tests.conformance.conftest import RECORDED_NOW
from tests.conformance.normalize import differences
from tests.conformance.registry import Scenario, load
from tests.conformance.settings import USERS, pybroker_config
from tests.conformance.side import Side

SCENARIOS = load()


def _params() -> list[Any]:
    return [pytest.param(sid, id=sid, marks=[pytest.mark.xfail(strict=True, reason=s.known)] if s.known else [])
            for sid, s in sorted(SCENARIOS.items())]


async def answers_of(scenario: Scenario, port: int) -> list[Any]:
    login = (scenario.login, USERS[scenario.login]) if scenario.login else None
    side = Side(port, scenario.id, login=login, messages=scenario.messages)
    try:
        await scenario.run(side)
    finally:
        side.close()
    return side.answers


def compared(scenario: Scenario, ours: list[Any], theirs: list[Any]) -> list[str]:
    """The differences that count: every one but those under a path the scenario does not compare."""
    found = differences(ours, theirs)
    return [d for d in found if not any(d.split(":", 1)[0].endswith(p) for p in scenario.ignoring)]


async def kafkas_answers(scenario: Scenario, request: pytest.FixtureRequest) -> list[Any]:
    if recording.mode() == "recorded":
        recorded = recording.load(scenario.family)
        if scenario.id not in recorded:
            pytest.fail(f"no recorded Kafka answer for {scenario.id}: run `make conformance RECORD=1`")
        answers: list[Any] = recorded[scenario.id]
        return answers
    kafka = request.getfixturevalue("kafka")
    port = await asyncio.to_thread(kafka.port, scenario.setting)  # a first start takes 10-20 s
    answers = await answers_of(scenario, port)
    if recording.mode() == "record":
        RECORDED_NOW[scenario.family][scenario.id] = answers
    return answers


RAM = Path("/dev/shm")


@pytest.fixture
def log_dir(tmp_path: Path) -> Iterator[Path]:
    """The fresh broker's log dir: in memory where Linux offers one (shared memory), else the test's tmp dir.
    These scenarios test answers, not durability, and each fresh broker fsyncs its topics' dirs: on a disk
    shared with other work that was 80 s for the suite, in memory 20 s."""
    if not (RAM.is_dir() and shutil.disk_usage(RAM).free > 256 << 20):
        yield tmp_path / "data"
        return
    made = Path(tempfile.mkdtemp(prefix="pybroker-conformance-", dir=RAM))
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


@pytest.mark.parametrize("sid", _params())
async def test_scenario(sid: str, log_dir: Path, request: pytest.FixtureRequest) -> None:
    scenario = SCENARIOS[sid]
    theirs = await kafkas_answers(scenario, request)
    broker = BrokerApp(BrokerConfig.load({**pybroker_config(scenario.setting), "log.dirs": str(log_dir)}))
    await broker.start()
    try:
        ours = await answers_of(scenario, broker.bound_ports[0])
    finally:
        await broker.stop()
    found = compared(scenario, ours, theirs)
    assert not found, f"{scenario.title}: pybroker and Kafka differ:\n" + "\n".join(found)
