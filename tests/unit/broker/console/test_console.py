"""The web console's JSON API through the real HTTP server of an in-process broker: what each endpoint
answers, that its changes take effect, and a reproducer for each attack considered (oversized and
malformed parameters, path traversal for the static files, CSRF, DNS rebinding, peers off the machine on
the metrics port, wrong or missing credentials, ACLs as the console user)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.broker.console.local_client import LocalClient
from pybroker.broker.console.routes import ConsoleApp
from pybroker.broker.console.sampler import Sampler, _quantile
from pybroker.broker.metrics.http_server import Request
from pybroker.broker.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pybroker.config.broker_config import BrokerConfig
from pybroker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from tests.unit.broker.console.console_http import Http, start_broker


async def test_session_overview_and_the_page(app: BrokerApp, http: Http) -> None:
    session = await http.get("session")
    assert session["user"] == "User:ANONYMOUS" and session["login_required"] is False
    overview = await http.get("overview")
    assert overview["broker"]["node_id"] == 1
    assert overview["log_dirs"][0]["online"] is True and overview["log_dirs"][0]["usable_bytes"] > 0
    assert overview["listeners"][0]["name"] == "PLAINTEXT"
    status, headers, body = await http.raw(b"GET /console/ HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert status == 200 and b"/console/app.js" in body
    assert "script-src 'self'" in headers["content-security-policy"] and headers["x-frame-options"] == "DENY"
    # the same console, under /console on the metrics port
    assert app.metrics_bound_port is not None
    shared = Http(app.metrics_bound_port)
    assert (await shared.get("overview"))["broker"]["node_id"] == 1
    assert (await shared.request("GET", "/metrics"))[0] == 200


async def test_topics_messages_and_configs(http: Http) -> None:
    created = await http.post("topics/create", {"name": "orders", "partitions": 3,
                                                "configs": {"retention.ms": "3600000"}})
    assert created["partitions"] == 3
    for i in range(5):
        answer = await http.post("produce", {"topic": "orders", "partition": 1, "key": f"k{i}",
                                             "value": json.dumps({"n": i}), "value_format": "json",
                                             "headers": [["trace", f"t{i}"]]})
        assert answer["offset"] == i
    await http.post("produce", {"topic": "orders", "partition": 1, "key": None, "value": "00ff10",
                                "value_format": "hex"})
    topics = {t["name"]: t for t in await http.get("topics")}
    assert topics["orders"]["partitions"] == 3 and topics["orders"]["messages"] == 6
    assert topics["orders"]["size_bytes"] > 0 and "__consumer_offsets" not in topics
    assert "__consumer_offsets" not in {t["name"] for t in await http.get("topics?internal=0")}
    topic = await http.get("topic?name=orders")
    assert [p["end_offset"] for p in topic["partitions"]] == [0, 6, 0]
    retention = next(c for c in topic["configs"] if c["name"] == "retention.ms")
    assert retention["value"] == "3600000" and retention["source"] == "DYNAMIC_TOPIC_CONFIG"

    page = await http.get("messages?topic=orders&partition=1&from=earliest&limit=10")
    assert [m["offset"] for m in page["messages"]] == [0, 1, 2, 3, 4, 5] and page["next_offset"] == 6
    first = page["messages"][0]
    assert first["key"]["text"] == "k0" and json.loads(first["value"]["text"]) == {"n": 0}
    assert first["value"]["format"] == "json" and first["headers"] == [
        {"key": "trace", "value": {"size": 2, "truncated": False, "text": "t0", "format": "text"}}]
    assert page["messages"][5]["key"] is None and page["messages"][5]["value"]["text"] == "00 ff 10"
    hexed = await http.get("messages?topic=orders&partition=1&from=offset&offset=2&limit=1&format=hex")
    assert [m["offset"] for m in hexed["messages"]] == [2] and hexed["messages"][0]["key"]["text"] == "6b 32"
    latest = await http.get("messages?topic=orders&partition=1&limit=2")
    assert [m["offset"] for m in latest["messages"]] == [4, 5]
    future = await http.get(f"messages?topic=orders&partition=1&from=timestamp&timestamp={int(time.time() * 1000) + 60_000}")
    assert future["messages"] == [] and future["start_offset"] == 6
    tail = await http.get("messages?topic=orders&partition=1&from=offset&offset=6")
    assert tail["messages"] == [] and tail["next_offset"] == 6

    await http.post("topics/alter-config", {"name": "orders", "key": "retention.ms", "value": "7200000"})
    configs = {c["name"]: c for c in (await http.get("topic?name=orders"))["configs"]}
    assert configs["retention.ms"]["value"] == "7200000"
    await http.post("topics/alter-config", {"name": "orders", "key": "retention.ms", "value": None})
    configs = {c["name"]: c for c in (await http.get("topic?name=orders"))["configs"]}
    assert configs["retention.ms"]["source"] == "DEFAULT_CONFIG"
    status, answer = await http.request("POST", "/console/api/topics/alter-config",
                                        {"name": "orders", "key": "retention.ms", "value": "soon"})
    assert status == 409 and "INVALID_CONFIG" in answer["error"]

    broker = {c["name"]: c for c in await http.get("broker-configs")}
    assert broker["console.port"]["source"] == "STATIC_BROKER_CONFIG"
    assert broker["log.segment.bytes"]["source"] == "DEFAULT_CONFIG"

    status, answer = await http.request("POST", "/console/api/topics/delete", {"name": "orders"})
    assert status == 400 and "confirm" in answer["error"]
    await http.post("topics/delete", {"name": "orders", "confirm": "orders"})
    assert "orders" not in {t["name"] for t in await http.get("topics")}
    status, answer = await http.request("GET", "/console/api/topic?name=orders")
    assert status == 404 and "UNKNOWN_TOPIC_OR_PARTITION" in answer["error"]


async def _commit(app: BrokerApp, group: str, topic: str, offsets: dict[int, int]) -> None:
    """A simple (generation -1) commit, as kafka-consumer-groups does: the group exists, Empty."""
    request = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequestTopic(name=topic, partitions=[
            OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="")
            for p, o in offsets.items()])])
    response = await LocalClient(app.state).call(request, 7)
    assert all(p.error_code == 0 for t in response.topics for p in t.partitions)


async def test_groups_lag_and_reset(app: BrokerApp, http: Http) -> None:
    await http.post("topics/create", {"name": "events", "partitions": 2})
    for partition in (0, 1):
        for i in range(4):
            await http.post("produce", {"topic": "events", "partition": partition, "value": f"v{i}"})
    await _commit(app, "lagging", "events", {0: 1, 1: 3})
    assert app.console is not None
    app.console.sampler.sample()
    groups = {g["group"]: g for g in await http.get("groups")}
    assert groups["lagging"]["state"] == "Empty" and groups["lagging"]["lag"] == 4
    group = await http.get("group?id=lagging")
    assert [(r["partition"], r["committed_offset"], r["end_offset"], r["lag"]) for r in group["offsets"]] == [
        (0, 1, 4, 3), (1, 3, 4, 1)]
    assert group["offsets"][0]["lag_history"] == [3]

    plan = await http.post("groups/reset-offsets", {"group": "lagging", "to": "latest", "preview": True})
    assert [r["new_offset"] for r in plan["plan"]] == [4, 4] and plan["applied"] is False
    assert (await http.get("groups"))[0]["lag"] == 4  # a preview changes nothing
    done = await http.post("groups/reset-offsets", {"group": "lagging", "to": "offset", "offset": 2,
                                                    "topic": "events"})
    assert done["applied"] is True
    group = await http.get("group?id=lagging")
    assert [r["committed_offset"] for r in group["offsets"]] == [2, 2]
    await http.post("groups/reset-offsets", {"group": "lagging", "to": "earliest"})
    assert [r["lag"] for r in (await http.get("group?id=lagging"))["offsets"]] == [4, 4]

    status, answer = await http.request("POST", "/console/api/groups/reset-offsets", {"group": "nosuch"})
    assert status == 409 and "Empty" in answer["error"]
    status, answer = await http.request("GET", "/console/api/group?id=nosuch")
    assert status == 404


@pytest.mark.parametrize(("path", "status", "words"), [
    ("messages?topic=orders&limit=0", 400, "limit must be between"),
    ("messages?topic=orders&limit=100000", 400, "limit must be between"),
    ("messages?topic=orders&partition=-1", 400, "partition must be between"),
    ("messages?topic=orders&partition=abc", 400, "partition must be an integer"),
    ("messages?topic=orders&partition=99999999999999999999999", 400, "partition must be"),
    ("messages?topic=orders&from=offset&offset=-5", 400, "offset must be between"),
    ("messages?topic=orders&from=offset", 400, "offset is required"),
    ("messages?topic=orders&format=xml", 400, "format must be one of"),
    ("messages?topic=orders&from=yesterday", 400, "from must be one of"),
    ("messages?partition=0", 400, "topic is required"),
    ("messages?topic=" + "x" * 300, 400, "longer than 249"),
    ("messages?topic=orders&topic=other", 400, "given twice"),
    ("messages?" + "a=1&" * 60, 400, "too many query parameters"),
    ("messages?topic=" + "x" * 5000, 414, "query string is longer"),
    ("messages?topic=nosuch", 404, "UNKNOWN_TOPIC_OR_PARTITION"),
    ("topic?name=", 400, "name must not be empty"),
    ("group?", 400, "id is required"),
    ("topics?internal=maybe", 400, "internal must be true or false"),
    ("nosuch", 404, "no such console page"),
    ("topics/create", 405, "GET is not allowed"),
])
async def test_bad_queries_get_a_clear_4xx(http: Http, path: str, status: int, words: str) -> None:
    if path.startswith("messages?topic=orders"):
        await http.post("topics/create", {"name": "orders", "partitions": 1})
    got, answer = await http.request("GET", "/console/api/" + path)
    assert got == status and words in answer["error"], answer


@pytest.mark.parametrize(("path", "body", "status", "words"), [
    ("topics/create", b"not json", 400, "not JSON"),
    ("topics/create", b"[1, 2]", 400, "JSON object"),
    ("topics/create", b"[" * 100_000, 400, "not JSON"),
    ("topics/create", {"name": "t", "partitions": 0}, 400, "partitions must be between"),
    ("topics/create", {"name": "t", "partitions": 10**9}, 400, "partitions must be between"),
    ("topics/create", {"name": "t", "partitions": True}, 400, "must be an integer"),
    ("topics/create", {"name": "t", "configs": {f"k{i}": "v" for i in range(300)}}, 400, "more than 200"),
    ("topics/create", {"name": "t", "configs": ["a"]}, 400, "object of strings"),
    ("topics/create", {"name": "bad/name"}, 409, "INVALID_TOPIC_EXCEPTION"),
    ("topics/create", {"name": 5}, 400, "name must be a string"),
    ("produce", {"topic": "nosuch", "value": "x"}, 404, "UNKNOWN_TOPIC_OR_PARTITION"),
    ("produce", {"topic": "orders", "value": "zz", "value_format": "hex"}, 400, "value is not hex"),
    ("produce", {"topic": "orders", "value": "{", "value_format": "json"}, 400, "value is not JSON"),
    ("produce", {"topic": "orders", "value": "x" * 600_000}, 400, "larger than"),
    ("produce", {"topic": "orders", "value": "x", "headers": [["h", "v"]] * 65}, 400, "at most 64"),
    ("produce", {"topic": "orders", "value": "x", "headers": [["", "v"]]}, 400, "non-empty key"),
    ("produce", {"topic": "orders", "value": 5}, 400, "string or null"),
    ("produce", {"topic": "orders", "partition": 7, "value": "x"}, 404, "UNKNOWN_TOPIC_OR_PARTITION"),
    ("groups/reset-offsets", {"group": "g", "to": "yesterday"}, 400, "to must be one of"),
    ("topics/delete", {"name": "orders", "confirm": "order"}, 400, "confirm"),
    ("overview", {}, 405, "POST is not allowed"),
])
async def test_bad_changes_get_a_clear_4xx(http: Http, path: str, body: Any, status: int, words: str) -> None:
    await http.post("topics/create", {"name": "orders", "partitions": 1})
    got, answer = await http.request("POST", "/console/api/" + path, body)
    assert got == status and words in answer["error"], answer


async def test_oversized_body_is_refused_before_it_is_read(http: Http) -> None:
    head = (f"POST /console/api/produce HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"X-Console-Token: {http.token}\r\nContent-Length: {50 * 1024 * 1024}\r\n\r\n").encode()
    status, _, body = await http.raw(head + b"{")
    assert status == 413 and b"too large" in body
    status, _, _ = await http.raw(b"POST /console/api/produce HTTP/1.1\r\nHost: localhost\r\n"
                                  b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    assert status == 400


@pytest.mark.parametrize("path", [
    "/console/../metrics", "/console/..%2f..%2fetc%2fpasswd", "/console/%2e%2e/%2e%2e/etc/passwd",
    "/console/static/index.html", "/console/app.js/../../../etc/passwd", "/console//etc/passwd",
    "/console/__init__.py", "/console/routes.py", "/console/app.js%00.html", "/console/API/session",
])
async def test_no_path_reaches_a_file_outside_the_table(http: Http, path: str) -> None:
    status, _, body = await http.raw(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    assert status == 404 and b"root:" not in body and b"import" not in body


async def test_static_files_are_served_with_their_types(http: Http) -> None:
    for path, kind in (("/console/app.js", "text/javascript"), ("/console/charts.js", "text/javascript"),
                       ("/console/messages.js", "text/javascript"), ("/console/app.css", "text/css"),
                       ("/console", "text/html")):
        status, headers, body = await http.raw(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        assert status == 200 and headers["content-type"].startswith(kind) and body
        assert headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(("headers", "status", "words"), [
    ({"X-Console-Token": None}, 403, "X-Console-Token"),
    ({"X-Console-Token": "guess"}, 403, "X-Console-Token"),
    ({"Origin": "http://evil.example"}, 403, "cross-origin"),
    ({"Origin": "null"}, 403, "cross-origin"),
    ({"Sec-Fetch-Site": "cross-site"}, 403, "cross-site"),
    ({"Content-Type": "text/plain"}, 415, "application/json"),
    ({"Content-Type": "application/x-www-form-urlencoded"}, 415, "application/json"),
])
async def test_csrf_guard_refuses_forged_changes(http: Http, headers: dict[str, str], status: int,
                                                 words: str) -> None:
    got, answer = await http.request("POST", "/console/api/topics/create", {"name": "forged"}, headers=headers)
    assert got == status and words in answer["error"]
    assert "forged" not in {t["name"] for t in await http.get("topics")}


async def test_dns_rebinding_host_is_refused(app: BrokerApp, http: Http) -> None:
    for port in (app.console_bound_port, app.metrics_bound_port):
        assert port is not None
        for host in ("evil.example", "evil.example:80", "127.0.0.1.evil.example", ""):
            status, _, body = await http.raw(f"GET /console/api/session HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            assert status == 421 and b"csrf_token" not in body
    for host in ("localhost", "127.0.0.1:8080", "[::1]:9", "LOCALHOST"):
        status, _, _ = await http.raw(f"GET /console/api/session HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        assert status == 200


async def test_metrics_port_answers_loopback_peers_only(app: BrokerApp) -> None:
    console = ConsoleApp(app.state, Sampler(lambda: []))
    request = Request("GET", "/console/api/session", {"host": "localhost"}, peer="10.1.2.3:5555")
    status, _, body, _ = await console(request, True)
    assert status == 403 and b"console-port" in body
    status, _, _, _ = await console(Request("GET", "/console/api/session", {"host": "localhost"},
                                            peer="127.0.0.1:5555"), True)
    assert status == 200
    # on its own port (bound by the operator's choice) the peer is not the question
    status, _, _, _ = await console(request, False)
    assert status == 200


async def test_a_broken_handler_is_a_500_without_a_traceback(app: BrokerApp, http: Http,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from pybroker.broker.console import reads

    async def broken(*args: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(reads, "overview", broken)
    status, answer = await http.request("GET", "/console/api/overview")
    assert status == 500 and answer == {"error": "internal error (see the broker's log)"}


async def test_console_can_be_switched_off(tmp_path: Path) -> None:
    broker = await start_broker(tmp_path, **{"console.enable": "false"})
    try:
        assert broker.console_bound_port is None and broker.metrics_bound_port is not None
        status, _ = await Http(broker.metrics_bound_port).request("GET", "/console/api/session")
        assert status == 404
    finally:
        await broker.stop()


# -- authentication and ACLs -------------------------------------------------------------------------------
async def test_login_is_required_when_the_broker_authenticates(secured: BrokerApp) -> None:
    assert secured.console_bound_port is not None
    http = Http(secured.console_bound_port)
    status, headers, body = await http.raw(b"GET /console/ HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert status == 401 and headers["www-authenticate"].startswith("Basic") and b"<html" not in body
    for creds in ("alice:wrong", "nobody:alice-secret", "alice", ":"):
        http.auth = creds
        status, answer = await http.request("GET", "/console/api/session")
        assert status == 401, creds
    status, _ = await http.request("GET", "/console/api/session",
                                   headers={"Authorization": "Basic !!!not-base64"})
    assert status == 401
    status, _ = await http.request("GET", "/console/api/session", headers={"Authorization": "Basic " + "A" * 5000})
    assert status == 401

    http.auth = "admin:admin-pw"
    await http.login()
    assert (await http.get("session"))["user"] == "User:admin"
    await http.post("topics/create", {"name": "secret", "partitions": 1})

    # alice may see nothing (no ACL), so the console shows her nothing and refuses her changes
    alice = Http(secured.console_bound_port)
    alice.auth = "alice:alice-secret"
    await alice.login()
    assert (await alice.get("session"))["user"] == "User:alice"
    assert await alice.get("topics") == []
    status, answer = await alice.request("GET", "/console/api/topic?name=secret")
    assert status == 403 and "TOPIC_AUTHORIZATION_FAILED" in answer["error"]
    status, answer = await alice.request("POST", "/console/api/produce", {"topic": "secret", "value": "x"})
    assert status == 403
    status, answer = await alice.request("POST", "/console/api/topics/create", {"name": "mine"})
    assert status == 403 and "AUTHORIZATION_FAILED" in answer["error"]
    status, answer = await alice.request("GET", "/console/api/overview")
    assert status == 403 and "CLUSTER_AUTHORIZATION_FAILED" in answer["error"]
    status, answer = await alice.request("GET", "/console/api/search?topic=secret&value=x")
    assert status == 403 and "TOPIC_AUTHORIZATION_FAILED" in answer["error"]
    status, answer = await alice.request("POST", "/console/api/broker-configs/alter",
                                         {"key": "log.retention.ms", "value": "1000"})
    assert status == 403 and "AUTHORIZATION_FAILED" in answer["error"]

    # granted READ and DESCRIBE on the topic, she sees it and its messages
    authorizer = secured.state.authorizer
    assert authorizer is not None
    authorizer.create([AclBinding(ResourceType.TOPIC, "secret", PatternType.LITERAL, "User:alice", "*",
                                  op, AclPermissionType.ALLOW) for op in (AclOperation.READ, AclOperation.DESCRIBE)])
    await http.post("produce", {"topic": "secret", "value": "hello"})
    assert [t["name"] for t in await alice.get("topics")] == ["secret"]
    page = await alice.get("messages?topic=secret&from=earliest")
    assert [m["value"]["text"] for m in page["messages"]] == ["hello"]
    found = await alice.get("search?topic=secret&value=ell")
    assert [m["value"]["text"] for m in found["messages"]] == ["hello"]


async def test_scram_users_log_in_too(secured: BrokerApp) -> None:
    from pybroker.broker.security.scram import credential_from_password
    from pybroker.protocol.scram_mechanisms import MECHANISMS

    credential = credential_from_password(MECHANISMS["SCRAM-SHA-256"], "carol-pw")
    secured.state.scram.apply([("carol", "SCRAM-SHA-256", credential)], [])
    assert secured.console_bound_port is not None
    http = Http(secured.console_bound_port)
    http.auth = "carol:carol-pw"
    assert (await http.get("session"))["user"] == "User:carol"
    http.auth = "carol:wrong"
    started = time.monotonic()
    assert (await http.request("GET", "/console/api/session"))[0] == 401
    # a refusal waits connection.failed.authentication.delay.ms (100 by default), as a SASL listener's does
    assert time.monotonic() - started >= 0.09


def test_sampler_rates_quantiles_and_lag_history() -> None:
    class Sample:
        def __init__(self, name: str, value: float, labels: dict[str, str] | None = None) -> None:
            self.name, self.value, self.labels = name, value, labels or {}

    class Family:
        def __init__(self, *samples: Sample) -> None:
            self.samples = list(samples)

    now = [0.0]
    totals = {"in": 0.0}

    def families() -> list[Family]:
        return [Family(Sample("pybroker_bytes_in_total", totals["in"], {"topic": "t"})),
                Family(Sample("pybroker_consumer_group_lag", totals["in"] / 10,
                              {"group": "g", "topic": "t", "partition": "0"}))]

    sampler = Sampler(families, clock=lambda: now[0], wall_ms=lambda: int(now[0] * 1000))
    sampler.touch()  # someone is looking: lag is sampled too
    sampler.sample()
    assert sampler.charts()["times"] == []  # a rate needs two samples
    now[0], totals["in"] = 2.0, 2000.0
    sampler.sample()
    charts = sampler.charts()
    assert charts["series"]["bytes_in_per_s"] == [1000.0]
    assert sampler.lag_history("g") == {"t-0": [0, 200]}
    sampler.broker_families = lambda: [Family(Sample("pybroker_bytes_in_total", 0.0))]  # the group is gone
    sampler.sample()
    assert sampler.lag_history("g") == {}
    assert _quantile([(0.001, 50.0), (0.01, 99.0), (0.1, 100.0)], 0.5) == 0.001
    assert _quantile([(0.001, 50.0), (0.01, 99.0), (0.1, 100.0)], 0.99) == 0.01
    assert _quantile([(0.001, 0.0)], 0.5) is None


def test_sampler_keeps_history_from_the_start_and_reads_lag_only_while_watched() -> None:
    """Throughput is sampled from the broker's start (the first look draws history, not "Collecting
    samples"), in a bounded ring; the collector's lag families are read only while someone looks."""
    from pybroker.broker.console import sampler as sampler_module

    now, traffic, collected = [0.0], [0, 0, 0], [0]

    def families() -> list[Any]:
        collected[0] += 1
        return []

    sampler = Sampler(families, clock=lambda: now[0], wall_ms=lambda: int(now[0] * 1000),
                      traffic=lambda: (traffic[0], traffic[1], traffic[2]))
    now[0] = 1000.0  # long after anyone looked
    for _ in range(sampler_module.POINTS + 10):
        now[0] += 2.0
        traffic[0] += 4096
        sampler.sample()
    charts = sampler.charts()
    assert len(charts["times"]) == sampler_module.POINTS and set(charts["series"]["bytes_in_per_s"]) == {2048.0}
    assert collected[0] == 0
    sampler.touch()
    sampler.sample()
    assert collected[0] == 1


