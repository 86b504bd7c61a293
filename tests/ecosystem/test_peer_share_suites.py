"""The peer clients' own share-group suites (KIP-932, issue 32), run from their repositories against a fresh
pybroker: librdkafka's C share tests (its `tests/` test-runner, 0170-0185 that need a broker) and
confluent-kafka-python's `tests/integration/share_consumer`.

Where their sources come from: only their repositories hold these tests, and CI reaches none of them (the
confluent-kafka sdist ships no tests; the rdkafka-sys crate vendors librdkafka 2.12.1, older than the share
tests; Debian's librdkafka is 2.0.2). So nothing here builds or fetches them: a test runs when its variable
names a ready copy, and skips with the reason otherwise.

- `PYBROKER_LIBRDKAFKA_TESTS`: librdkafka's `tests/` dir at its v2.15.0 tag, its `test-runner` built (the
  libraries it links beside it, in `../src` and `../src-cpp`, as librdkafka's own build leaves them);
- `PYBROKER_CK_PYTHON_SRC`: confluent-kafka-python at its v2.15.0 tag (its `tests/` package), run with the
  installed confluent-kafka; `PYBROKER_PEER_SUITES_PYDEPS`: a dir with what its conftest imports and our
  venv lacks (trivup, jwcrypto, python_jwt), put on its PYTHONPATH.

`make peer-suites` sets them from its cache variables and installs the Python extras. The whole suites take
minutes (docs/testing.md has the figures), so they run only with PYBROKER_PEER_SUITES=1; without it only a
subset of librdkafka's (under a minute) runs where its runner is given.

What does not pass is named in the KNOWN_* tables with the reason; anything else failing fails the test.
Each run gets its own broker and the broker's log must hold no traceback. Called from the pytest main thread.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.brokers import BrokerProcess
from tests.kafka_node import java_command, missing_reason

#: librdkafka's share tests that need a broker (its test.c list, TEST_BRKVER(4, 2, 0, 0)); the _local and
#: _mock ones run against librdkafka's own mock cluster and say nothing about pybroker
LIBRDKAFKA_SHARE_TESTS = ("0170", "0171", "0172", "0173", "0174", "0175", "0176", "0177", "0178", "0179",
                          "0180", "0181", "0184", "0185")
#: the part of them that runs without PYBROKER_PEER_SUITES (where the runner is given): several share groups
#: on one topic, each getting every record (16 s here); the others take one to fifteen minutes each
LIBRDKAFKA_QUICK = ("0175",)
#: the broker version the runner is told (its share tests want 4.2 or later; pybroker answers as Kafka 4.4)
LIBRDKAFKA_BROKER_VERSION = "4.4.0"
#: name prefix -> reason, for librdkafka tests that do not pass
KNOWN_LIBRDKAFKA: dict[str, str] = {}
#: the broker as librdkafka's share tests expect it: topics not auto-created (0184 deletes a topic while a
#: producer goes on, and expects its sends to fail rather than create the topic again with one partition;
#: Kafka 4.4 with auto-creation fails that test the same way)
LIBRDKAFKA_OVERRIDES = {"auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0"}

#: confluent-kafka-python's tests that do not pass, and why (node id suffix -> reason)
KNOWN_CK_PYTHON = {
    "test_share_consumer_deserialization.py": "FAIL: needs a Schema Registry (SR_URL); none runs here",
    "test_share_consumer_callbacks.py::test_throttle_cb_reentrant_call_raises_state":
        "SKIP: disabled by its authors (calling the consumer from throttle_cb crashes the client)",
    "test_share_consumer_callbacks.py::test_throttle_cb_fires_under_quota":
        "SKIP: needs kafka-configs.sh (Kafka's jars); runs where they are resolved",
    "test_share_consumer_callbacks.py::test_throttle_cb_emits_cleared_zero_event":
        "SKIP: needs kafka-configs.sh (Kafka's jars); runs where they are resolved",
}
#: the broker its suite expects: its consumers ask for one-second record locks by group config, and some of
#: its tests wait for a lock to lapse, so the broker's floor for the lock is one second as its CI sets it
CK_PYTHON_OVERRIDES = {"group.share.record.lock.duration.ms": "1000", "group.initial.rebalance.delay.ms": "0"}


def _peer_dir(variable: str, marker: str) -> Path:
    """The dir `variable` names, holding `marker`; skip with the reason when there is none."""
    value = os.environ.get(variable)
    if not value:
        pytest.skip(f"{variable} is not set: this suite's sources are on no registry CI reaches "
                    "(tests/ecosystem/test_peer_share_suites.py says where they come from; make peer-suites)")
    path = Path(value)
    if not (path / marker).exists():
        pytest.skip(f"{variable} holds no {marker}")
    return path


def _need_full() -> None:
    if not os.environ.get("PYBROKER_PEER_SUITES"):
        pytest.skip("the whole peer share suites take minutes: make peer-suites (PYBROKER_PEER_SUITES=1)")


@contextlib.contextmanager
def _broker(workdir: Path, overrides: dict[str, str]) -> Iterator[BrokerProcess]:
    """A fresh pybroker for one suite run; its log must end with no traceback."""
    broker = BrokerProcess(workdir, overrides)
    broker.start()
    try:
        yield broker
        log = broker.log_path.read_text(errors="replace")
        assert "Traceback" not in log, log[-4000:]
    finally:
        broker.close()


# -- librdkafka ----------------------------------------------------------------------------------------------

def _run_librdkafka(tests_dir: Path, broker: BrokerProcess, numbers: tuple[str, ...], workdir: Path,
                    timeout_s: float) -> tuple[dict[str, str], str]:
    """Run librdkafka's test-runner on `numbers` against `broker` (in parallel, three at a time); {test name:
    PASSED|FAILED|SKIPPED} from its summary table, and its output. Its test.conf is our own, in `workdir`."""
    conf = workdir / "test.conf"
    conf.write_text(f"bootstrap.servers={broker.bootstrap}\n"
                    "test.timeout.multiplier=3\n")  # a loaded two-core machine: its timeouts, tripled
    env = dict(os.environ, RDKAFKA_TEST_CONF=str(conf), TESTS=",".join(numbers),
               TEST_KAFKA_VERSION=LIBRDKAFKA_BROKER_VERSION,
               LD_LIBRARY_PATH=os.pathsep.join(str((tests_dir / d).resolve()) for d in ("../src", "../src-cpp")))
    log = workdir / "librdkafka.log"
    with log.open("wb") as out:
        # -L: none of the _local/_mock tests (no broker); -p3: three at a time (0174 alone takes 18 minutes)
        done = subprocess.run([str(tests_dir / "test-runner"), "-L", "-p3"], cwd=workdir, env=env,
                              stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s)
    text = re.sub(r"\x1b\[[0-9;]*m|\x1b\(B", "", log.read_text(errors="replace"))
    # each test's own verdict line (the summary table is not printed when the runner aborts at exit on
    # threads a failed test left behind)
    results = {name: "PASSED" for name in re.findall(r"=+ Test (\d{4}_\w+) PASSED =+", text)}
    results.update({name: "FAILED" for name in re.findall(r'^### Test "(\d{4}_\w+)[ "]', text, re.M)})
    if done.returncode != 0 and "FAILED" not in results.values():
        results["(run)"] = f"FAILED: exit {done.returncode}"
    return results, text


def _check_librdkafka(results: dict[str, str], text: str, numbers: tuple[str, ...]) -> None:
    print("librdkafka share tests:", Counter(results.values()))
    unexpected = {name: verdict for name, verdict in results.items() if verdict != "PASSED" and not any(
        name.startswith(known) and reason.split(":")[0] == verdict for known, reason in KNOWN_LIBRDKAFKA.items())}
    assert not unexpected, (unexpected, text[-8000:])
    ran = {name[:4] for name in results}
    assert ran == set(numbers), (sorted(ran), text[-4000:])


def test_librdkafka_share_tests_quick(tmp_path: Path) -> None:
    tests_dir = _peer_dir("PYBROKER_LIBRDKAFKA_TESTS", "test-runner")
    with _broker(tmp_path / "broker", LIBRDKAFKA_OVERRIDES) as broker:
        results, text = _run_librdkafka(tests_dir, broker, LIBRDKAFKA_QUICK, tmp_path, 600)
    _check_librdkafka(results, text, LIBRDKAFKA_QUICK)


def test_librdkafka_share_tests_all(tmp_path: Path) -> None:
    _need_full()
    tests_dir = _peer_dir("PYBROKER_LIBRDKAFKA_TESTS", "test-runner")
    with _broker(tmp_path / "broker", LIBRDKAFKA_OVERRIDES) as broker:
        results, text = _run_librdkafka(tests_dir, broker, LIBRDKAFKA_SHARE_TESTS, tmp_path, 3600)
    _check_librdkafka(results, text, LIBRDKAFKA_SHARE_TESTS)


# -- confluent-kafka-python ----------------------------------------------------------------------------------

def _junit_verdicts(report: Path) -> dict[str, str]:
    """{file::test: PASS|FAIL|SKIP} from a JUnit XML report."""
    verdicts: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        name = f"{module}.py::{case.get('name')}"
        tags = {child.tag for child in case}
        verdicts[name] = ("FAIL" if tags & {"failure", "error"} else "SKIP" if "skipped" in tags else "PASS")
    return verdicts


def _kafka_configs_home(home: Path) -> dict[str, str]:
    """KAFKA_HOME for the suite's quota tests, which shell out to `$KAFKA_HOME/bin/kafka-configs.sh` (librdkafka
    has no client-quota admin call): a two-line script running Kafka 4.4's own ConfigCommand from the resolved
    jars. Without them ({} here) those tests skip, as they do for want of the script."""
    if missing_reason() is not None:
        return {}
    script = home / "bin" / "kafka-configs.sh"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\nexec " + shlex.join(java_command("org.apache.kafka.tools.ConfigCommand"))
                      + ' "$@"\n')
    script.chmod(0o755)
    return {"KAFKA_HOME": str(home)}


def test_confluent_kafka_python_share_suite(tmp_path: Path) -> None:
    _need_full()
    source = _peer_dir("PYBROKER_CK_PYTHON_SRC", "tests/integration/share_consumer")
    pydeps = _peer_dir("PYBROKER_PEER_SUITES_PYDEPS", "trivup")
    report = tmp_path / "junit.xml"
    log = tmp_path / "ck-python.log"
    with _broker(tmp_path / "broker", CK_PYTHON_OVERRIDES) as broker, log.open("wb") as out:
        env = dict(os.environ, BROKERS=broker.bootstrap, PYTHONPATH=os.pathsep.join([str(pydeps), str(source)]))
        env.pop("SR_URL", None)
        env.update(_kafka_configs_home(tmp_path / "kafka-home"))
        subprocess.run([sys.executable, "-m", "pytest", "tests/integration/share_consumer", "-q",
                        "-p", "no:cacheprovider", f"--junitxml={report}", "-o", "junit_family=xunit1"],
                       cwd=source, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=3600)
    text = log.read_text(errors="replace")
    assert report.exists(), text[-4000:]
    verdicts = _junit_verdicts(report)
    print("confluent-kafka-python share_consumer:", Counter(verdicts.values()))

    def known(name: str, verdict: str) -> bool:
        test = name.split("[")[0]  # a parametrized test's every case
        return any(key in (test, test.split("::")[0]) and reason.split(":")[0] == verdict
                   for key, reason in KNOWN_CK_PYTHON.items())

    unexpected = {name: verdict for name, verdict in verdicts.items()
                  if verdict != "PASS" and not known(name, verdict)}
    assert not unexpected, (unexpected, text[-8000:])
    assert len(verdicts) > 100, text[-4000:]
