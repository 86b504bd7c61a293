"""Client-metrics subscriptions: the config resources of type 16 (CLIENT_METRICS), as Kafka keeps them.

A subscription is a name with up to three configs (Kafka's ClientMetricsConfigs): `metrics`, the metric
name prefixes wanted (a list; `*` is every metric, empty is none); `interval.ms`, how often to push
(100 to 3,600,000, default 300,000); `match`, `selector=regex` pairs a client must all match (an empty
list matches every client; selectors: client_instance_id, client_id, client_software_name,
client_software_version, client_source_address, client_source_port). They are set with
IncrementalAlterConfigs (SET / DELETE; APPEND and SUBTRACT on the two lists) and read with
DescribeConfigs; a subscription whose configs are all deleted is gone. Kafka keeps them in its metadata
log, and so do we (`broker/live_metadata.py` appends each change as ConfigRecords of type 16); the broker
reads them from one JSON file in the first log dir, replaced whole (`atomic_write`) and rewritten from the
log at start, at most `MAX_SUBSCRIPTIONS` of them.

A `match` regex runs on the event loop against what a client says about itself, so it may not
backtrack catastrophically: one pattern per selector, at most `MAX_REGEX` characters and `MAX_REPEATS`
repetitions, none nested in another (`(a+)+` is refused), matched against at most `MAX_SELECTOR`
characters of a value: with `MAX_SUBSCRIPTIONS` subscriptions, the worst a client can make one request
cost is a few million regex steps.
"""

from __future__ import annotations

import json
import re
import re._parser as regex_parser
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pybroker.storage.errors import StorageError
from pybroker.storage.files import atomic_write

FILE_NAME = "client-metrics.json"
FORMAT_VERSION = 1
MAX_SUBSCRIPTIONS = 64
MAX_NAME = 255
METRICS, INTERVAL, MATCH = "metrics", "interval.ms", "match"
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
MAX_REGEX, MAX_REPEATS, MAX_SELECTOR = 256, 2, 128
SELECTORS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
             "client_source_address", "client_source_port")
#: key -> (default text, documentation), as DescribeConfigs shows them
CONFIGS: Mapping[str, tuple[str, str]] = {
    METRICS: ("", "Metric name prefixes the matching clients push; * for every metric."),
    INTERVAL: (str(DEFAULT_INTERVAL_MS), "How often matching clients push, in milliseconds."),
    MATCH: ("", "selector=regex pairs a client must all match; empty matches every client."),
}


class SubscriptionError(ValueError):
    """A refused change: INVALID_CONFIG with this message (INVALID_REQUEST when `request` is set)."""

    def __init__(self, message: str, *, request: bool = False) -> None:
        super().__init__(message)
        self.request = request


def _list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def validate(name: str, configs: Mapping[str, str]) -> None:
    """Kafka's checks of one subscription's configs (ClientMetricsConfigs.validate)."""
    if not name or len(name) > MAX_NAME:
        raise SubscriptionError("Subscription name must be 1 to 255 characters.", request=True)
    for key in configs:
        if key not in CONFIGS:
            raise SubscriptionError(f"Unknown client-metrics config name: {key}")
    if INTERVAL in configs:
        try:
            interval = int(configs[INTERVAL])
        except ValueError:
            raise SubscriptionError(f"Invalid value {configs[INTERVAL]} for {INTERVAL}: not an integer") from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise SubscriptionError(f"Invalid value {interval} for {INTERVAL}, interval must be between "
                                    f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS}")
    seen: set[str] = set()
    for pattern in _list(configs.get(MATCH, "")):
        selector, sep, regex = pattern.partition("=")
        if not sep or selector not in SELECTORS:
            raise SubscriptionError(f"Illegal client matching pattern: {pattern}")
        if selector in seen:
            raise SubscriptionError(f"Duplicate client matching selector: {selector}")
        seen.add(selector)
        try:
            re.compile(regex)
            _check_backtracking(regex)
        except re.error as exc:
            raise SubscriptionError(f"Illegal regex pattern {regex!r} for {selector}: {exc}") from None


