"""Families computed when Prometheus scrapes, from state the broker keeps anyway.

Nothing here runs on the request path: partition offsets and sizes come from the open logs, traffic from
`TopicTraffic`'s integers, connections from the broker's connection set, and group figures from the
coordinator's snapshot when one is plugged in. A scrape walks every partition once, on the event loop,
so it sees one consistent moment.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from pybroker.broker.metrics.groups import GroupsSnapshot, consumer_lag
from pybroker.broker.telemetry import prometheus as client_telemetry

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState

#: Kafka's classic group states, each shown (at 0 when no group is in it) so dashboards have every line
GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")


class BrokerCollector(Collector):
    def __init__(self, state: BrokerState, groups_snapshot: GroupsSnapshot | None = None) -> None:
        self.state = state
        self.groups_snapshot = groups_snapshot

    def describe(self) -> list[Any]:
        """Names only (registering must not walk the logs)."""
        return [*self._families(), *client_telemetry.fixed_families()]

    def _families(self) -> Iterator[Any]:
        yield CounterMetricFamily("pybroker_bytes_in", "Record bytes appended to a topic's logs.", labels=["topic"])
        yield CounterMetricFamily("pybroker_messages_in", "Records appended to a topic's logs.", labels=["topic"])
        yield CounterMetricFamily("pybroker_bytes_out", "Record bytes returned to fetching clients.",
                                  labels=["topic"])
        yield GaugeMetricFamily("pybroker_connections", "Open client connections.")
        yield GaugeMetricFamily("pybroker_request_memory_bytes",
                                "Request bytes held in memory (queued.max.request.bytes counts them).")
        yield GaugeMetricFamily("pybroker_request_memory_waiting_connections",
                                "Connections paused until request memory is released.")
        yield GaugeMetricFamily("pybroker_topics", "Topics.")
        yield GaugeMetricFamily("pybroker_partitions", "Partitions (all topics).")
        yield GaugeMetricFamily("pybroker_partition_log_end_offset", "Offset the next record will get.",
                                labels=["topic", "partition"])
        yield GaugeMetricFamily("pybroker_partition_log_start_offset", "First offset still readable.",
                                labels=["topic", "partition"])
        yield GaugeMetricFamily("pybroker_partition_unflushed_messages", "Offsets appended but not yet fsynced.",
                                labels=["topic", "partition"])
        yield GaugeMetricFamily("pybroker_partition_segments", "Segment files of a partition.",
                                labels=["topic", "partition"])
        yield GaugeMetricFamily("pybroker_log_size_bytes", "Bytes of a partition's segments on disk.",
                                labels=["topic", "partition", "log_dir"])
        yield GaugeMetricFamily("pybroker_log_dirs", "Configured log directories.")
        yield GaugeMetricFamily("pybroker_log_dirs_offline", "Log directories taken offline by an I/O error.")
        yield GaugeMetricFamily("pybroker_groups", "Consumer groups by state.", labels=["state"])
        yield GaugeMetricFamily("pybroker_group_members", "Members of a consumer group.", labels=["group"])
        yield GaugeMetricFamily("pybroker_consumer_group_lag",
                                "Log end offset minus the group's committed offset.",
                                labels=["group", "topic", "partition"])
        yield GaugeMetricFamily("pybroker_info", "Always 1; the labels say which broker this is.",
                                labels=["node_id", "cluster_id"])

    def collect(self) -> Iterator[Any]:
        families = {family.name: family for family in self._families()}
        state = self.state
        logs = state.logs
        topics = logs.topics()
        for topic, counts in sorted(state.traffic.snapshot(topics).items()):
            families["pybroker_bytes_in"].add_metric([topic], counts.bytes_in)
            families["pybroker_messages_in"].add_metric([topic], counts.messages_in)
            families["pybroker_bytes_out"].add_metric([topic], counts.bytes_out)
        families["pybroker_connections"].add_metric([], len(state.connections))
        families["pybroker_request_memory_bytes"].add_metric([], state.guard.pool.used)
        families["pybroker_request_memory_waiting_connections"].add_metric([], state.guard.pool.waiting)
        families["pybroker_topics"].add_metric([], len(topics))
        partitions = sorted(logs.logs(), key=lambda log: (log.topic, log.partition))
        families["pybroker_partitions"].add_metric([], len(partitions))
        for log in partitions:
            labels = [log.topic, str(log.partition)]
            segments = log.segments
            families["pybroker_partition_log_end_offset"].add_metric(labels, segments[-1].next_offset)
            families["pybroker_partition_log_start_offset"].add_metric(labels, log.log_start_offset)
            families["pybroker_partition_unflushed_messages"].add_metric(labels, log.unflushed_messages)
            families["pybroker_partition_segments"].add_metric(labels, len(segments))
            directory = logs.dir_of(log.topic, log.partition)
            families["pybroker_log_size_bytes"].add_metric(
                [*labels, str(directory) if directory else ""], sum(s.size for s in segments))
        families["pybroker_log_dirs"].add_metric([], len(logs.dirs))
        families["pybroker_log_dirs_offline"].add_metric([], len(logs.offline_dirs))
        if self.groups_snapshot is not None:
            self._collect_groups(families)
        families["pybroker_info"].add_metric([str(state.node_id), state.cluster_id], 1)
        yield from families.values()
        yield from client_telemetry.families(state.client_metrics, state.clock_ms())

    def _collect_groups(self, families: dict[str, Any]) -> None:
        assert self.groups_snapshot is not None
        logs = self.state.logs

        def end_offset(topic: str, partition: int) -> int | None:
            log = logs.get_log(topic, partition)
            return None if log is None else log.log_end_offset

        by_state = dict.fromkeys(GROUP_STATES, 0)
        for group in sorted(self.groups_snapshot(), key=lambda g: g.group_id):
            by_state[group.state] = by_state.get(group.state, 0) + 1
            families["pybroker_group_members"].add_metric([group.group_id], group.members)
            for topic, partition, lag in consumer_lag(group, end_offset):
                families["pybroker_consumer_group_lag"].add_metric([group.group_id, topic, str(partition)], lag)
        for name, count in by_state.items():
            families["pybroker_groups"].add_metric([name], count)
