"""`__consumer_offsets` stops growing: the cleaner compacts it like any other compacted topic.

Thousands of commits of the same few partitions leave many segments of superseded offsets; once the
cleaner has run, the topic holds about one record per key, and the commits read back unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import kp_admin, kp_read

COMMITS = 1500
PARTITIONS = 4
CLEAN_TIMEOUT_S = 90.0


def _end_offset(bootstrap: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        tp = TopicPartition("__consumer_offsets", 0)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def _log_bytes(partition_dir: Path) -> int:
    return sum(p.stat().st_size for p in partition_dir.glob("*.log"))


@pytest.mark.slow
def test_offsets_topic_shrinks_after_many_commits(broker_factory: Callable[..., BrokerProcess],
                                                  new_topic: Callable[..., str]) -> None:
    proc = broker_factory({"offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "16384",
                           "log.cleaner.backoff.ms": "100"})
    topic = new_topic()
    with kp_admin(proc.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    group = new_topic("group")
    consumer = KafkaConsumer(bootstrap_servers=proc.bootstrap, group_id=group, enable_auto_commit=False,
                             request_timeout_ms=10_000)
    try:
        for i in range(COMMITS):
            consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(i, "", -1) for p in range(PARTITIONS)})
    finally:
        consumer.close(autocommit=False)
    partition_dir = proc.log_dirs[0] / "__consumer_offsets-0"
    records = COMMITS * PARTITIONS
    end = _end_offset(proc.bootstrap)
    assert end == records, "one record per committed partition"
    # uncompacted, that is at least ~60 bytes a record; compacted, little more than the active segment
    bound = 3 * 16384
    deadline = time.monotonic() + CLEAN_TIMEOUT_S
    while time.monotonic() < deadline and _log_bytes(partition_dir) > bound:
        time.sleep(0.5)
    assert _log_bytes(partition_dir) <= bound, f"{records} commit records still take {_log_bytes(partition_dir)} B"
    left = kp_read(proc.bootstrap, "__consumer_offsets", 1, expected=records, timeout=5)
    assert len(left) < records // 10
    assert max(r.offset for r in left) == end - 1  # the latest commit kept its offset
    with kp_admin(proc.bootstrap) as admin:
        offsets = admin.list_group_offsets(group)[group]
    assert {tp.partition: o.offset for tp, o in offsets.items()} == dict.fromkeys(range(PARTITIONS), COMMITS - 1)
    # and after a restart, replaying the compacted log gives the same commits
    proc.restart()
    with kp_admin(proc.bootstrap) as admin:
        deadline = time.monotonic() + 20
        while True:
            try:
                offsets = admin.list_group_offsets(group)[group]
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
    assert {tp.partition: o.offset for tp, o in offsets.items()} == dict.fromkeys(range(PARTITIONS), COMMITS - 1)