def _check_backtracking(regex: str) -> None:
    """re.error unless `regex` is short, with few repetitions and none inside another."""
    if len(regex) > MAX_REGEX:
        raise re.error(f"longer than {MAX_REGEX} characters")
    repeats = 0

    def walk(items: object, inside_repeat: bool) -> None:
        nonlocal repeats
        if isinstance(items, regex_parser.SubPattern):
            items = items.data
        if not isinstance(items, list | tuple):
            return
        for item in items:
            if isinstance(item, tuple) and len(item) == 2 and item[0] in (regex_parser.MAX_REPEAT,
                                                                          regex_parser.MIN_REPEAT):
                repeats += 1
                if inside_repeat:
                    raise re.error("a repetition inside a repetition may backtrack without end")
                if repeats > MAX_REPEATS:
                    raise re.error(f"more than {MAX_REPEATS} repetitions")
                walk(item[1][2], True)
            elif isinstance(item, list | tuple | regex_parser.SubPattern):
                walk(item, inside_repeat)

    walk(regex_parser.parse(regex), False)


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    @classmethod
    def of(cls, name: str, configs: Mapping[str, str]) -> Subscription:
        match = []
        for pattern in _list(configs.get(MATCH, "")):
            selector, _, regex = pattern.partition("=")
            match.append((selector, re.compile(regex)))
        return cls(name, tuple(_list(configs.get(METRICS, ""))),
                   int(configs.get(INTERVAL, DEFAULT_INTERVAL_MS)), tuple(match))

    def matches(self, selectors: Mapping[str, str]) -> bool:
        return all(regex.fullmatch(selectors.get(selector, "")[:MAX_SELECTOR]) for selector, regex in self.match)


@dataclass(frozen=True, slots=True)
class Plan:
    """What one client is asked for: the union of the subscriptions it matches."""

    subscription_id: int
    metrics: tuple[str, ...]  # () none; ("",) every metric
    interval_ms: int

    def wants(self, metric: str) -> bool:
        return any(metric.startswith(prefix) for prefix in self.metrics)


def plan_for(subscriptions: Iterable[Subscription], selectors: Mapping[str, str]) -> Plan:
    matched = sorted((s for s in subscriptions if s.matches(selectors)), key=lambda s: s.name)
    prefixes: set[str] = set()
    for s in matched:
        prefixes.update("" if m == "*" else m for m in s.metrics)
    metrics = ("",) if "" in prefixes else tuple(sorted(prefixes))
    interval = min((s.interval_ms for s in matched if s.metrics), default=DEFAULT_INTERVAL_MS)
    digest = zlib.crc32(repr([(s.name, s.metrics, s.interval_ms) for s in matched]).encode())
    return Plan(digest - (1 << 32) if digest >= 1 << 31 else digest, metrics, interval)


class Subscriptions:
    """The configured subscriptions, persisted in `path` (None: in memory only)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._configs: dict[str, dict[str, str]] = {}
        self._parsed: dict[str, Subscription] = {}

    def load(self) -> None:
        if self.path is None:
            return
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StorageError(f"{self.path}: cannot read client-metrics subscriptions ({exc})") from None
        try:
            doc = json.loads(data)
            if doc.get("version") != FORMAT_VERSION:
                raise ValueError(f"unsupported version {doc.get('version')!r}")
            configs = {str(n): {str(k): str(v) for k, v in c.items()} for n, c in doc["subscriptions"].items()}
            for name, values in configs.items():
                validate(name, values)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StorageError(f"{self.path}: unreadable client-metrics subscriptions ({exc})") from None
        self._configs = configs
        self._parsed = {name: Subscription.of(name, values) for name, values in configs.items()}

    def names(self) -> list[str]:
        return sorted(self._configs)

    def configs(self, name: str) -> dict[str, str] | None:
        found = self._configs.get(name)
        return None if found is None else dict(found)

    def all(self) -> list[Subscription]:
        return list(self._parsed.values())

    def replace(self, name: str, configs: Mapping[str, str], validate_only: bool) -> None:
        """Set `name`'s whole config (empty: remove it), checked first; persisted before it applies."""
        new = {k: v for k, v in configs.items()}
        validate(name, new)
        if new and name not in self._configs and len(self._configs) >= MAX_SUBSCRIPTIONS:
            raise SubscriptionError(f"At most {MAX_SUBSCRIPTIONS} client-metrics subscriptions.", request=True)
        if validate_only:
            return
        updated = dict(self._configs)
        if new:
            updated[name] = new
        else:
            updated.pop(name, None)
        if self.path is not None:
            atomic_write(self.path, json.dumps({"version": FORMAT_VERSION, "subscriptions": updated},
                                               sort_keys=True, indent=1).encode())
        self._configs = updated
        self._parsed = {n: Subscription.of(n, v) for n, v in updated.items()}