async def test_a_flood_of_requests_is_capped_and_a_slow_answer_times_out(
        app: BrokerApp, http: Http, monkeypatch: pytest.MonkeyPatch) -> None:
    from pybroker.broker.console import routes
    from pybroker.broker.metrics import http_server

    assert app.console is not None
    console = app.console.app
    monkeypatch.setattr(routes, "MAX_WAITING", 2)
    for _ in range(routes.MAX_IN_FLIGHT):
        await console._turns.acquire()
    try:
        waiting = [asyncio.create_task(http.request("GET", "/console/api/overview")) for _ in range(2)]
        for _ in range(200):
            if console._waiting == 2:
                break
            await asyncio.sleep(0.01)
        status, answer = await http.request("GET", "/console/api/overview")
        assert status == 503 and "busy" in answer["error"]
    finally:
        for _ in range(routes.MAX_IN_FLIGHT):
            console._turns.release()
    assert [s for s, _ in await asyncio.gather(*waiting)] == [200, 200]

    async def slow(*args: Any) -> Any:
        await asyncio.sleep(5)

    monkeypatch.setattr(http_server, "ANSWER_TIMEOUT_S", 0.2)
    monkeypatch.setattr(routes.reads, "overview", slow)
    status, answer = await http.request("GET", "/console/api/overview")
    assert status == 504 and "too long" in answer["error"]
    assert console._waiting == 0 and not console._turns.locked()


