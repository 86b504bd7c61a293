"""The console's admin pages in a real browser (Debian's chromium through chromium-driver), against a live
broker with SASL PLAIN logins and the authorizer on, filled by stock clients: ACLs, SCRAM users, quotas
(each added and removed through its form and confirmation), transactions (a hanging one found and
aborted), a KIP-848 group of a librdkafka consumer (epochs, subscription, assignment), the broker page,
and what a principal without ACLs sees ("not authorized", not a broken page).

The last test is the screenshot tour: every console page, old and new, at one window size. With
`PYBROKER_CONSOLE_SCREENSHOTS=1` (`make screenshots`) it writes docs/images/console/, the images
docs/console.md shows, and the broker's directory is `pybroker-console` in the system's temporary folder
(the pictures show its log dir); otherwise the screenshots go under test-artifacts/, so a normal run
rewrites no tracked file.

One broker and one browser serve the whole module; the tests run in file order and build on each other.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pybroker.clients.client_config import ClientSecurity
from pybroker.clients.wire import WireClient
from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.record import Record, build_batch
from tests.integration.brokers import free_port
from tests.integration.clients import kp_admin, kp_consumer, kp_producer
from tests.integration.console_page import SCREENSHOTS_ENV, Page, chromium, screenshot_dir
from tests.integration.metrics_broker import MetricsBrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC, HANGING_TOPIC, GROUP, KIP848_GROUP = "orders", "payments", "billing", "kip848-readers"
OPEN_TXN = "checkout"
PARTITIONS, PER_PARTITION, COMMITTED = 3, 10, 4
ADMIN, ADMIN_PW, ALICE, ALICE_PW = "admin", "admin-pw", "alice", "alice-pw"
JAAS = (f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{ADMIN}="{ADMIN_PW}" '
        f'user_{ALICE}="{ALICE_PW}";')
SASL = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": ADMIN,
        "sasl_plain_password": ADMIN_PW}
CK_SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN", "sasl.username": ADMIN,
           "sasl.password": ADMIN_PW}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, broker_target: str) -> Iterator[MetricsBrokerProcess]:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own console")
    console_port = free_port()
    workdir = tmp_path_factory.mktemp("console-admin") / "broker"
    if os.environ.get(SCREENSHOTS_ENV) == "1":  # the pictures show the log dir: one any machine could have
        workdir = Path(tempfile.gettempdir()) / "pybroker-console"
        shutil.rmtree(workdir, ignore_errors=True)
    proc = MetricsBrokerProcess(workdir, {
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.plaintext.plain.sasl.jaas.config": JAAS,
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{ADMIN}", "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "2", "transaction.state.log.num.partitions": "1",
        # a transactional batch in a partition its transaction never added: how a hanging transaction is made
        "transaction.partition.verification.enable": "false"}, extra_args=["--console-port", str(console_port)])
    proc.console_port = console_port  # type: ignore[attr-defined]
    proc.start()
    open_transaction: Any = None
    try:
        _fill(proc.bootstrap)
        open_transaction = _open_a_transaction(proc.bootstrap)
        yield proc
    finally:
        if open_transaction is not None:
            with contextlib.suppress(Exception):
                open_transaction.abort_transaction(10)
            open_transaction.close()
        proc.close()


def _open_a_transaction(bootstrap: str) -> Any:
    """A librdkafka transactional producer with a transaction left open on `orders`-0 (Ongoing, with a
    long timeout, for the module's life): the transactions page lists it, and it is not hanging."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, **CK_SASL, "transactional.id": OPEN_TXN,
                         "transaction.timeout.ms": 600_000})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(TOPIC, b"in flight", key=b"checkout", partition=0)
    assert producer.flush(20) == 0
    return producer


