"""A pybroker process that also serves its metrics port, for the metrics, Prometheus and CLI tests."""

from __future__ import annotations

import contextlib
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.brokers import BrokerProcess, free_port


class MetricsBrokerProcess(BrokerProcess):
    """`BrokerProcess` with `--metrics-port` (and any extra flags, e.g. `--log-format json`)."""

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None, *,
                 extra_args: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(workdir, overrides, **kwargs)
        self.metrics_port = free_port()
        self.extra_args = list(extra_args or [])

    def command(self) -> list[str]:
        return [*super().command(), "--metrics-port", str(self.metrics_port), *self.extra_args]

    def http_get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}{path}", timeout=5) as page:
                return page.status, page.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def log_lines(self) -> list[dict[str, Any]]:
        """The broker's stdout as parsed JSON objects (with `--log-format json`); raises on a non-JSON line."""
        lines = self.log_path.read_text().splitlines()
        return [json.loads(line) for line in lines if not line.startswith("=== start #")]


@contextlib.contextmanager
def running_pybroker(workdir: Path, broker_target: str, overrides: dict[str, str], *,
                     why: str) -> Iterator[MetricsBrokerProcess]:
    """A started `MetricsBrokerProcess`, closed after; skips the test when the suite targets another
    broker (`why`: what only pybroker has, e.g. its own metric or setting)."""
    if broker_target != "pybroker":
        pytest.skip(why)
    proc = MetricsBrokerProcess(workdir, overrides)
    try:
        proc.start()
        yield proc
    finally:
        proc.close()