async def test_compressed_batches_are_browsed_and_a_decompression_bomb_is_cut(app: BrokerApp, http: Http) -> None:
    from pybroker.broker.console import decoders, messages
    from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
    from pybroker.protocol.records.codecs import GZIP
    from pybroker.protocol.records.record import Record, build_batch

    await http.post("topics/create", {"name": "packed", "partitions": 1,
                                      "configs": {"max.message.bytes": str(8 * 1024 * 1024)}})
    value = b"\0" * (1024 * 1024)
    per_batch = 15  # 15 MiB decompressed: under the console's per-batch cap
    client = LocalClient(app.state)
    for _ in range(4):
        batch = build_batch([Record(i, 0, b"k%d" % i, value) for i in range(per_batch)],
                            base_timestamp=int(time.time() * 1000), compression=GZIP)
        response = await client.call(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
            TopicProduceData(name="packed", partition_data=[PartitionProduceData(index=0, records=bytearray(batch))])]))
        assert response.responses[0].partition_responses[0].error_code == 0
    page = await http.get("messages?topic=packed&from=earliest&limit=500")
    # 4 x 15 MiB would be decoded; the walk stops once 32 MiB are (after the third batch)
    assert len(page["messages"]) == 3 * per_batch and page["next_offset"] == 3 * per_batch
    assert 4 * per_batch * len(value) > messages.MAX_DECODED_BYTES
    shown = page["messages"][0]["value"]
    assert shown["size"] == len(value) and shown["truncated"] is True and len(shown["text"]) == decoders.MAX_SHOWN_BYTES
    rest = await http.get(f"messages?topic=packed&from=offset&offset={page['next_offset']}&limit=500")
    assert [m["offset"] for m in rest["messages"]] == list(range(45, 60))


