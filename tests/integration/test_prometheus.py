"""A real Prometheus server scrapes a real broker over loopback: PromQL sees the messages and the consumer lag,
and every query of the Grafana dashboard (its variables at "All") is one this Prometheus accepts.

Prometheus is Debian's `prometheus` package (`make test` installs it). Outside CI a machine without it
skips this test with the reason; under CI=true its absence is a failure, so the check cannot go quiet.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from tests.integration.brokers import _pdeathsig_prefix, free_port
from tests.integration.clients import kp_producer
from tests.integration.metrics_broker import MetricsBrokerProcess

MESSAGES = 57
DASHBOARD = Path(__file__).resolve().parents[2] / "docker" / "grafana" / "dashboards" / "pybroker.json"


@pytest.fixture
def metrics_broker(tmp_path: Path, broker_target: str) -> Iterator[MetricsBrokerProcess]:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own metrics")
    proc = MetricsBrokerProcess(tmp_path / "broker")
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


def _prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        message = "the prometheus binary is missing (make test installs Debian's prometheus package)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def _query(port: int, promql: str) -> list[dict[str, object]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as page:
        answer = json.loads(page.read())
    assert answer["status"] == "success", answer
    result: list[dict[str, object]] = answer["data"]["result"]
    return result


def _until(check: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except OSError as exc:  # Prometheus still starting
            last = exc
        else:
            if last:
                return last
        time.sleep(0.5)
    raise AssertionError(f"{what}: still {last!r} after {timeout}s")


def _commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             request_timeout_ms=10_000)
    try:
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(offset, "", -1)})
    finally:
        consumer.close(autocommit=False)


def test_prometheus_scrapes_the_broker_and_promql_counts_the_messages(
        metrics_broker: MetricsBrokerProcess, tmp_path: Path, new_topic: Callable[..., str]) -> None:
    binary = _prometheus_binary()
    topic = new_topic()
    with kp_producer(metrics_broker.bootstrap, acks="all", linger_ms=0) as producer:
        for i in range(MESSAGES):
            producer.send(topic, b"m%d" % i, partition=0)
        producer.flush(timeout=20)
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: pybroker\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{metrics_broker.metrics_port}']\n")
    port = free_port()
    log_path = tmp_path / "prometheus.out"
    with open(log_path, "wb") as out:
        prometheus = subprocess.Popen(
            [*_pdeathsig_prefix(), binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp_path)
    try:
        promql = f'sum(pybroker_messages_in_total{{job="pybroker",topic="{topic}"}})'

        def counted() -> float | None:
            result = _query(port, promql)
            return float(result[0]["value"][1]) if result else None  # type: ignore[index]

        assert _until(counted, 60, f"{promql} via Prometheus") == MESSAGES
        up = _query(port, 'up{job="pybroker"}')
        assert up and up[0]["value"][1] == "1"  # type: ignore[index]
        end = _query(port, f'pybroker_partition_log_end_offset{{topic="{topic}",partition="0"}}')
        assert float(end[0]["value"][1]) == MESSAGES  # type: ignore[index]
        # consumer lag: log end minus the group's commit, falling to 0 once the group has caught up
        group = f"{topic}-group"
        lag_promql = f'pybroker_consumer_group_lag{{group="{group}",topic="{topic}",partition="0"}}'

        def lag_is(expected: float) -> Callable[[], bool]:
            def check() -> bool:
                result = _query(port, lag_promql)
                return bool(result) and float(result[0]["value"][1]) == expected  # type: ignore[index]
            return check

        _commit(metrics_broker.bootstrap, group, topic, 20)
        _until(lag_is(MESSAGES - 20), 60, f"{lag_promql} == {MESSAGES - 20}")
        _commit(metrics_broker.bootstrap, group, topic, MESSAGES)
        _until(lag_is(0), 60, f"{lag_promql} == 0")
        assert _query(port, 'pybroker_groups{state="Empty"}')
        _check_dashboard(port, topic, group)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- prometheus output ---\n{log_path.read_text()[-3000:]}") from exc
    finally:
        prometheus.terminate()
        try:
            prometheus.wait(15)
        except subprocess.TimeoutExpired:
            prometheus.kill()
            prometheus.wait(5)


def _dashboard_variables() -> dict[str, dict[str, object]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return {var["name"]: var for var in dashboard["templating"]["list"]}


def _with_variables(expr: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        expr = expr.replace(f"${name}", value)
    return expr.replace("$__rate_interval", "1m")


def _labels(series: dict[str, object]) -> dict[str, str]:
    metric = series["metric"]
    assert isinstance(metric, dict)
    return metric


def _check_dashboard(port: int, topic: str, group: str) -> None:
    """Every panel's query, with the variables at "All" as Grafana sends them, is valid PromQL for this
    Prometheus; the variables' own queries list the broker, the topic and the group; and "All" topics
    leaves out the internal ones (the offsets topic exists by now: the group committed)."""
    variables = _dashboard_variables()
    assert set(variables) >= {"instance", "topic", "group"}
    at_all = {name: str(var["allValue"]) for name, var in variables.items()}
    for name, var in variables.items():  # label_values(selector, label) -> the label's values
        match = re.fullmatch(r"label_values\((.+), (\w+)\)", str(var["definition"]))
        assert match is not None, var["definition"]
        selector, label = match.groups()
        found = {_labels(series).get(label) for series in
                 _query(port, f"group by ({label}) ({_with_variables(selector, at_all)})")}
        assert found, f"variable {name} lists nothing"
        if name == "topic":
            assert topic in found and "__consumer_offsets" in found
        if name == "group":
            assert group in found
    topics = {_labels(series)["topic"] for series in _query(
        port, _with_variables('pybroker_partition_log_end_offset{topic=~"$topic"}', at_all))}
    assert topic in topics and not any(name.startswith("__") for name in topics), topics
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = _with_variables(target["expr"], at_all)
            _query(port, expr)  # raises on a query Prometheus refuses