def _fill(bootstrap: str) -> None:
    """`orders`: 3 partitions x 10 keyed JSON messages; group `billing` committed 4 of each (Empty, lagging);
    `payments`: one transactional batch whose transaction never added the partition (hanging)."""
    from kafka.admin import NewTopic
    from kafka.structs import OffsetAndMetadata, TopicPartition

    with kp_admin(bootstrap, **SASL) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1), NewTopic(HANGING_TOPIC, 1, 1)])
    with kp_producer(bootstrap, acks="all", linger_ms=0, **SASL) as producer:
        for partition in range(PARTITIONS):
            for i in range(PER_PARTITION):
                producer.send(TOPIC, json.dumps({"order": i, "partition": partition}).encode(),
                              key=f"customer-{i}".encode(), partition=partition, headers=[("source", b"shop")])
        producer.flush(timeout=20)
    # assigned, not subscribed: the commit cannot meet a rebalance, and the group is left Empty, lagging
    with kp_consumer(bootstrap, group_id=GROUP, enable_auto_commit=False, **SASL) as consumer:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        consumer.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(COMMITTED, "", -1) for p in range(PARTITIONS)})
    security = ClientSecurity(protocol="SASL_PLAINTEXT", mechanism="PLAIN", username=ADMIN, password=ADMIN_PW)
    with WireClient(bootstrap, security=security) as client:
        request = InitProducerIdRequest(transactional_id="hang-payments", transaction_timeout_ms=60_000)
        deadline = time.monotonic() + 30
        init = client.call(request, max_version=4)
        while init.error_code and time.monotonic() < deadline:  # the transaction state topic is being made
            time.sleep(0.1)
            init = client.call(request, max_version=4)
        assert init.error_code == 0, init
        batch = build_batch([Record(0, 0, b"k", b"hanging")], base_timestamp=int(time.time() * 1000),
                            producer_id=init.producer_id, producer_epoch=init.producer_epoch, base_sequence=0,
                            is_transactional=True)
        produced = client.call(ProduceRequest(transactional_id="hang-payments", acks=-1, timeout_ms=10_000,
                                              topic_data=[TopicProduceData(name=HANGING_TOPIC, partition_data=[
                                                  PartitionProduceData(index=0, records=batch)])]), max_version=9)
        assert produced.responses[0].partition_responses[0].error_code == 0, produced


@pytest.fixture(scope="module")
def browser(broker: MetricsBrokerProcess) -> Iterator[Any]:
    with chromium() as session:
        yield session


@pytest.fixture
def page(browser: Any, broker: MetricsBrokerProcess) -> Iterator[Page]:
    shown = Page(browser, f"http://127.0.0.1:{broker.console_port}",  # type: ignore[attr-defined]
                 screenshot_dir("console-admin"), signed_in=True)
    shown.log_in(ADMIN, ADMIN_PW)
    try:
        yield shown
    finally:
        shown.log_in(None)


def test_broker_page(page: Page) -> None:
    page.open("broker")
    assert page.text("broker-version").startswith("pybroker ") and page.text("broker-node") == "1"
    assert page.text("broker-principal") == f"User:{ADMIN}"
    assert page.row("features", "transaction.version")[1:] == ["2", "0\u20132"]  # type: ignore[index]
    assert page.rows("broker-listeners")[0][:2] == ["PLAINTEXT", "SASL_PLAINTEXT"]
    assert page.rows("broker-listeners")[0][5] == "PLAIN"
    assert page.row("broker-security", "Authorizer")[1].endswith("StandardAuthorizer")  # type: ignore[index]
    assert page.row("broker-security", "Super users")[1] == f"User:{ADMIN}"  # type: ignore[index]
    assert page.rows("broker-log-dirs")[0][1] == "online"
    assert "DESCRIBE" in page.text("broker-operations")


def test_acls_page_adds_and_removes_a_binding(page: Page) -> None:
    page.open("acls")
    assert page.rows("acls") == []
    page.fill("acl-resource-name", TOPIC)
    page.fill("acl-principal", f"User:{ALICE}")
    page.select("acl-operation", "DESCRIBE")
    page.el("acl-create-submit").click()
    page.confirm()
    page.until(lambda: page.rows("acls")[:1] == [["TOPIC", TOPIC, "LITERAL", f"User:{ALICE}", "*", "DESCRIBE",
                                                  "ALLOW", "Remove"]], "the new ACL never listed")
    page.fill("acl-resource-name", "tmp-")
    page.select("acl-pattern-type", "PREFIXED")
    page.fill("acl-principal", "User:bob")
    page.select("acl-permission", "DENY")
    page.select("acl-operation", "WRITE")
    page.el("acl-create-submit").click()
    page.confirm()
    page.until(lambda: len(page.rows("acls")) == 2, "the second ACL never listed")
    bob = next(i for i, r in enumerate(page.rows("acls")) if r[3] == "User:bob")  # two rows start with TOPIC
    page.driver.find_elements("css selector", "#acls tbody tr")[bob].find_element("css selector", "button").click()
    page.confirm()
    page.until(lambda: [r[3] for r in page.rows("acls")] == [f"User:{ALICE}"], "the ACL was not removed")