def test_console_port_flag_and_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from pybroker.broker import cli
    from pybroker.broker.loggers import structlog_setup as logs
    from pybroker.config.types import ConfigError

    seen: dict[str, Any] = {}
    monkeypatch.setattr(logs, "configure_logging", lambda *args: None)  # leave this process's logging alone
    monkeypatch.setattr(cli, "_run", lambda config, *args: seen.update(port=config.get("console.port")))
    result = CliRunner().invoke(cli.cli, ["start", "--log-dirs", str(tmp_path), "--console-port", "9405"])
    assert result.exit_code == 0, result.output
    assert seen["port"] == 9405
    result = CliRunner().invoke(cli.cli, ["start", "--log-dirs", str(tmp_path), "--console-port", "70000"])
    assert result.exit_code == 2 and "70000" in result.output
    with pytest.raises(ConfigError, match=r"console\.port"):
        BrokerConfig.load({"log.dirs": str(tmp_path), "console.port": "-2"})


async def test_an_offline_log_dir_shows_as_offline(tmp_path: Path) -> None:
    broker = await start_broker(tmp_path, **{"log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}"})
    try:
        assert broker.console_bound_port is not None
        http = Http(broker.console_bound_port)
        await http.login()
        await http.post("topics/create", {"name": "spread", "partitions": 2})
        log = broker.state.logs.get_log("spread", 0)
        assert log is not None
        broker.state.logs.report_io_error(log, OSError(5, "Input/output error"))
        dirs = {d["path"]: d for d in (await http.get("overview"))["log_dirs"]}
        failed = str(broker.state.logs.dir_of("spread", 0) or next(iter(broker.state.logs.offline_dirs)))
        assert dirs[failed]["online"] is False and dirs[failed]["error"] == "KAFKA_STORAGE_ERROR"
        assert [d["online"] for p, d in dirs.items() if p != failed] == [True]
    finally:
        await broker.stop()


