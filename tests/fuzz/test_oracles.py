"""The fuzz target's oracles catch what they are there for: a broken broker must make a finding.

Each test plants one fault (a handler that raises, spins, never finishes, answers with the wrong
message; a writer that drops answers; a memory limit already passed) and feeds one ApiVersions seed.
"""

from __future__ import annotations

import asyncio
import signal
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tests.fuzz.target as target_module
from pybroker.broker.dispatch import REGISTRY, HandlerSpec, load_handlers
from pybroker.broker.send_queue import CopyingWriter, SendQueue
from pybroker.protocol.messages.metadata import MetadataResponse
from tests.fuzz.seeds import load_seeds
from tests.fuzz.target import Finding, FuzzTarget, replay_bytes

API_VERSIONS = 18


def _api_versions_input() -> Any:
    frame = load_seeds()[(API_VERSIONS, 3)][0]
    return replay_bytes(struct.pack(">i", len(frame)) + frame, seed=1, index=2)


async def _run_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                    handler: Callable[[Any, Any], Any] | None = None) -> Finding | None:
    load_handlers()
    if handler is not None:
        spec = REGISTRY[API_VERSIONS]
        monkeypatch.setitem(REGISTRY, API_VERSIONS, HandlerSpec(spec.api_key, spec.min_version, spec.max_version,
                                                                handler))
    async with FuzzTarget(tmp_path) as target:
        return await target.run(_api_versions_input())


async def test_an_unplanted_input_makes_no_finding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert await _run_with(tmp_path, monkeypatch) is None


async def test_a_handler_that_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(ctx: Any, request: Any) -> Any:
        raise KeyError("planted")

    finding = await _run_with(tmp_path, monkeypatch, broken)
    assert finding is not None and finding.kind == "error-logged", finding


async def test_work_that_never_finishes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(target_module, "WORK_BOUND_S", 0.3)

    def stuck(ctx: Any, request: Any) -> Any:
        return asyncio.get_running_loop().create_future()  # a bare awaitable: work, not a pure wait

    finding = await _run_with(tmp_path, monkeypatch, stuck)
    assert finding is not None and finding.kind == "hang", finding


async def test_a_handler_spinning_on_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(target_module, "SYNC_BOUND_S", 0.3)

    def spin(ctx: Any, request: Any) -> Any:
        while True:
            pass

    finding = await _run_with(tmp_path, monkeypatch, spin)
    assert finding is not None and finding.kind == "hang", finding


async def test_an_answer_of_the_wrong_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def wrong(ctx: Any, request: Any) -> Any:
        return MetadataResponse(brokers=[], topics=[])

    finding = await _run_with(tmp_path, monkeypatch, wrong)
    assert finding is not None and finding.kind == "bad-answer", finding


async def test_an_answer_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _drop_answers(monkeypatch)
    finding = await _run_with(tmp_path, monkeypatch)
    assert finding is not None and finding.kind == "lost-answer", finding


async def test_memory_over_its_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(target_module, "MEMORY_EVERY", 1)
    monkeypatch.setattr(target_module, "MEMORY_LIMIT_MB", -1.0)
    finding = await _run_with(tmp_path, monkeypatch)
    assert finding is not None and finding.kind == "memory", finding


async def test_a_warning_flood(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pybroker.broker import connection

    def chatty(ctx: Any, request: Any) -> Any:
        for _ in range(5):
            connection.log.warning("again")  # the target's recording logger while it runs
        return spec.fn(ctx, request)

    load_handlers()
    spec = REGISTRY[API_VERSIONS]
    finding = await _run_with(tmp_path, monkeypatch, chatty)
    assert finding is not None and finding.kind == "noisy-log", finding


async def test_two_connections_at_once_are_checked_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    frame = load_seeds()[(API_VERSIONS, 3)][0]
    prefixed = struct.pack(">i", len(frame)) + frame
    item = replay_bytes(prefixed + prefixed[:4] + struct.pack(">hhi", API_VERSIONS, 3, 99) + prefixed[12:],
                        connections=2)
    load_handlers()
    async with FuzzTarget(tmp_path) as target:
        assert await target.run(item) is None
        _drop_answers(monkeypatch)
        finding = await target.run(item)
    assert finding is not None and finding.kind == "lost-answer", finding
    assert target.stats.answered == 2


async def test_a_watchdog_alarm_of_the_caller_survives_the_target(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        assert await _run_with(tmp_path, monkeypatch) is None
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 0.5 or fired
        await asyncio.sleep(0.6)
        assert fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


async def test_what_the_verifier_finds_on_disk_at_a_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pybroker.storage.verify import Problem, Report

    monkeypatch.setattr(target_module, "RESET_EVERY", 1)
    monkeypatch.setattr(target_module, "check_log_dir",
                        lambda path: Report(problems=[Problem(str(path / "t-0" / "0.log"), 61, "planted")]))
    finding = await _run_with(tmp_path, monkeypatch)
    assert finding is not None and finding.kind == "corrupt-log" and "planted" in finding.detail, finding


def _drop_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that loses every answer, on plain TCP and TLS alike."""
    for writer in (SendQueue, CopyingWriter):
        monkeypatch.setattr(writer, "write", lambda self, chunks: None)
