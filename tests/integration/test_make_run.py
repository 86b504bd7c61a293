"""`make run`'s command, run as it is (with this test's dir and ports in place of its own) on a terminal, as a
new user runs it: the README's console URL answers, the start says where the console is in one short line,
and the first line a person reads is short (the full config goes to the JSON log or `--log-level debug`)."""

from __future__ import annotations

import os
import pty
import re
import shlex
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.integration.brokers import REPO_ROOT, _pdeathsig_prefix, api_versions_ok, free_port

#: a first line a person can read on an ordinary terminal without it wrapping into a wall
SHORT_LINE = 300
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _run_command() -> list[str]:
    """The recipe of `make run` that starts the broker (make -n: nothing is installed or run)."""
    out = subprocess.run(["make", "-s", "-n", "run"], cwd=REPO_ROOT,
                         capture_output=True, text=True, check=True).stdout
    lines = [line for line in out.splitlines() if "pybroker start" in line]
    assert len(lines) == 1, out
    return shlex.split(lines[0])


def _read_until(fd: int, wanted: re.Pattern[str], deadline: float) -> str:
    text = ""
    while time.monotonic() < deadline and not wanted.search(text):
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        text += chunk.decode(errors="replace")
    return ANSI.sub("", text)


def test_make_run_serves_the_readme_console_url_and_starts_with_a_short_line(tmp_path: Path,
                                                                             broker_target: str) -> None:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own Makefile")
    args = _run_command()
    assert args[0].endswith(".venv/bin/pybroker") and args[1] == "start", args
    readme = (REPO_ROOT / "README.md").read_text()
    url = re.search(r"open `(http://127\.0\.0\.1:(\d+)/console/)`", readme)
    assert url, "README.md names the console's URL"
    assert any(arg == url.group(2) for arg in args), f"`make run` serves no console on {url.group(2)}: {args}"
    port, console_port = free_port(), free_port()
    args = [arg.replace("./data", str(tmp_path / "data")).replace(":9092", f":{port}")
            .replace(url.group(2), str(console_port)) for arg in args]
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*_pdeathsig_prefix(), str(REPO_ROOT / ".venv" / "bin" / "pybroker"), *args[1:]],
                            stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, cwd=tmp_path)
    os.close(follower)
    try:
        deadline = time.monotonic() + 30
        while not api_versions_ok("127.0.0.1", port) and time.monotonic() < deadline:
            assert proc.poll() is None, _read_until(leader, re.compile("$^"), time.monotonic() + 1)
            time.sleep(0.05)
        ours = url.group(1).replace(url.group(2), str(console_port))
        output = _read_until(leader, re.compile(re.escape(ours)), time.monotonic() + 10)
        with urllib.request.urlopen(ours, timeout=5) as page:
            assert page.status == 200
            assert b"<html" in page.read().lower()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        os.close(leader)
    lines = [line for line in output.splitlines() if line.strip()]
    assert "starting" in lines[0], output[:2000]
    assert len(lines[0]) <= SHORT_LINE, f"a {len(lines[0])}-character first line on a terminal: {lines[0][:400]}"
    console = [line for line in lines if ours in line]
    assert console and len(console[0]) <= SHORT_LINE, output[-3000:]
