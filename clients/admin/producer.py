"""`pybroker produce`: records into one topic over Produce, batched per partition.

Partitioning is Kafka's default: a keyed record goes to `murmur2(key) % partitions` (so the same key
lands where a Java or librdkafka producer with the murmur2 partitioner would put it), keyless records
stick to one partition per send and move round-robin to the next (Kafka's sticky partitioner). A record
may name its partition. acks=0 is sent without waiting (the broker does not answer it).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pybroker.clients.admin.formats import OutgoingRecord
from pybroker.clients.admin.topics import check
from pybroker.clients.wire import WireClient, WireError
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.partitioner import partition_for_key
from pybroker.protocol.records.codecs import CODEC_NAMES
from pybroker.protocol.records.record import Record, build_batch

CODECS = {name: code for code, name in CODEC_NAMES.items()}
PRODUCE_TIMEOUT_MS = 30_000


class Producer:
    def __init__(self, client: WireClient, topic: str, *, acks: int = -1, compression: str = "none",
                 partition: int | None = None) -> None:
        self.client, self.topic, self.acks = client, topic, acks
        self.codec = CODECS[compression]
        self.partition = partition
        self.partitions = self._partition_count()
        if partition is not None and not 0 <= partition < self.partitions:
            raise WireError(f"topic {topic} has {self.partitions} partition(s): there is no partition {partition}",
                            "UNKNOWN_TOPIC_OR_PARTITION")
        self._sticky = 0

    def _partition_count(self) -> int:
        """Partitions of the topic (the broker may create it, as for any producer, if it allows that)."""
        request = MetadataRequest(topics=[MetadataRequestTopic(name=self.topic)], allow_auto_topic_creation=True)
        topic = self.client.call(request, max_version=12).topics[0]
        if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise WireError(f"topic {self.topic} does not exist and the broker does not create topics on first use "
                            f"(auto.create.topics.enable): pybroker topics create {self.topic}",
                            "UNKNOWN_TOPIC_OR_PARTITION")
        check(topic.error_code, None, f"topic {self.topic}")
        if not topic.partitions:
            raise WireError(f"topic {self.topic} has no partitions yet; try again", "LEADER_NOT_AVAILABLE")
        return len(topic.partitions)

    def _place(self, record: OutgoingRecord) -> int:
        if record.partition is not None:
            if record.partition >= self.partitions:
                raise WireError(f"topic {self.topic} has no partition {record.partition}",
                                "UNKNOWN_TOPIC_OR_PARTITION")
            return record.partition
        if self.partition is not None:
            return self.partition
        if record.key is not None:
            return partition_for_key(record.key, self.partitions)
        return self._sticky

    def send(self, records: Sequence[OutgoingRecord]) -> list[dict[str, Any]]:
        """Send one request holding a batch per partition; one row per partition with its first offset."""
        if not records:
            return []
        now = int(time.time() * 1000)
        by_partition: dict[int, list[OutgoingRecord]] = {}
        for record in records:
            by_partition.setdefault(self._place(record), []).append(record)
        self._sticky = (self._sticky + 1) % self.partitions
        data = []
        for partition, chosen in sorted(by_partition.items()):
            stamps = [now if r.timestamp_ms is None else r.timestamp_ms for r in chosen]
            base = min(stamps)
            batch = build_batch([Record(i, stamp - base, r.key, r.value, list(r.headers))
                                 for i, (r, stamp) in enumerate(zip(chosen, stamps, strict=True))],
                                compression=self.codec, base_timestamp=base)
            data.append(PartitionProduceData(index=partition, records=batch))
        request = ProduceRequest(transactional_id=None, acks=self.acks, timeout_ms=PRODUCE_TIMEOUT_MS,
                                 topic_data=[TopicProduceData(name=self.topic, partition_data=data)])
        counts = {p: len(rs) for p, rs in by_partition.items()}
        if self.acks == 0:
            self.client.send_only(request, max_version=9)
            return [{"topic": self.topic, "partition": p, "offset": None, "records": n} for p, n in sorted(counts.items())]
        response = self.client.call(request, max_version=9)
        rows = []
        for topic in response.responses:
            for part in topic.partition_responses:
                check(part.error_code, part.error_message, f"produce to {topic.name}-{part.index}")
                rows.append({"topic": topic.name, "partition": part.index, "offset": part.base_offset,
                             "records": counts.get(part.index, 0)})
        return sorted(rows, key=lambda r: r["partition"])