def test_users_page_adds_a_scram_user_without_showing_its_password(page: Page) -> None:
    page.open("users")
    page.fill("user-name", "carol")
    page.fill("user-password", "carol-secret-1")
    page.el("user-upsert-submit").click()
    page.confirm()
    page.until(lambda: page.row("users", "carol") == ["carol", "SCRAM-SHA-512", "4,096", "Remove"],
               "carol never listed")
    assert page.el("user-password").get_attribute("value") == ""
    assert "carol-secret-1" not in page.driver.page_source
    page.fill("user-name", "dave")
    page.fill("user-password", "dave-secret-1")
    page.select("user-mechanism", "SCRAM-SHA-256")
    page.el("user-upsert-submit").click()
    page.confirm()
    page.until(lambda: page.row("users", "dave"), "dave never listed")
    page.click_in_row("users", "dave", "Remove")
    page.confirm()
    page.until(lambda: page.row("users", "dave") is None, "dave was not removed")


def test_quotas_page_sets_and_removes_a_quota(page: Page) -> None:
    page.open("quotas")
    page.fill("quota-name", ALICE)
    page.fill("quota-value", "1048576")
    page.el("quota-set-submit").click()
    page.confirm()
    page.until(lambda: page.row("quotas", f"user={ALICE}") == [f"user={ALICE}", "producer_byte_rate", "1,048,576",
                                                               "Remove"], "the quota never listed")
    page.select("quota-type", "client-id")
    page.fill("quota-name", "")
    page.select("quota-key", "request_percentage")
    page.fill("quota-value", "25")
    page.el("quota-set-submit").click()
    page.confirm()
    page.until(lambda: page.row("quotas", "client-id=<default>"), "the default client quota never listed")
    page.click_in_row("quotas", "client-id=<default>", "Remove")
    page.confirm()
    page.until(lambda: page.row("quotas", "client-id=<default>") is None, "the quota was not removed")
    # a value the broker refuses comes back as its error, in words
    page.fill("quota-name", ALICE)
    page.select("quota-key", "producer_byte_rate")
    page.fill("quota-value", "1.5")
    page.el("quota-set-submit").click()
    page.confirm()
    page.until(lambda: "INVALID_REQUEST" in page.text("notice"), "the refusal was not shown")


def test_transactions_page_finds_and_aborts_a_hanging_transaction(page: Page) -> None:
    page.open("transactions")
    assert page.row("transactions", "hang-payments")[1] == "Empty"  # type: ignore[index]
    ongoing = page.row("transactions", OPEN_TXN)
    assert ongoing is not None and ongoing[1] == "Ongoing" and ongoing[4] == "10m 0s" and ongoing[7] == f"{TOPIC}-0"
    page.el("hanging-submit").click()  # 15 minutes by default: too young to be a suspect
    page.until(lambda: page.text("hanging-status").startswith("0 hanging"), "the default search never answered")
    page.fill("hanging-minutes", "0")
    page.el("hanging-submit").click()
    page.until(lambda: page.row("hanging", f"{HANGING_TOPIC}-0"), "the hanging transaction was not found")
    row = page.row("hanging", f"{HANGING_TOPIC}-0")
    assert row[1] == "0" and row[4] == "hang-payments"  # type: ignore[index]
    page.screenshot("transactions-hanging")
    page.click_in_row("hanging", f"{HANGING_TOPIC}-0", "Abort")
    page.confirm()
    page.until(lambda: "aborted" in page.text("notice") and page.text("hanging-status").startswith("0 hanging"),
               "the transaction was not aborted")


