"""Pushed client metrics as Prometheus families, built at scrape time (KIP-714's broker-side export).

Each OTLP metric becomes the family `pybroker_client_<name>` (every character outside [a-zA-Z0-9_]
becomes `_`: `org.apache.kafka.producer.record.queue.time.avg` is
`pybroker_client_org_apache_kafka_producer_record_queue_time_avg`): a counter for a monotonic sum, else
a gauge. Each series is labelled with the client's `client_instance_id` and `client_id` and the data
point's own attributes (keys made label-safe; one that would clash is prefixed `attr_`). Series are
bounded where they are stored (`pybroker.broker.telemetry.clients`); `pybroker_client_telemetry_instances`
and `pybroker_client_telemetry_dropped_series` say how many instances are kept and how many series the
caps refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from pybroker.broker.telemetry.clients import ClientMetrics

PREFIX = "pybroker_client_"
RESERVED = ("client_instance_id", "client_id")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


def family_name(metric: str) -> str:
    return PREFIX + _UNSAFE.sub("_", metric)


def label_name(key: str) -> str:
    name = _UNSAFE.sub("_", key) or "attr"
    if name in RESERVED or name[0].isdigit() or name.startswith("__"):
        name = "attr_" + name
    return name


def fixed_families() -> Iterator[Any]:
    yield GaugeMetricFamily("pybroker_client_telemetry_instances",
                            "Client instances (KIP-714) whose pushed metrics are kept.")
    yield CounterMetricFamily("pybroker_client_telemetry_dropped_series",
                              "Pushed client metric series dropped by the per-instance cap.")


def families(telemetry: ClientMetrics, now_ms: int) -> Iterator[Any]:
    """The fixed families with their values, then one family per pushed metric name."""
    instances, dropped = fixed_families()
    by_name: dict[str, Metric] = {}
    for selectors, (metric, attributes), series in telemetry.snapshot(now_ms):
        name = family_name(metric)
        family = by_name.get(name)
        if family is None:
            kind = "counter" if series.kind == "counter" else "gauge"
            family = by_name[name] = Metric(name, f"Client metric {metric} (pushed by clients, KIP-714).", kind)
        labels = {"client_instance_id": selectors.get("client_instance_id", ""),
                  "client_id": selectors.get("client_id", "")}
        for key, value in attributes:
            labels.setdefault(label_name(key), value)
        family.add_sample(name + "_total" if family.type == "counter" else name, labels, series.value)
    instances.add_metric([], len(telemetry.instances))
    dropped.add_metric([], telemetry.dropped_series)
    yield instances
    yield dropped
    yield from (by_name[name] for name in sorted(by_name))
