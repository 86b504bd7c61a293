"""The console's record search (`/console/api/search`) through the real HTTP server of an in-process broker:
paging both ways without skipping or repeating a record, each filter's meaning, the caps that stop one
request (bytes, records, time) and "continue" from where it stopped; plus the config values humanized
(`humanize`) and a broker's dynamic config altered through the console."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.broker.app import BrokerApp
from pybroker.broker.console import search
from pybroker.broker.console.humanize import config_display, duration, size
from pybroker.broker.console.local_client import LocalClient
from pybroker.broker.console.params import ConsoleError, query
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.record import Record, build_batch
from tests.unit.broker.console.console_http import Http

BASE_TS = 1_700_000_000_000


async def _produce(app: BrokerApp, topic: str, partition: int, records: list[tuple[Any, ...]],
                   per_batch: int = 1) -> None:
    """(key, value, headers, timestamp) records, `per_batch` to a batch."""
    client = LocalClient(app.state)
    for at in range(0, len(records), per_batch):
        chunk = records[at:at + per_batch]
        base = chunk[0][3]
        batch = build_batch([Record(i, ts - base, k, v, h) for i, (k, v, h, ts) in enumerate(chunk)],
                            base_timestamp=base)
        response = await client.call(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
            name=topic, partition_data=[PartitionProduceData(index=partition, records=bytearray(batch))])]))
        assert response.responses[0].partition_responses[0].error_code == 0


async def _search(http: Http, **params: Any) -> Any:
    return await http.get("search?" + urlencode(params))


def _values(page: Any) -> list[str]:
    return [m["value"]["text"] for m in page["messages"]]


async def test_paging_older_and_newer_from_the_newest(app: BrokerApp, http: Http) -> None:
    await http.post("topics/create", {"name": "log", "partitions": 1})
    await _produce(app, "log", 0, [(b"k%d" % i, b"v%d" % i, [], BASE_TS + i) for i in range(25)], per_batch=4)
    first = await _search(http, topic="log", partition=0, limit=10)
    assert _values(first) == [f"v{i}" for i in range(24, 14, -1)]  # newest first
    assert first["newer"] == "0:25" and first["older"] == "0:15" and first["at_end"] is False
    second = await _search(http, topic="log", partition=0, limit=10, direction="older", cursor=first["older"])
    assert _values(second) == [f"v{i}" for i in range(14, 4, -1)] and second["newer"] == "0:15"
    third = await _search(http, topic="log", partition=0, limit=10, direction="older", cursor=second["older"])
    assert _values(third) == [f"v{i}" for i in range(4, -1, -1)] and third["at_end"] is True
    back = await _search(http, topic="log", partition=0, limit=10, direction="newer", cursor=third["newer"])
    assert _values(back) == [f"v{i}" for i in range(5, 15)]  # oldest first going newer
    earliest = await _search(http, topic="log", partition=0, limit=3, **{"from": "earliest"})
    assert _values(earliest) == ["v0", "v1", "v2"] and earliest["direction"] == "newer"
    at = await _search(http, topic="log", partition=0, limit=2, **{"from": "offset", "offset": 20})
    assert _values(at) == ["v20", "v21"]
    when = await _search(http, topic="log", partition=0, limit=2, **{"from": "timestamp", "timestamp": BASE_TS + 7})
    assert _values(when) == ["v7", "v8"]


async def test_filters_by_key_value_header_and_time(app: BrokerApp, http: Http) -> None:
    await http.post("topics/create", {"name": "orders", "partitions": 1})
    records = [(f"customer-{i % 5}".encode(), json.dumps({"n": i, "status": "paid" if i % 3 == 0 else "open"}).encode(),
                [("source", b"shop" if i % 2 else b"app"), *([("trace", None)] if i == 7 else [])], BASE_TS + 1000 * i)
               for i in range(30)]
    await _produce(app, "orders", 0, records, per_batch=7)

    async def offsets(**filters: Any) -> list[int]:
        page = await _search(http, topic="orders", partition=0, limit=500, **filters)
        return sorted(m["offset"] for m in page["messages"])

    assert await offsets(key="customer-3") == [i for i in range(30) if i % 5 == 3]
    assert await offsets(value='"paid"') == [i for i in range(30) if i % 3 == 0]
    assert await offsets(header="trace") == [7]
    assert await offsets(header="source", header_value="shop") == [i for i in range(30) if i % 2]
    assert await offsets(header_value="app") == [i for i in range(30) if i % 2 == 0]
    assert await offsets(header="nosuch") == []
    assert await offsets(from_ts=BASE_TS + 10_000, to_ts=BASE_TS + 12_000) == [10, 11, 12]
    assert await offsets(key="customer-1", value='"open"', to_ts=BASE_TS + 20_000) == [1, 11, 16]
    # a small page of a filtered search pages on without a gap: the matches of both pages are every match
    first = await _search(http, topic="orders", partition=0, limit=4, value='"paid"')
    rest = await _search(http, topic="orders", partition=0, limit=500, value='"paid"', direction="older",
                         cursor=first["older"])
    assert [m["offset"] for m in first["messages"] + rest["messages"]] == [27, 24, 21, 18, 15, 12, 9, 6, 3, 0]


async def test_all_partitions_page_by_time_without_gaps_or_repeats(app: BrokerApp, http: Http) -> None:
    await http.post("topics/create", {"name": "spread", "partitions": 3})
    for partition in range(3):
        await _produce(app, "spread", partition,
                       [(None, f"p{partition}-{i}".encode(), [], BASE_TS + 3 * i + partition) for i in range(12)],
                       per_batch=5)
    seen: list[dict[str, Any]] = []
    page = await _search(http, topic="spread", partition="all", limit=7)
    seen += page["messages"]
    while not page["at_end"]:
        page = await _search(http, topic="spread", partition="all", limit=7, direction="older", cursor=page["older"])
        seen += page["messages"]
    assert [m["timestamp"] for m in seen] == sorted((m["timestamp"] for m in seen), reverse=True)
    assert sorted(_values({"messages": seen})) == sorted(f"p{p}-{i}" for p in range(3) for i in range(12))
    newer = await _search(http, topic="spread", partition="all", limit=5, direction="newer", cursor="0:6,1:6,2:6")
    assert _values(newer) == ["p0-6", "p1-6", "p2-6", "p0-7", "p1-7"]
    assert newer["newer"] == "0:8,1:8,2:7" and newer["older"] == "0:6,1:6,2:6"


async def test_a_search_stops_at_its_caps_and_continues(app: BrokerApp, http: Http,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    await http.post("topics/create", {"name": "haystack", "partitions": 1})
    await _produce(app, "haystack", 0, [(None, b"needle" if i == 3 else b"hay-%d" % i, [], BASE_TS + i)
                                        for i in range(400)], per_batch=10)
    monkeypatch.setattr(search, "MAX_SCAN_RECORDS", 60)
    page = await _search(http, topic="haystack", partition=0, limit=10, value="needle")
    assert page["messages"] == [] and page["stopped"] == "records" and page["at_end"] is False
    rounds = 1
    while not page["messages"]:
        assert page["stopped"] is not None
        page = await _search(http, topic="haystack", partition=0, limit=10, value="needle", direction="older",
                             cursor=page["older"])
        rounds += 1
        assert rounds < 40, "continue made no progress"
    assert _values(page) == ["needle"] and rounds >= 400 // 60
    # the same search going newer, from the start, under a byte cap
    monkeypatch.setattr(search, "MAX_SCAN_RECORDS", 10_000)
    monkeypatch.setattr(search, "MAX_SCAN_BYTES", 1)
    newer = await _search(http, topic="haystack", partition=0, limit=10, value="hay-399", **{"from": "earliest"})
    assert newer["stopped"] == "bytes" and newer["messages"] == [] and newer["newer"] != "0:0"
    # a time budget already spent still moves one chunk on, so continue never loops in place
    monkeypatch.setattr(search, "MAX_SCAN_BYTES", 32 * 1024 * 1024)
    monkeypatch.setattr(search, "TIME_BUDGET_S", 0.0)
    timed = await _search(http, topic="haystack", partition=0, limit=10)
    assert timed["stopped"] == "time" and timed["older"] != "0:400"


@pytest.mark.parametrize(("query", "words"), [
    ("topic=log&cursor=junk", "partition:offset"),
    ("topic=log&key=" + "x" * 1025, "longer than"),
    ("topic=log&from_ts=5&to_ts=4", "after to_ts"),
    ("topic=log&direction=sideways", "direction must be"),
    ("topic=log&partition=all&from=offset&offset=1", "one partition"),
    ("topic=log&cursor=" + ",".join(f"{i}:0" for i in range(65)), "at most"),
])
async def test_bad_searches_get_a_clear_400(http: Http, query: str, words: str) -> None:
    await http.post("topics/create", {"name": "log", "partitions": 1})
    status, answer = await http.request("GET", "/console/api/search?" + query)
    assert status == 400 and words in answer["error"], answer


async def test_unknown_topic_or_partition_is_404(http: Http) -> None:
    await http.post("topics/create", {"name": "log", "partitions": 1})
    for asked in ("topic=nosuch", "topic=log&partition=3"):
        status, answer = await http.request("GET", "/console/api/search?" + asked)
        assert status == 404 and "UNKNOWN_TOPIC_OR_PARTITION" in answer["error"]


@pytest.mark.parametrize(("name", "value", "config_type", "shown"), [
    ("retention.ms", "604800000", 5, "7 d"),
    ("segment.ms", "5400000", 5, "1 h 30 min"),
    ("segment.bytes", "1073741824", 3, "1 GiB"),
    ("max.message.bytes", "1048588", 3, "~1 MiB"),
    ("retention.ms", "-1", 5, "unlimited"),
    ("retention.bytes", "-1", 5, "unlimited"),
    ("local.retention.ms", "-2", 5, "same as retention.ms"),
    ("max.compaction.lag.ms", str(2**63 - 1), 5, "unlimited"),
    ("flush.messages", str(2**63 - 1), 5, "unlimited"),
    ("log.retention.hours", "168", 3, "7 d"),
    ("socket.send.buffer.bytes", "-1", 3, "OS default"),
    ("cleanup.policy", "delete", 7, "delete"),
    ("min.insync.replicas", "1", 3, "1"),
    ("max.connections", str(2**31 - 1), 3, "unlimited"),
    ("some.long.count", str(2**31 - 1), 5, str(2**31 - 1)),
    ("retention.ms", None, 5, None),
])
def test_config_values_are_humanized(name: str, value: str | None, config_type: int, shown: str | None) -> None:
    assert config_display(name, value, config_type) == shown


def test_durations_and_sizes() -> None:
    assert [duration(ms) for ms in (0, 999, 1500, 60_000, 86_400_005, 90_061_001)] == [
        "0 ms", "999 ms", "1 s 500 ms", "1 min", "~1 d", "~1 d 1 h"]
    assert [size(n) for n in (0, 1023, 1024, 1536, 5 * 1024**4)] == ["0 B", "1023 B", "1 KiB", "~1.5 KiB", "5 TiB"]


async def test_configs_show_display_and_override_and_a_broker_config_is_altered(http: Http) -> None:
    await http.post("topics/create", {"name": "t", "partitions": 1, "configs": {"retention.ms": "3600000"}})
    configs = {c["name"]: c for c in (await http.get("topic?name=t"))["configs"]}
    assert configs["retention.ms"]["display"] == "1 h" and configs["retention.ms"]["override"] is True
    assert configs["cleanup.policy"]["override"] is False
    broker = {c["name"]: c for c in await http.get("broker-configs")}
    assert broker["log.segment.bytes"]["display"] == "1 GiB" and broker["log.retention.hours"]["display"] == "7 d"
    assert broker["num.io.threads"]["read_only"] is True
    status, answer = await http.request("POST", "/console/api/broker-configs/alter",
                                        {"key": "num.io.threads", "value": "4"})
    assert status == 409 and "INVALID_CONFIG" in answer["error"] and "dynamically" in answer["error"]
    status, answer = await http.request("POST", "/console/api/broker-configs/alter",
                                        {"key": "log.retention.ms", "value": "soon"})
    assert status == 409 and "INVALID_CONFIG" in answer["error"]
    assert broker["log.retention.ms"]["read_only"] is False
    await http.post("broker-configs/alter", {"key": "log.retention.ms", "value": "7200000"})
    after = {c["name"]: c for c in await http.get("broker-configs")}["log.retention.ms"]
    assert (after["value"], after["display"], after["source"], after["override"]) == (
        "7200000", "2 h", "DYNAMIC_BROKER_CONFIG", True)
    await http.post("broker-configs/alter", {"key": "log.retention.ms", "value": None})
    assert {c["name"]: c for c in await http.get("broker-configs")}["log.retention.ms"]["source"] != \
        "DYNAMIC_BROKER_CONFIG"


QUERY_WORDS = ["topic", "partition", "cursor", "key", "value", "header", "header_value", "from_ts", "to_ts",
               "from", "direction", "limit", "format", "offset", "timestamp", "all", "older", "newer", "0:1",
               ",", ":", "=", "&", "%", "%00", "-1", "9" * 25, "%ff", "x" * 300]


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=300), st.lists(st.sampled_from(QUERY_WORDS), max_size=40).map("".join)))
def test_fuzz_a_search_query_is_parsed_or_refused_with_a_400(raw: str) -> None:
    """Any query string: parsed, or a ConsoleError with a 4xx and a sentence; never another exception."""
    try:
        topic, limit, _, flt, cursor, _, direction = search.parse(query(raw))
    except ConsoleError as exc:
        assert 400 <= exc.status < 500 and exc.message
        return
    assert topic and 1 <= limit <= 500 and direction in ("older", "newer")
    assert cursor is None or (len(cursor) <= 64 and all(0 <= o <= 2**63 - 1 for o in cursor.values()))
    assert flt.key is None or len(flt.key) <= 4 * search.MAX_NEEDLE
