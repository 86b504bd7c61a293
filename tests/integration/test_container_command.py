"""The container's ENTRYPOINT and CMD, run as they are (with this test's dir and ports in place of the
image's), start a broker whose HEALTHCHECK URL answers: the Dockerfile cannot drift from the CLI."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.integration.brokers import REPO_ROOT, _pdeathsig_prefix, api_versions_ok, free_port


def _exec_form(text: str, instruction: str) -> list[str]:
    match = re.search(rf"^{instruction} (\[.*?\])\s*$", text.replace("\\\n", " "), re.MULTILINE)
    assert match, instruction
    args: list[str] = json.loads(match.group(1))
    return args


def test_entrypoint_and_cmd_start_a_healthy_broker(tmp_path: Path, broker_target: str) -> None:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own container command")
    text = (REPO_ROOT / "docker" / "Dockerfile").read_text()
    port, metrics_port = free_port(), free_port()
    args = [*_exec_form(text, "ENTRYPOINT"), *_exec_form(text, "CMD")]
    assert args[:2] == ["pybroker", "start"]
    args = [a.replace("/var/lib/pybroker", str(tmp_path / "data")).replace(":9092", f":{port}")
            .replace("9404", str(metrics_port)).replace("0.0.0.0", "127.0.0.1") for a in args]
    healthcheck = re.search(r"urlopen\('http://127\.0\.0\.1:9404(/\w+)'", text)
    assert healthcheck and healthcheck.group(1) == "/healthz"
    log_path = tmp_path / "out.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen([*_pdeathsig_prefix(), sys.executable, "-m", "pybroker.broker.cli", *args[1:]],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not api_versions_ok("127.0.0.1", port) and time.monotonic() < deadline:
            assert proc.poll() is None, log_path.read_text()
            time.sleep(0.05)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/healthz", timeout=5) as page:
            assert page.status == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=5) as page:
            assert page.status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert proc.returncode == 0, log_path.read_text()
    first = json.loads(log_path.read_text().splitlines()[0])  # --log-format json from the ENTRYPOINT
    assert first["event"] == "starting"
