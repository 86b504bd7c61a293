"""The console's admin pages' API (ACLs, SCRAM users, quotas, transactions, KIP-848 groups, the broker page)
through the real HTTP server of an in-process broker: what each endpoint answers, that its changes take
effect in the broker, that a password is never echoed, that every parameter is checked, and that with
the authorizer on a principal without the ACL gets `403` with Kafka's error name."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.broker.console.local_client import LocalClient
from pybroker.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.record import Record, build_batch
from tests.unit.broker.console.console_http import Http, start_broker

ACL = {"resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "LITERAL", "principal": "User:alice",
       "host": "*", "operation": "READ", "permission": "ALLOW"}


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    broker = await start_broker(tmp_path, **{"transaction.partition.verification.enable": "false",
                                       "transaction.state.log.num.partitions": "1"})
    try:
        yield broker
    finally:
        await broker.stop()


async def _as(app: BrokerApp, creds: str) -> Http:
    assert app.console_bound_port is not None
    http = Http(app.console_bound_port)
    http.auth = creds
    await http.login()
    return http


async def test_the_broker_page(http: Http) -> None:
    info = await http.get("broker")
    assert info["node_id"] == 1 and info["principal"] == "User:ANONYMOUS" and info["version"]
    assert 0 <= info["uptime_ms"] < 600_000
    assert {"name": "transaction.version", "level": 2} in info["features"]["finalized"]
    assert {f["name"] for f in info["features"]["supported"]} >= {"metadata.version", "transaction.version"}
    assert any(a["name"] == "CONSUMER_GROUP_DESCRIBE" for a in info["apis"])
    assert info["cluster_details"] is True and "DESCRIBE" in info["cluster_operations"]
    assert info["listeners"][0]["security_protocol"] == "PLAINTEXT" and info["log_dirs"][0]["online"] is True
    assert info["security"]["authorizer"] is None and info["security"]["console_login"] is False


async def test_acls_without_an_authorizer_say_so(http: Http) -> None:
    assert await http.get("acls") == {"enabled": False, "acls": []}
    status, answer = await http.request("POST", "/console/api/acls/create", ACL)
    assert status == 409 and "SECURITY_DISABLED" in answer["error"]


async def test_scram_users_are_added_listed_and_removed_without_echoing_the_password(http: Http) -> None:
    status, answer = await http.request("POST", "/console/api/users/upsert",
                                        {"user": "carol", "password": "carol-pw-9", "mechanism": "SCRAM-SHA-256"})
    assert status == 200 and answer == {"user": "carol", "mechanism": "SCRAM-SHA-256", "iterations": 4096}
    listed = await http.get("users")
    assert listed == [{"user": "carol", "credentials": [{"mechanism": "SCRAM-SHA-256", "iterations": 4096}]}]
    assert "carol-pw-9" not in str(listed)
    await http.post("users/delete", {"user": "carol", "mechanism": "SCRAM-SHA-256"})
    assert await http.get("users") == []
    status, answer = await http.request("POST", "/console/api/users/delete",
                                        {"user": "carol", "mechanism": "SCRAM-SHA-256"})
    assert status == 409 and "RESOURCE_NOT_FOUND" in answer["error"]


async def test_quotas_are_set_listed_and_removed(app: BrokerApp, http: Http) -> None:
    await http.post("quotas/alter", {"entity": [{"type": "user", "name": "alice"}], "key": "producer_byte_rate",
                                     "value": 1048576})
    await http.post("quotas/alter", {"entity": [{"type": "client-id", "name": None}], "key": "request_percentage",
                                     "value": 50.5})
    assert await http.get("quotas") == [
        {"entity": [{"type": "client-id", "name": None}], "values": {"request_percentage": 50.5}},
        {"entity": [{"type": "user", "name": "alice"}], "values": {"producer_byte_rate": 1048576.0}}]
    await http.post("quotas/alter", {"entity": [{"type": "user", "name": "alice"}], "key": "producer_byte_rate",
                                     "value": None})
    assert len(await http.get("quotas")) == 1
    # the broker's own checks apply: a byte rate is a whole number, an ip takes connection_creation_rate only
    status, answer = await http.request("POST", "/console/api/quotas/alter", {
        "entity": [{"type": "user", "name": "bob"}], "key": "producer_byte_rate", "value": 1.5})
    assert status == 409 and "INVALID_REQUEST" in answer["error"]
    status, answer = await http.request("POST", "/console/api/quotas/alter", {
        "entity": [{"type": "ip", "name": "10.0.0.1"}], "key": "producer_byte_rate", "value": 10})
    assert status == 409


@pytest.mark.parametrize(("path", "body", "words"), [
    ("acls/create", {**ACL, "resource_type": "FILE"}, "resource_type must be one of"),
    ("acls/create", {**ACL, "principal": "alice"}, "principal must be TYPE:NAME"),
    ("acls/create", {**ACL, "resource_name": "x" * 1025}, "resource_name is longer than"),
    ("acls/delete", {**ACL, "operation": "ANY"}, "operation must be one of"),
    ("users/upsert", {"user": "u", "password": "p" * 1025}, "password is longer than"),
    ("users/upsert", {"user": "u", "password": "pw", "iterations": 100}, "iterations must be between"),
    ("users/upsert", {"user": "u"}, "password is required"),
    ("users/delete", {"user": "u", "mechanism": "MD5"}, "mechanism must be one of"),
    ("quotas/alter", {"entity": [{"type": "user", "name": "a"}] * 3, "key": "producer_byte_rate", "value": 1},
     "entity must be a list"),
    ("quotas/alter", {"entity": [{"type": "user"}, {"type": "user"}], "key": "producer_byte_rate", "value": 1},
     "each entity type may be named once"),
    ("quotas/alter", {"entity": [{"type": "user", "name": "a"}], "key": "producer_byte_rate", "value": "10"},
     "value must be a number"),
    ("quotas/alter", {"entity": [{"type": "user", "name": "a"}], "key": "disk_rate", "value": 1},
     "key must be one of"),
    ("transactions/abort", {"topic": "t", "partition": 0}, "start_offset is required"),
    ("transactions/abort", {"topic": "t", "partition": -1, "start_offset": 0}, "partition must be between"),
])
async def test_bad_admin_changes_get_a_clear_400(http: Http, path: str, body: Any, words: str) -> None:
    status, answer = await http.request("POST", "/console/api/" + path, body)
    assert status == 400 and words in answer["error"], answer
    assert "p" * 20 not in answer["error"]  # a password is never echoed, even in a refusal


async def test_admin_changes_need_the_csrf_token(http: Http) -> None:
    http.token = "forged"
    status, answer = await http.request("POST", "/console/api/users/upsert", {"user": "mallory", "password": "x"})
    assert status == 403 and "X-Console-Token" in answer["error"]
    assert (await http.request("GET", "/console/api/users/upsert"))[0] == 405


async def test_a_hanging_transaction_is_found_and_aborted(app: BrokerApp, http: Http) -> None:
    """A transactional batch written into a partition its transaction never added (possible only without
    KIP-890 verification): no coordinator will write its marker, so the page finds it and aborts it."""
    await http.post("topics/create", {"name": "payments", "partitions": 1})
    client = LocalClient(app.state)
    init = await client.call(InitProducerIdRequest(transactional_id="hang-1", transaction_timeout_ms=60_000), 4)
    for _ in range(100):
        if init.error_code == 0:
            break
        await asyncio.sleep(0.1)  # the transaction state topic is being created
        init = await client.call(InitProducerIdRequest(transactional_id="hang-1", transaction_timeout_ms=60_000), 4)
    assert init.error_code == 0, init
    batch = build_batch([Record(0, 0, b"k", b"hanging")], base_timestamp=int(time.time() * 1000),
                        producer_id=init.producer_id, producer_epoch=init.producer_epoch, base_sequence=0,
                        is_transactional=True)
    produced = await client.call(ProduceRequest(transactional_id="hang-1", acks=-1, timeout_ms=10_000, topic_data=[
        TopicProduceData(name="payments", partition_data=[PartitionProduceData(index=0, records=batch)])]), 9)
    assert produced.responses[0].partition_responses[0].error_code == 0
    listed = await http.get("transactions")
    assert [(t["transactional_id"], t["state"], t["producer_id"]) for t in listed["transactions"]] == [
        ("hang-1", "Empty", init.producer_id)]
    assert (await http.get("transactions/hanging"))["hanging"] == []  # younger than 15 minutes: not a suspect yet
    found = await http.get("transactions/hanging?older_than_ms=0&topic=payments")
    [row] = found["hanging"]
    assert (row["topic"], row["partition"], row["start_offset"], row["producer_id"], row["transactional_id"]) == (
        "payments", 0, 0, init.producer_id, "hang-1")
    aborted = await http.post("transactions/abort", {"topic": "payments", "partition": 0, "start_offset": 0})
    assert aborted["aborted"] is True and aborted["producer_id"] == init.producer_id
    assert (await http.get("transactions/hanging?older_than_ms=0"))["hanging"] == []
    status, answer = await http.request("POST", "/console/api/transactions/abort",
                                        {"topic": "payments", "partition": 0, "start_offset": 0})
    assert status == 404 and "no open transaction starts at offset 0" in answer["error"]
    status, answer = await http.request("GET", "/console/api/transactions/hanging?topic=nope&older_than_ms=0")
    assert status == 404 and "UNKNOWN_TOPIC_OR_PARTITION" in answer["error"]


async def test_a_consumer_protocol_group_shows_epochs_subscriptions_and_assignments(app: BrokerApp,
                                                                                 http: Http) -> None:
    await http.post("topics/create", {"name": "clicks", "partitions": 2})
    client = LocalClient(app.state)
    beat = await client.call(ConsumerGroupHeartbeatRequest(
        group_id="kip848", member_id="", member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=["clicks"], server_assignor="uniform", topic_partitions=[]), 0)
    assert beat.error_code == 0, beat
    listed = await http.get("consumer-groups")
    assert [(g["group"], g["state"], g["assignor"], g["members"]) for g in listed] == [
        ("kip848", "Stable", "uniform", 1)]
    group = await http.get("consumer-group?id=kip848")
    assert group["group_epoch"] >= 1 and group["assignment_epoch"] == group["group_epoch"]
    [member] = group["members"]
    assert member["member_id"] == beat.member_id and member["member_epoch"] == beat.member_epoch
    assert member["subscribed_topics"] == ["clicks"] and member["subscribed_regex"] is None
    assert member["target_assignment"] == ["clicks-0", "clicks-1"]
    status, answer = await http.request("GET", "/console/api/consumer-group?id=nobody")
    assert status == 404 and "not a consumer-protocol (KIP-848) group" in answer["error"]


async def test_with_the_authorizer_each_page_needs_its_acl(secured: BrokerApp) -> None:
    admin = await _as(secured, "admin:admin-pw")
    alice = await _as(secured, "alice:alice-secret")
    # the broker page: everyone sees the software; only a cluster describer sees listeners and security
    info = await alice.get("broker")
    assert info["principal"] == "User:alice" and info["cluster_details"] is False and "listeners" not in info
    full = await admin.get("broker")
    assert full["security"]["authorizer"] and full["security"]["super_users"] == ["User:admin"]
    assert full["security"]["sasl_listeners"] == ["SASL_PLAINTEXT"] and full["security"]["console_login"] is True
    for path in ("acls", "users", "quotas"):
        status, answer = await alice.request("GET", "/console/api/" + path)
        assert status == 403 and "CLUSTER_AUTHORIZATION_FAILED" in answer["error"], (path, answer)
    for path, body in (("acls/create", ACL), ("users/upsert", {"user": "alice", "password": "new-pw-1"}),
                       ("quotas/alter", {"entity": [{"type": "user", "name": "alice"}], "key": "producer_byte_rate",
                                         "value": 1})):
        status, answer = await alice.request("POST", "/console/api/" + path, body)
        assert status == 403 and "CLUSTER_AUTHORIZATION_FAILED" in answer["error"], (path, answer)
    assert await alice.get("transactions") == {"transactions": [], "total": 0, "shown": 0}
    # the super user manages ACLs
    created = await admin.post("acls/create", ACL)
    assert created == ACL
    assert (await admin.get("acls")) == {"enabled": True, "acls": [ACL]}
    assert await admin.post("acls/delete", ACL) == {"deleted": 1}
    assert (await admin.get("acls"))["acls"] == []
    # a SCRAM user made in the console logs in to the console with its password
    await admin.post("users/upsert", {"user": "dave", "password": "dave-pw-1", "mechanism": "SCRAM-SHA-256"})
    dave = await _as(secured, "dave:dave-pw-1")
    assert (await dave.get("session"))["user"] == "User:dave"


async def test_the_admin_pages_script_is_served_and_loaded_by_the_page(http: Http) -> None:
    status, headers, body = await http.raw(b"GET /console/admin_pages.js HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert status == 200 and headers["content-type"].startswith("text/javascript")
    assert "script-src 'self'" in headers["content-security-policy"] and b"PAGES.push(" in body
    assert b"innerHTML" not in body  # values go into the page as text only
    _, _, page = await http.raw(b"GET /console/ HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert page.index(b"/console/app.js") < page.index(b"/console/admin_pages.js")


async def test_an_overlong_request_or_header_line_gets_an_answer(http: Http) -> None:
    status, _, body = await http.raw(b"GET /console/api/broker?" + b"x" * 9000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert status == 414 and body == b"request line too long\n"
    status, _, body = await http.raw(b"GET /console/api/broker HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"y" * 9000
                                     + b"\r\n\r\n")
    assert status == 431 and body == b"header line too long\n"
