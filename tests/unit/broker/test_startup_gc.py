"""The collector is off while `pybroker start` starts, then on again with the start's heap frozen."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pybroker.broker import startup_gc


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    was_enabled = gc.isenabled()
    yield
    startup_gc._paused = False
    gc.unfreeze()
    if was_enabled:
        gc.enable()


def test_pause_then_resume_freezes_what_the_start_made_and_turns_the_collector_on() -> None:
    gc.enable()
    gc.unfreeze()
    startup_gc.pause()
    assert not gc.isenabled()
    made = [[i] for i in range(1000)]  # what a start keeps
    startup_gc.resume()
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(made)


def test_resume_without_a_pause_leaves_the_collector_alone() -> None:
    gc.disable()  # someone else's choice, e.g. a test process's
    gc.unfreeze()
    startup_gc.resume()
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_collector_already_off_is_not_turned_on_by_the_start() -> None:
    gc.disable()
    startup_gc.pause()
    startup_gc.resume()
    assert not gc.isenabled()


def test_a_started_broker_collects_again(tmp_path: Path) -> None:
    """Through the CLI's own path: once `serve` has started the listeners, collection is on."""
    script = r"""
import asyncio, gc, sys
from pybroker.broker import startup_gc
from pybroker.broker.app import BrokerApp
from pybroker.broker.loggers.structlog_setup import configure_logging
from pybroker.config.broker_config import BrokerConfig

startup_gc.pause()
configure_logging("json", "warning")

async def main():
    app = BrokerApp(BrokerConfig.load({"log.dirs": sys.argv[1], "listeners": "PLAINTEXT://127.0.0.1:0"}))
    serving = asyncio.create_task(app.serve())
    while not app.serving:
        await asyncio.sleep(0.01)
    print("collector", gc.isenabled(), gc.get_freeze_count() > 10_000)
    app.shutdown_event.set()
    await serving

asyncio.run(main())
"""
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    verdict = [line for line in done.stdout.splitlines() if line.startswith("collector ")]
    assert verdict == ["collector True True"]
