"""Families computed when Prometheus scrapes, from state the broker keeps anyway.

Nothing here runs on the request path: partition offsets and sizes come from the open logs, traffic from
`TopicTraffic`'s integers, connections from the broker's connection set, and group figures from the
coordinator's snapshot when one is plugged in. A scrape walks every partition once, on the event loop,
so it sees one consistent moment.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from pybroker.broker.metrics.groups import GroupsSnapshot, consumer_lag
from pybroker.broker.telemetry import prometheus as client_telemetry
from pybroker.broker.transactions.state_machine import TxnState

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
        yield GaugeMetricFamily("pybroker_page_cache_log_bytes",
                                "Log bytes on the disk that the page-cache budget counts as cached (log.page.cache.max.bytes).")
        yield CounterMetricFamily("pybroker_page_cache_dropped_bytes",
                                  "Log bytes dropped from the page cache: past the budget, or read again and sent.")
        yield CounterMetricFamily("pybroker_flush_window_rounds",
                                  "Wakes of the acks=1 flush window that handed logs to an fsync (flush.ms).")
        yield CounterMetricFamily("pybroker_flush_window_flushes",
                                  "Logs the acks=1 flush window handed to an fsync (one per window per dirty log).")
        yield GaugeMetricFamily("pybroker_flush_window_pending_logs",
                                "Logs holding acks=0/1 data not yet fsynced, each with a flush.ms deadline.")
        yield GaugeMetricFamily("pybroker_log_dirs_offline", "Log directories taken offline by an I/O error.")
        yield GaugeMetricFamily("pybroker_log_dir_free_bytes",
                                "Bytes free for the broker on a log directory's file system.", labels=["log_dir"])
        yield GaugeMetricFamily("pybroker_log_dir_total_bytes", "Size of a log directory's file system.",
                                labels=["log_dir"])
        yield GaugeMetricFamily("pybroker_log_dir_online", "1 while a log directory serves, 0 once offline.",
                                labels=["log_dir"])
        yield GaugeMetricFamily("pybroker_groups", "Consumer groups by state.", labels=["state"])
        yield GaugeMetricFamily("pybroker_group_members", "Members of a consumer group.", labels=["group"])
        yield GaugeMetricFamily("pybroker_consumer_group_lag",
                                "Log end offset minus the group's committed offset.",
                                labels=["group", "topic", "partition"])
        yield GaugeMetricFamily("pybroker_transactional_ids", "Transactional ids by the state of their transaction.",
                                labels=["state"])
        yield GaugeMetricFamily("pybroker_transaction_oldest_open_seconds",
                                "Age of the oldest open transaction (0 when none is open); it holds back the "
                                "last stable offset of every partition it wrote to.")
        yield CounterMetricFamily("pybroker_fetch_session_requests",
                                  "Fetch requests by session kind (KIP-227): full (epoch 0, asks for a session), "
                                  "incremental, sessionless (epoch -1), error (unknown session, wrong epoch).",
                                  labels=["kind"])
        yield GaugeMetricFamily("pybroker_fetch_sessions", "Fetch sessions in the cache "
                                "(max.incremental.fetch.session.cache.slots at most).")
        yield GaugeMetricFamily("pybroker_fetch_session_partitions", "Partitions cached by all fetch sessions.")
        yield CounterMetricFamily("pybroker_fetch_session_evictions",
                                  "Fetch sessions evicted to make room for another (Kafka's eviction rules).")
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
        families["pybroker_page_cache_log_bytes"].add_metric([], logs.page_cache.cached_bytes)
        families["pybroker_page_cache_dropped_bytes"].add_metric([], logs.page_cache.dropped_bytes)
        window = logs.flush_window
        if window is not None:
            families["pybroker_flush_window_rounds"].add_metric([], window.rounds)
            families["pybroker_flush_window_flushes"].add_metric([], window.flushes)
            families["pybroker_flush_window_pending_logs"].add_metric([], window.pending)
        families["pybroker_log_dirs_offline"].add_metric([], len(logs.offline_dirs))
        for directory in logs.dirs:
            label = [str(directory)]
            families["pybroker_log_dir_online"].add_metric(label, 0 if directory in logs.offline_dirs else 1)
            space = _disk_space(directory)
            if space is not None:
                families["pybroker_log_dir_free_bytes"].add_metric(label, space[0])
                families["pybroker_log_dir_total_bytes"].add_metric(label, space[1])
        if self.groups_snapshot is not None:
            self._collect_groups(families)
        self._collect_transactions(families)
        sessions = state.fetch_sessions
        for kind, count in sessions.fetches.items():
            families["pybroker_fetch_session_requests"].add_metric([kind], count)
        families["pybroker_fetch_sessions"].add_metric([], len(sessions))
        families["pybroker_fetch_session_partitions"].add_metric([], sessions.total_partitions)
        families["pybroker_fetch_session_evictions"].add_metric([], sessions.evictions)
        families["pybroker_info"].add_metric([str(state.node_id), state.cluster_id], 1)
        yield from families.values()
        yield from client_telemetry.families(state.client_metrics, state.clock_ms())

    def _collect_transactions(self, families: dict[str, Any]) -> None:
        by_state, oldest = _transaction_figures(self.state)
        for name, count in by_state.items():
            families["pybroker_transactional_ids"].add_metric([name], count)
        families["pybroker_transaction_oldest_open_seconds"].add_metric([], oldest)

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


def _transaction_figures(state: BrokerState) -> tuple[dict[str, int], float]:
    """(transactional ids per state name, age in seconds of the oldest open transaction)."""
    by_state = {s.value: 0 for s in TxnState if s is not TxnState.DEAD}
    now = state.clock_ms()
    oldest = 0.0
    for meta in state.transactions.all():
        by_state[meta.state.value] = by_state.get(meta.state.value, 0) + 1
        if meta.state is TxnState.ONGOING and meta.start_ms >= 0:
            oldest = max(oldest, (now - meta.start_ms) / 1000)
    return by_state, oldest


def _disk_space(directory: Path) -> tuple[int, int] | None:
    """(bytes free to an unprivileged writer, file system size), or None when the dir cannot be asked (a
    vanished or failing disk: its `online` series says the rest)."""
    try:
        stats = os.statvfs(directory)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize, stats.f_blocks * stats.f_frsize
