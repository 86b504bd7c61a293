"""Client instances (KIP-714) and the metrics they pushed, bounded for a scrape.

A client instance is created by its first GetTelemetrySubscriptions (the zero id gets a new one) and
remembers its plan (the subscriptions it matched), when it last asked and pushed, and whether it said
it was terminating. Kafka's rules, as ClientMetricsManager applies them:

- Get: asking again sooner than the push interval is THROTTLING_QUOTA_EXCEEDED, unless the last answer
  to a push told the client to ask again (UNKNOWN_SUBSCRIPTION_ID, UNSUPPORTED_COMPRESSION_TYPE).
- Push: the zero id is INVALID_REQUEST; a second terminating push INVALID_REQUEST; a subscription id that
  is not the instance's current plan (the subscriptions changed, the broker restarted)
  UNKNOWN_SUBSCRIPTION_ID; a compression type not accepted UNSUPPORTED_COMPRESSION_TYPE; more than
  `telemetry.max.bytes` TELEMETRY_TOO_LARGE; a push sooner than half the interval after the last one
  (Kafka: the whole interval; clients jitter their first push) THROTTLING_QUOTA_EXCEEDED unless it is the
  terminating one; metrics that do not decompress or decode INVALID_RECORD.

Cardinality: at most `MAX_INSTANCES` instances are kept (the least recently seen is dropped), at most
`MAX_SERIES_PER_INSTANCE` series each and `MAX_SERIES` in all (a new series past either is dropped and
counted); an instance that has not been heard from for three push intervals is forgotten, with its series.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

from pybroker.broker.telemetry.subscriptions import Plan, Subscriptions, plan_for
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.otlp_metrics import OtlpError, Point, decode_metrics_data
from pybroker.protocol.records.batch import RecordsError
from pybroker.protocol.records.codecs import decompress

MAX_INSTANCES = 1000
MAX_SERIES_PER_INSTANCE = 1000
MAX_SERIES = 50_000
MAX_POINTS_PER_PUSH = 10_000
#: connections whose client software (ApiVersions v3+) is remembered for the `match` selectors
MAX_SOFTWARE_ENTRIES = 10_000
#: what a decompressed push may grow to, as a multiple of `telemetry.max.bytes`
DECOMPRESSED_FACTOR = 8
#: compression types a push may use (zstd, lz4, gzip, snappy), Kafka's order; none is always accepted
ACCEPTED_COMPRESSION = (4, 3, 1, 2)
NONE_COMPRESSION = 0
SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(slots=True)
class Series:
    kind: str
    value: float


@dataclass(slots=True)
class ClientInstance:
    instance_id: uuid.UUID
    selectors: dict[str, str]
    plan: Plan
    last_get_ms: int = 0
    last_push_ms: int = 0
    last_error: int = ErrorCode.NONE
    terminating: bool = False
    seen_ms: int = 0
    series: dict[SeriesKey, Series] = field(default_factory=dict)


class ClientMetrics:
    """Subscriptions, instances and their series: what the two telemetry handlers and the scrape share."""

    def __init__(self, subscriptions: Subscriptions, max_bytes: int) -> None:
        self.subscriptions = subscriptions
        self.max_bytes = max_bytes
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        self.dropped_series = 0
        self.series_count = 0
        self._software: OrderedDict[str, tuple[str, str]] = OrderedDict()

    def note_software(self, peer: str, name: str, version: str) -> None:
        """The software a connection's ApiVersions named (its `client_software_*` selectors), newest kept."""
        self._software[peer] = (name[:256], version[:256])
        self._software.move_to_end(peer)
        while len(self._software) > MAX_SOFTWARE_ENTRIES:
            self._software.popitem(last=False)

    def software_of(self, peer: str) -> tuple[str, str]:
        return self._software.get(peer, ("", ""))

    def names(self) -> list[str]:
        """The client-metrics resources (ListConfigResources)."""
        return self.subscriptions.names()

    # -- GetTelemetrySubscriptions ------------------------------------------------------------------
    def get(self, instance_id: uuid.UUID, selectors: dict[str, str], now_ms: int) -> tuple[int, ClientInstance]:
        self._expire(now_ms)
        if instance_id.int == 0:
            instance_id = self._new_id()
        selectors = {**selectors, "client_instance_id": str(instance_id)}
        instance = self._instance(instance_id, selectors, now_ms)
        plan = plan_for(self.subscriptions.all(), selectors)
        changed = plan.subscription_id != instance.plan.subscription_id
        instance.plan = plan
        may_ask = changed or instance.last_get_ms == 0 or \
            instance.last_get_ms + plan.interval_ms <= now_ms or \
            instance.last_error in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        if not may_ask:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED, instance
        instance.last_get_ms = now_ms
        instance.last_error = ErrorCode.NONE
        return ErrorCode.NONE, instance

    # -- PushTelemetry -----------------------------------------------------------------------------------
    def admit(self, instance_id: uuid.UUID, subscription_id: int, terminating: bool, compression: int,
              size: int, selectors: dict[str, str], now_ms: int) -> tuple[int, ClientInstance | None]:
        """A push's checks, on the event loop: (error code, the instance whose series it feeds)."""
        if instance_id.int == 0:
            return ErrorCode.INVALID_REQUEST, None
        self._expire(now_ms)
        instance = self._instance(instance_id, {**selectors, "client_instance_id": str(instance_id)}, now_ms)
        code = self._check_push(instance, subscription_id, terminating, compression, size, now_ms)
        instance.last_error = code
        if code == ErrorCode.NONE:
            instance.terminating = instance.terminating or terminating
        return code, instance

    def decode(self, compression: int, metrics: bytes) -> tuple[int, list[Point]]:
        """Decompress (capped) and decode a push: pure, so it may run off the event loop."""
        try:
            data = metrics if compression == NONE_COMPRESSION else \
                decompress(compression, metrics, self.max_bytes * DECOMPRESSED_FACTOR)
            return ErrorCode.NONE, decode_metrics_data(bytes(data), MAX_POINTS_PER_PUSH).points if data else []
        except (RecordsError, OtlpError):
            return ErrorCode.INVALID_RECORD, []

    def record(self, instance: ClientInstance, code: int, points: list[Point]) -> None:
        """The decoded points become the instance's series (on the event loop)."""
        instance.last_error = code
        for point in points:
            if instance.plan.wants(point.name):
                self._record(instance, point)

    def _check_push(self, instance: ClientInstance, subscription_id: int, terminating: bool, compression: int,
                    size: int, now_ms: int) -> int:
        if terminating and instance.terminating:
            return ErrorCode.INVALID_REQUEST
        current = plan_for(self.subscriptions.all(), instance.selectors)
        if subscription_id != instance.plan.subscription_id or current.subscription_id != subscription_id:
            instance.plan = current
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if not terminating and instance.last_push_ms and now_ms - instance.last_push_ms < current.interval_ms // 2:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        if compression != NONE_COMPRESSION and compression not in ACCEPTED_COMPRESSION:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if size > self.max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        instance.last_push_ms = now_ms
        return ErrorCode.NONE

    def _record(self, instance: ClientInstance, point: Point) -> None:
        key = (point.name, point.attributes)
        series = instance.series.get(key)
        if series is None:
            if len(instance.series) >= MAX_SERIES_PER_INSTANCE or self.series_count >= MAX_SERIES:
                self.dropped_series += 1
                return
            instance.series[key] = Series(point.kind, point.value)
            self.series_count += 1
        elif point.delta:
            series.value += point.value
        else:
            series.value = point.value

    # -- instances -------------------------------------------------------------------------------------
    def _new_id(self) -> uuid.UUID:
        while True:
            candidate = uuid.uuid4()
            if candidate not in self.instances:
                return candidate

    def _instance(self, instance_id: uuid.UUID, selectors: dict[str, str], now_ms: int) -> ClientInstance:
        instance = self.instances.get(instance_id)
        if instance is None:
            plan = plan_for(self.subscriptions.all(), selectors)
            instance = ClientInstance(instance_id, selectors, plan)
            self.instances[instance_id] = instance
            while len(self.instances) > MAX_INSTANCES:
                _, evicted = self.instances.popitem(last=False)
                self.series_count -= len(evicted.series)
        else:
            self.instances.move_to_end(instance_id)
        instance.seen_ms = now_ms
        return instance

    def _expire(self, now_ms: int) -> None:
        for instance_id in [i for i, inst in self.instances.items()
                            if now_ms - inst.seen_ms > 3 * inst.plan.interval_ms]:
            self.series_count -= len(self.instances.pop(instance_id).series)

    def snapshot(self, now_ms: int) -> list[tuple[Mapping[str, str], SeriesKey, Series]]:
        """Every series with its instance's selectors, for a scrape."""
        self._expire(now_ms)
        return [(inst.selectors, key, series) for inst in self.instances.values()
                for key, series in inst.series.items()]
