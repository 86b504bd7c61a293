"""The files in examples/ that an operator copies: the server.properties loads with no unknown key and starts a
broker; the systemd unit runs that program with that file and stops it the way the broker expects."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest

from pybroker.config.definitions import BROKER
from pybroker.config.properties import load_properties
from tests.integration.brokers import REPO_ROOT, BrokerProcess, free_port

EXAMPLES = REPO_ROOT / "examples"


def test_example_server_properties_uses_only_known_keys_and_starts_a_broker(tmp_path: Path) -> None:
    properties = load_properties(EXAMPLES / "server.properties")
    assert properties and not set(properties) - set(BROKER), sorted(set(properties) - set(BROKER))
    port = free_port()
    # the file as shipped, with a scratch log dir and a free port in place of /var/lib/pybroker and 9092
    text = (EXAMPLES / "server.properties").read_text()
    text = text.replace("/var/lib/pybroker/data", str(tmp_path / "data")).replace(":9092", f":{port}")
    config = tmp_path / "server.properties"
    config.write_text(text)
    proc = BrokerProcess(tmp_path / "broker", {}, port=port)
    proc.command = lambda: [*BrokerProcess.command(proc)[:4], "--config", str(config)]  # type: ignore[method-assign]
    proc.start()
    try:
        assert "unknown config keys ignored" not in proc.log_path.read_text()
        proc.stop(expect_code=0)
    finally:
        proc.close()


def test_systemd_unit_runs_the_broker_with_the_example_config() -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(EXAMPLES / "pybroker.service")
    service = unit["Service"]
    assert service["ExecStart"].split()[1:4] == ["start", "--config", "/etc/pybroker/server.properties"]
    assert service["KillSignal"] == "SIGTERM" and int(service["TimeoutStopSec"]) >= 30
    assert service["RestartPreventExitStatus"] == "2"  # a config mistake is not retried
    assert "/var/lib/pybroker" in service["ReadWritePaths"]
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed: the unit's syntax was checked by the parser only")
    done = subprocess.run([analyze, "verify", str(EXAMPLES / "pybroker.service")], capture_output=True, text=True,
                          timeout=60, check=False)
    problems = [line for line in done.stderr.splitlines() if "pybroker.service" in line and
                "Command /opt/pybroker/bin/pybroker is not executable" not in line and "not found" not in line]
    assert not problems, done.stderr