def test_kip848_group_page(page: Page, broker: MetricsBrokerProcess) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": KIP848_GROUP, **CK_SASL,
                         "group.protocol": "consumer", "client.id": "kip848-reader", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([TOPIC])

        def assigned() -> bool:
            consumer.poll(0.2)  # heartbeats go out while the client is polled
            return len(consumer.assignment()) == PARTITIONS

        page.until(assigned, "the consumer-protocol member got no assignment", timeout=30)
        page.open("consumer-groups")
        listed = page.row("consumer-groups", KIP848_GROUP)
        assert listed is not None and listed[1] == "Stable" and listed[5] == "1", listed
        page.open(f"consumer-group/{KIP848_GROUP}")
        assert page.text("cg-state") == "Stable" and int(page.text("cg-group-epoch")) >= 1
        assert page.text("cg-assignment-epoch") == page.text("cg-group-epoch") and page.text("cg-assignor")
        member = page.rows("cg-member-table")[0]
        assert member[1] == "kip848-reader" and int(member[3]) >= 1 and member[4] == TOPIC
        assert member[5] == ", ".join(f"{TOPIC}-{p}" for p in range(PARTITIONS)) and member[6] == "(same)"
        assert member[8] == "consumer"
    finally:
        consumer.close()


def test_a_principal_without_acls_sees_not_authorized(page: Page) -> None:
    page.log_in(ALICE, ALICE_PW)
    for route in ("acls", "users", "quotas"):
        page.open(route)
        page.until(lambda: page.text("not-authorized").startswith(f"Not authorized: User:{ALICE} may not see"),
                   f"{route}: no clear refusal")
        assert "CLUSTER_AUTHORIZATION_FAILED" in page.text("not-authorized")
    page.screenshot("not-authorized")
    page.open("broker")
    assert page.text("broker-principal") == f"User:{ALICE}" and page.text("broker-operations") == "none"
    assert "DESCRIBE the cluster" in page.text("broker-details-hidden") and not page.rows("broker-listeners")
    page.open("transactions")
    assert page.rows("transactions") == []  # no DESCRIBE on any transactional id


#: every console page, in the order docs/console.md shows them: (image name, route, element to wait for)
TOUR = [
    ("overview", "overview", None), ("topics", "topics", None), ("topic", f"topic/{TOPIC}", None),
    ("messages", f"messages?topic={TOPIC}&partition=0", None), ("groups", "groups", None),
    ("group", f"group/{GROUP}", None), ("configs", "configs", None),
    ("consumer-groups", "consumer-groups", "consumer-groups"),
    ("consumer-group", f"consumer-group/{KIP848_GROUP}", "cg-member-table"),
    ("transactions", "transactions", "transactions"), ("acls", "acls", "acls"), ("users", "users", "users"),
    ("quotas", "quotas", "quotas"), ("broker", "broker", "features"),
]


def test_screenshot_tour_of_every_page(page: Page, broker: MetricsBrokerProcess) -> None:
    """Each page loads without an error at the fixed window size and is photographed (see the module doc),
    with a KIP-848 consumer running so its group has a member to show."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": KIP848_GROUP, **CK_SASL,
                         "group.protocol": "consumer", "client.id": "kip848-reader", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([TOPIC])

        def assigned() -> bool:
            consumer.poll(0.2)
            return len(consumer.assignment()) == PARTITIONS

        page.until(assigned, "the consumer-protocol member got no assignment", timeout=30)
        for name, route, table in TOUR:
            page.open(route)
            if table is not None:
                page.until(lambda t=table: page.driver.find_elements("id", t), f"{route}: no #{table}")
            assert not page.text("page-error") and not page.text("not-authorized"), (route, page.text("page"))
            if name == "overview":  # the charts, once the sampler has two samples (every 2 s while someone looks)
                page.until(lambda: page.driver.find_elements("css selector", "#charts svg"), "no charts", timeout=20)
            consumer.poll(0)  # keep the member's heartbeats going between pages
            assert page.screenshot(name).stat().st_size > 0
    finally:
        consumer.close()
