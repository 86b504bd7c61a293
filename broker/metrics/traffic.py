"""Per-topic traffic as plain integers: bytes and messages in, bytes out.

Handlers add to these on every produce and fetch, so they are ints in a dict (no lock, no label
lookup); the collector turns them into counter families at scrape time and shows only topics that
still exist, so a deleted topic's series disappear with it. Everything runs on the event loop's thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class TopicCounts:
    __slots__ = ("bytes_in", "bytes_out", "messages_in")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.messages_in = 0
        self.bytes_out = 0


class TopicTraffic:
    def __init__(self) -> None:
        self._topics: dict[str, TopicCounts] = {}

    def _counts(self, topic: str) -> TopicCounts:
        counts = self._topics.get(topic)
        if counts is None:
            counts = self._topics[topic] = TopicCounts()
        return counts

    def appended(self, topic: str, size: int, messages: int) -> None:
        """Records accepted into a topic's log (duplicates and refusals are not counted, as in Kafka)."""
        counts = self._counts(topic)
        counts.bytes_in += size
        counts.messages_in += messages

    def fetched(self, response: Any) -> None:
        """Record bytes handed to a fetching client, from a Fetch response's partitions."""
        for topic in response.responses:
            size = 0
            for partition in topic.partitions:
                records = partition.records
                if records is not None:
                    size += len(records)
            if size:
                self._counts(topic.topic).bytes_out += size

    def totals(self) -> tuple[int, int, int]:
        """(bytes in, messages in, bytes out) over every topic counted: the console's charts sample this every
        2 s from the broker's start, so it is a sum and nothing more."""
        counts = list(self._topics.values())
        return (sum(c.bytes_in for c in counts), sum(c.messages_in for c in counts),
                sum(c.bytes_out for c in counts))

    def snapshot(self, existing: Iterable[str]) -> dict[str, TopicCounts]:
        """The counts of topics that exist now; a deleted topic's counts are dropped."""
        alive = set(existing)
        for gone in [name for name in self._topics if name not in alive]:
            del self._topics[gone]
        return dict(self._topics)