async def test_all_partitions_are_merged_by_time(http: Http, monkeypatch: pytest.MonkeyPatch) -> None:
    from pybroker.broker.console import messages

    await http.post("topics/create", {"name": "spread", "partitions": 3})
    for i, partition in enumerate((2, 0, 1, 2)):
        await http.post("produce", {"topic": "spread", "partition": partition, "value": f"m{i}"})
        await asyncio.sleep(0.003)  # distinct timestamps
    latest = await http.get("messages?topic=spread&partition=all&limit=3")
    assert [m["value"]["text"] for m in latest["messages"]] == ["m1", "m2", "m3"]
    assert [m["partition"] for m in latest["messages"]] == [0, 1, 2]
    assert latest["partition"] == "all" and [r["high_watermark"] for r in latest["partitions"]] == [1, 1, 2]
    earliest = await http.get("messages?topic=spread&partition=all&from=earliest&limit=2")
    assert [m["value"]["text"] for m in earliest["messages"]] == ["m0", "m1"]
    status, answer = await http.request("GET", "/console/api/messages?topic=spread&partition=all&from=offset&offset=0")
    assert status == 400 and "one partition" in answer["error"]
    monkeypatch.setattr(messages, "MAX_ALL_PARTITIONS", 2)
    status, answer = await http.request("GET", "/console/api/messages?topic=spread&partition=all")
    assert status == 400 and "choose one" in answer["error"]
    status, answer = await http.request("GET", "/console/api/messages?topic=nosuch&partition=all")
    assert status == 404


