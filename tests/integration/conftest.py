"""Fixtures that run a real broker process for stock Kafka clients to talk to.

- `broker` (module scope): one shared broker per test module. Tests share it by using unique topic
  names (`new_topic()`), which keeps the suite fast: starting a broker costs about a second.
- `broker_factory` (function scope): `broker_factory(overrides={...}, needs_restart=True)` starts a
  fresh broker with its own dirs; for tests that restart, SIGKILL or configure the broker.
- `new_topic`: a factory of topic names unique to the test.

`PYBROKER_TEST_TARGET=tansu` points the same tests at Tansu (fetched like the benchmark does) to check
the tests themselves against an independent broker; tests needing restarts or overrides skip there.

Every test here is marked `integration` by the collection hook below. A hang watchdog fails a test
after `PYBROKER_TEST_TIMEOUT` seconds (default 300: a test of 30 s on a quiet machine takes minutes on a
loaded one) with SIGALRM, and if even that does not get control back, dumps every thread's stack, kills
the brokers and exits hard 30 s later: a broken broker must cost minutes, never CI's whole budget.
"""

from __future__ import annotations

import faulthandler
import os
import re
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from tests.integration.brokers import (
    LIVE,
    BrokerProcess,
    TansuProcess,
    ensure_tansu,
    kill_all,
)
from tests.integration.clients import close_clients

HERE = Path(__file__).resolve().parent
TARGET = os.environ.get("PYBROKER_TEST_TARGET", "pybroker").strip().lower() or "pybroker"
TEST_TIMEOUT_S = float(os.environ.get("PYBROKER_TEST_TIMEOUT", "300"))
HARD_EXIT_GRACE_S = 30.0

if TARGET not in ("pybroker", "tansu"):
    raise pytest.UsageError(f"PYBROKER_TEST_TARGET must be pybroker or tansu, not {TARGET!r}")


# -- marking -------------------------------------------------------------------------------------------
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark everything under this folder `integration`, so `-m "not integration"` skips real processes."""
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.integration)


# -- hang watchdog -------------------------------------------------------------------------------------
class HungTestError(Exception):
    """Raised in the main thread by SIGALRM when a test runs past its time limit."""


def _on_alarm(signum: int, frame: object) -> None:
    raise HungTestError("integration test still running past its hang limit (PYBROKER_TEST_TIMEOUT, or its "
                        "hang_limit mark)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "hang_limit(seconds): the hang watchdog's limit for a test of many steps, "
                                       "each with a timeout of its own (at least PYBROKER_TEST_TIMEOUT)")


def _hang_limit_s(item: pytest.Item) -> float:
    mark = item.get_closest_marker("hang_limit")
    return max(TEST_TIMEOUT_S, float(mark.args[0])) if mark else TEST_TIMEOUT_S


def _hard_exit(capman: object | None, limit_s: float) -> None:
    # pytest holds fd 2 in a capture file that os._exit would throw away: give it back first
    suspend = getattr(capman, "suspend_global_capture", None)
    if suspend is not None:
        try:
            suspend(in_=False)
        except Exception as exc:
            sys.stderr.write(f"(could not suspend pytest's capture: {exc!r})\n")
    sys.stderr.write(f"\n*** integration test hung past {limit_s + HARD_EXIT_GRACE_S:.0f}s; "
                     "stacks follow, brokers killed, exiting ***\n")
    sys.stderr.flush()
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    kill_all()
    os._exit(70)


@pytest.fixture(autouse=True)
def _hang_watchdog(request: pytest.FixtureRequest) -> Iterator[None]:
    """SIGALRM fails just this test; the timer thread is the backstop when the main thread is stuck in C."""
    use_alarm = threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGALRM")
    previous = signal.signal(signal.SIGALRM, _on_alarm) if use_alarm else None
    limit_s = _hang_limit_s(request.node)
    if use_alarm:
        signal.setitimer(signal.ITIMER_REAL, limit_s)
    capman = request.config.pluginmanager.getplugin("capturemanager")
    backstop = threading.Timer(limit_s + HARD_EXIT_GRACE_S, _hard_exit, args=(capman, limit_s))
    backstop.daemon = True
    backstop.start()
    try:
        yield
    finally:
        backstop.cancel()
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_clients()


# -- broker log tails on failure -----------------------------------------------------------------------
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed and LIVE:
        for broker in sorted(LIVE, key=lambda b: b.port):
            report.sections.append((f"broker output ({broker.name} {broker.bootstrap})", broker.log_tail()))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    kill_all()


# -- fixtures ------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def broker_target() -> str:
    """"pybroker" or "tansu" (from PYBROKER_TEST_TARGET)."""
    return TARGET


@pytest.fixture(scope="session")
def tansu_binary() -> Path | None:
    if TARGET != "tansu":
        return None
    try:
        return ensure_tansu()
    except Exception as exc:
        pytest.skip(f"PYBROKER_TEST_TARGET=tansu but Tansu cannot be had: {exc}")


def _make(workdir: Path, tansu: Path | None, overrides: Mapping[str, str] | None = None,
          log_dirs: list[Path] | None = None) -> BrokerProcess:
    if tansu is not None:
        return TansuProcess(workdir, tansu)
    return BrokerProcess(workdir, overrides, log_dirs=log_dirs)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, tansu_binary: Path | None) -> Iterator[BrokerProcess]:
    """One broker shared by the tests of a module; its clean stop (exit 0) is checked at teardown."""
    proc = _make(tmp_path_factory.mktemp("broker"), tansu_binary,
                 {"auto.create.topics.enable": "true"})
    proc.start()
    try:
        yield proc
    finally:
        if proc.is_running():
            proc.stop(expect_code=0 if not isinstance(proc, TansuProcess) else None)
        proc.close()


BrokerFactory = Callable[..., BrokerProcess]


@pytest.fixture
def broker_factory(tmp_path: Path, tansu_binary: Path | None) -> Iterator[BrokerFactory]:
    """Start a fresh broker of the test's own: `broker_factory(overrides=..., needs_restart=...)`.

    Under the Tansu target a test that needs overrides or restarts is skipped (Tansu keeps data in
    memory and takes no Kafka config keys).
    """
    made: list[BrokerProcess] = []

    def factory(overrides: Mapping[str, str] | None = None, *, needs_restart: bool = False,
                log_dirs: list[Path] | None = None, start: bool = True) -> BrokerProcess:
        if tansu_binary is not None and (overrides or needs_restart or log_dirs):
            pytest.skip("Tansu target: no config overrides, restarts or log dirs")
        proc = _make(tmp_path / f"broker{len(made)}", tansu_binary, overrides, log_dirs)
        made.append(proc)
        return proc.start() if start else proc

    try:
        yield factory
    finally:
        close_clients()  # before the brokers go, or the producers log connection errors while they close
        for proc in made:
            proc.close()


@pytest.fixture
def new_topic(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """`new_topic("codec")` gives a legal topic name unique to this test, so tests can share one broker."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:80].strip("-.")

    def make(suffix: str = "") -> str:
        tail = f"-{suffix}" if suffix else ""
        return f"{base}{tail}-{uuid.uuid4().hex[:8]}"

    return make
