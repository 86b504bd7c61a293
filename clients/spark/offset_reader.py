"""The driver's view of the topics: which partitions a subscription covers and their offsets.

Why kafka-python: its `KafkaConsumer` answers exactly the questions the planner asks, with no consumer
group (the broker needs no coordinator, and offsets live in Spark's checkpoint): `topics()` (a fresh
Metadata request each time, so new topics and partitions are seen), `beginning_offsets`, `end_offsets` and
`offsets_for_times` (ListOffsets with -2, -1 and a timestamp). Every lookup is retried
`fetchOffset.numRetries` times, `fetchOffset.retryIntervalMs` apart, as Spark's Kafka source does.

`resolve` turns an `OffsetBound` (earliest, latest, per-partition JSON with -2/-1, timestamps) into real
offsets for a set of partitions, with Spark's rules for each.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import KafkaError

from pybroker.clients.spark.offsets import EARLIEST, LATEST, Offsets, OptionError, TopicPartition, describe
from pybroker.clients.spark.options import BoundKind, OffsetBound, ReadOptions
from pybroker.clients.spark.reachability import require_a_broker

T = TypeVar("T")

#: a driver lookup waits at most this long per attempt before it counts as failed
LOOKUP_TIMEOUT_MS = 30_000


def new_consumer(bootstrap_servers: Iterable[str], config: Mapping[str, Any]) -> KafkaConsumer:
    """A group-less consumer that never creates topics, commits nothing and resets nothing by itself."""
    settings: dict[str, Any] = {
        "group_id": None,
        "enable_auto_commit": False,
        "allow_auto_create_topics": False,
        # an out-of-range fetch must reach us, so failOnDataLoss decides, not the client
        "auto_offset_reset": "none",
        "request_timeout_ms": 30_000,
        "reconnect_backoff_max_ms": 1000,
        "fetch_max_wait_ms": 200,
        **config,
    }
    return KafkaConsumer(bootstrap_servers=list(bootstrap_servers), **settings)


class OffsetReader:
    """Partitions and offsets for one query's subscription, from one lazily opened client."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._consumer: KafkaConsumer | None = None

    # -- lifetime (the reader objects that hold this are pickled: never pickle a socket) ---------------
    @property
    def consumer(self) -> KafkaConsumer:
        if self._consumer is None:
            require_a_broker(self.options.bootstrap_servers)  # a stopped broker fails in seconds, not minutes
            self._consumer = new_consumer(self.options.bootstrap_servers, self.options.consumer_config)
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "_consumer": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # -- lookups -------------------------------------------------------------------------------------
    def _retry(self, what: str, call: Callable[[], T]) -> T:
        attempts = self.options.fetch_offset_retries + 1
        for attempt in range(attempts):
            try:
                return call()
            except KafkaError as exc:
                if attempt + 1 == attempts:
                    raise RuntimeError(f"could not {what} from {','.join(self.options.bootstrap_servers)} "
                                       f"after {attempts} attempts: {exc!r}") from exc
                time.sleep(self.options.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def partitions(self) -> list[TopicPartition]:
        """The subscription's partitions now: existing topics only (a missing topic contributes none)."""
        subscription = self.options.subscription
        if subscription.assigned:
            return list(subscription.assigned)

        def lookup() -> list[TopicPartition]:
            existing = self.consumer.topics()  # a fresh Metadata request: new topics and partitions show up
            if subscription.pattern is not None:
                topics = sorted(t for t in existing if subscription.matches(t))
            else:
                topics = [t for t in subscription.topics if t in existing]
            return [TopicPartition(t, p) for t in topics for p in sorted(self.consumer.partitions_for_topic(t) or ())]
        return self._retry(f"list the partitions of {subscription.describe()}", lookup)

    def earliest(self, tps: Iterable[TopicPartition]) -> Offsets:
        return self._list_offsets(tps, "beginning_offsets", "earliest")

    def latest(self, tps: Iterable[TopicPartition]) -> Offsets:
        return self._list_offsets(tps, "end_offsets", "latest")

    def _list_offsets(self, tps: Iterable[TopicPartition], method: str, word: str) -> Offsets:
        wanted = [KafkaTopicPartition(tp.topic, tp.partition) for tp in tps]
        if not wanted:
            return {}

        def lookup() -> Offsets:
            got = getattr(self.consumer, method)(wanted, timeout_ms=LOOKUP_TIMEOUT_MS)
            return {TopicPartition(tp.topic, tp.partition): int(offset) for tp, offset in got.items()}
        return self._retry(f"fetch the {word} offsets of {len(wanted)} partitions", lookup)

    def for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """The first offset at or after each timestamp, or None where no record is that recent."""
        if not timestamps:
            return {}
        query = {KafkaTopicPartition(tp.topic, tp.partition): ts for tp, ts in timestamps.items()}

        def lookup() -> dict[TopicPartition, int | None]:
            got = self.consumer.offsets_for_times(query, timeout_ms=LOOKUP_TIMEOUT_MS)
            return {TopicPartition(tp.topic, tp.partition): None if found is None else int(found.offset)
                    for tp, found in got.items()}
        return self._retry(f"look up offsets by timestamp for {len(query)} partitions", lookup)

    # -- bounds --------------------------------------------------------------------------------------
    def resolve(self, bound: OffsetBound, tps: list[TopicPartition], *, starting: bool) -> Offsets:
        """Real offsets for `tps` from a starting or ending bound, by Spark's rules:

        - per-partition JSON (offsets or timestamps) must name exactly the subscribed partitions;
        - -2/-1 in offset JSON mean earliest/latest;
        - a timestamp with no record at or after it: a start fails (or, with
          startingOffsetsByTimestampStrategy=latest, starts at the end); an end is the latest offset.
        """
        kind = bound.kind
        if kind is BoundKind.EARLIEST:
            return self.earliest(tps)
        if kind is BoundKind.LATEST:
            return self.latest(tps)
        if kind in (BoundKind.OFFSETS, BoundKind.TIMESTAMPS):
            _check_covers(bound, tps, starting=starting)
        if kind is BoundKind.OFFSETS:
            specials = {tp: o for tp, o in bound.offsets.items() if o in (EARLIEST, LATEST)}
            earliest = self.earliest(tp for tp, o in specials.items() if o == EARLIEST)
            latest = self.latest(tp for tp, o in specials.items() if o == LATEST)
            return {tp: earliest.get(tp, latest.get(tp, bound.offsets[tp])) for tp in tps}
        timestamps = ({tp: bound.timestamp for tp in tps} if kind is BoundKind.TIMESTAMP and bound.timestamp is not None
                      else {tp: bound.offsets[tp] for tp in tps})
        found = self.for_times(timestamps)
        missing = [tp for tp in tps if found.get(tp) is None]
        if missing and starting and self.options.timestamp_strategy == "error":
            raise OptionError(
                f"no record at or after the starting timestamp in {describe({tp: timestamps[tp] for tp in missing})} "
                "(set startingOffsetsByTimestampStrategy to 'latest' to start at the end instead)")
        latest = self.latest(missing)
        return {tp: latest[tp] if tp in latest else int(found[tp] or 0) for tp in tps}


def _check_covers(bound: OffsetBound, tps: list[TopicPartition], *, starting: bool) -> None:
    option = ("starting" if starting else "ending") + (
        "Offsets" if bound.kind is BoundKind.OFFSETS else "OffsetsByTimestamp")
    named, subscribed = set(bound.offsets), set(tps)
    if named != subscribed:
        missing, extra = sorted(subscribed - named), sorted(named - subscribed)
        parts = []
        if missing:
            parts.append(f"it does not name {', '.join(f'{t}-{p}' for t, p in missing)}")
        if extra:
            parts.append(f"it names {', '.join(f'{t}-{p}' for t, p in extra)}, which the subscription does not have")
        raise OptionError(f"option {option!r} must give every subscribed partition: {'; '.join(parts)}")