async def test_an_iceberg_topic_shows_its_table_status(http: Http) -> None:
    """The worker the broker starts fills the table; the topic page shows what it last reported."""
    await http.post("topics/create", {"name": "clicks", "partitions": 1,
                                      "configs": {"iceberg.mode": "key_value", "iceberg.commit.interval.ms": "200"}})
    for i in range(3):
        await http.post("produce", {"topic": "clicks", "partition": 0, "key": f"k{i}", "value": f"v{i}"})
    deadline = time.monotonic() + 120
    status: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        status = (await http.get("topic?name=clicks"))["iceberg"]
        if status and status.get("total_records") == 3:
            break
        await asyncio.sleep(0.2)
    assert status is not None and status["total_records"] == 3, status
    assert status["table"] == "pybroker.clicks" and status["mode"] == "key_value" and status["error"] is None
    assert status["offsets"] == {"0": 3} and status["lag_offsets"] == 0
    await http.post("topics/create", {"name": "plain", "partitions": 1})
    assert (await http.get("topic?name=plain"))["iceberg"] is None


async def test_an_iceberg_topic_whose_worker_cannot_start_says_why(http: Http, monkeypatch: pytest.MonkeyPatch) -> None:
    from pybroker.broker import iceberg_tables

    monkeypatch.setattr(iceberg_tables, "WORKER_MODULE", "pybroker.no_such_worker")
    await http.post("topics/create", {"name": "stuck", "partitions": 1, "configs": {"iceberg.mode": "key_value"}})
    deadline = time.monotonic() + 60
    status: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        status = (await http.get("topic?name=stuck"))["iceberg"]
        if status and status.get("error"):
            break
        await asyncio.sleep(0.2)
    assert status is not None and "worker" in status["error"] and status["mode"] == "key_value", status
