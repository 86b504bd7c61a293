"""The web console in a real browser (Debian's chromium through chromium-driver), against a live broker
that stock clients filled: a topic with keyed JSON messages and headers, and a consumer group that
committed part of it and left (Empty, lagging). Each test opens one page, checks what a person sees there
(names, counts, lag figures) and does what the page offers (create a topic, alter a config, delete a topic,
produce, live tail, reset offsets); a screenshot of every page is kept under `test-artifacts/console/`.

One broker and one browser serve the whole module; the tests run in file order and build on each other.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.brokers import REPO_ROOT, free_port
from tests.integration.clients import kp_admin, kp_consumer, kp_producer
from tests.integration.console_page import Page
from tests.integration.metrics_broker import MetricsBrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC, GROUP = "orders", "billing"
PARTITIONS, PER_PARTITION, COMMITTED = 3, 10, 4
ARTIFACTS = REPO_ROOT / "test-artifacts" / "console"


def _binaries() -> tuple[str, str]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        message = "chromium and chromium-driver are missing (make test installs Debian's packages)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return chromium, driver


@pytest.fixture(scope="module")
def console_broker(tmp_path_factory: pytest.TempPathFactory, broker_target: str) -> Iterator[MetricsBrokerProcess]:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own console")
    console_port = free_port()
    proc = MetricsBrokerProcess(tmp_path_factory.mktemp("console") / "broker",
                                {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "2"},
                                extra_args=["--console-port", str(console_port)])
    proc.console_port = console_port  # type: ignore[attr-defined]
    proc.start()
    try:
        _fill(proc.bootstrap)
        yield proc
    finally:
        proc.close()


def _fill(bootstrap: str) -> None:
    """`orders`: 3 partitions x 10 keyed JSON messages with a header; group `billing` committed 4 of each."""
    from kafka.admin import NewTopic
    from kafka.errors import CommitFailedError, RebalanceInProgressError
    from kafka.structs import OffsetAndMetadata, TopicPartition

    with kp_admin(bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    with kp_producer(bootstrap, acks="all", linger_ms=0) as producer:
        for partition in range(PARTITIONS):
            for i in range(PER_PARTITION):
                producer.send(TOPIC, json.dumps({"order": i, "partition": partition}).encode(),
                              key=f"customer-{i}".encode(), partition=partition, headers=[("source", b"shop")])
        producer.flush(timeout=20)
    with kp_consumer(bootstrap, group_id=GROUP, enable_auto_commit=False, auto_offset_reset="earliest") as consumer:
        consumer.subscribe([TOPIC])
        offsets = {TopicPartition(TOPIC, p): OffsetAndMetadata(COMMITTED, "", -1) for p in range(PARTITIONS)}
        deadline = time.monotonic() + 120  # a loaded machine may rebalance more than once before it settles
        while True:
            consumer.poll(timeout_ms=200)
            if len(consumer.assignment()) == PARTITIONS:
                try:
                    consumer.commit(offsets)
                    return
                except (RebalanceInProgressError, CommitFailedError):
                    pass  # the group moved on meanwhile: poll again, then commit
            assert time.monotonic() < deadline, f"group {GROUP} never settled to commit its offsets"


@pytest.fixture(scope="module")
def browser(console_broker: MetricsBrokerProcess) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium, driver = _binaries()
    options = Options()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000", "--disable-extensions"):
        options.add_argument(arg)
    session = webdriver.Chrome(options=options, service=Service(driver))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        yield session
    finally:
        session.quit()


@pytest.fixture
def page(browser: Any, console_broker: MetricsBrokerProcess) -> Page:
    return Page(browser, f"http://127.0.0.1:{console_broker.console_port}", ARTIFACTS)  # type: ignore[attr-defined]


def test_overview(page: Page, console_broker: MetricsBrokerProcess) -> None:
    page.open("overview")
    assert page.text("card-topics").endswith("1")
    assert page.text("card-partitions").endswith(str(PARTITIONS + 2))  # orders + the offsets topic's 2
    assert "1 Empty" in page.text("card-groups")
    log_dir = page.rows("log-dirs")[0]
    assert log_dir[0] == str(console_broker.log_dirs[0]) and log_dir[1] == "online" and log_dir[4] == str(PARTITIONS + 2)
    assert page.rows("listeners")[0][:2] == ["PLAINTEXT", "PLAINTEXT"]
    # the sampler has run since the broker started: the first load draws the history there is, with axes
    assert "Collecting" not in page.text("page")
    page.until(lambda: page.text("chart-bytes_in"), "no throughput chart")
    assert "Request latency" in page.text("charts")

    def facts() -> Any:  # one snapshot: the charts are redrawn every 2 s, so elements found one by one go stale
        return page.driver.execute_script("""
            const c = document.getElementById('chart-bytes_in');
            if (!c) return null;
            const texts = (root, sel) => Array.from(root.querySelectorAll(sel)).map(e => e.textContent);
            const line = k => ['stroke', 'stroke-dasharray'].map(a => c.querySelector('path.series-' + k).getAttribute(a));
            return {x: texts(c, '.axis-x text'), y: texts(c, '.axis-y text'), legend: texts(c, '.legend-item'),
                    swatches: c.querySelectorAll('.legend svg.swatch').length, in: line('bytes_in'), out: line('bytes_out'),
                    latency: texts(document, '#chart-latency_p50 .axis-y text')};""")

    seen = page.until(lambda: (f := facts()) and len(f["x"]) >= 2 and f, "no clock times under the throughput chart")
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d", t) for t in seen["x"])
    assert len(seen["y"]) == 5 and seen["y"][0] == "0 B/s" and all(t.endswith("/s") for t in seen["y"])
    assert seen["latency"][0] == "0 ms"
    assert seen["in"][0] != seen["out"][0] and seen["in"][1] != seen["out"][1]  # colour and dash differ
    assert [t.split(":")[0] for t in seen["legend"]] == ["in", "out"] and seen["swatches"] == 2
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.action_chains import ActionChains

    def hovered() -> bool:
        try:
            overlay = page.driver.find_element("css selector", "#chart-bytes_in rect.overlay")
            ActionChains(page.driver).move_to_element(overlay).perform()
        except StaleElementReferenceException:
            return False
        return " — in: " in page.text("readout-bytes_in") and "out: " in page.text("readout-bytes_in")

    page.until(hovered, "no hover readout")
    page.screenshot("overview")


def test_topics_list_and_create(page: Page) -> None:
    page.open("topics")
    assert page.row("topics", TOPIC)[1:3] == [str(PARTITIONS), str(PARTITIONS * PER_PARTITION)]  # type: ignore[index]
    assert page.row("topics", "__consumer_offsets") is None
    page.fill("new-topic-name", "payments")
    page.fill("new-topic-partitions", "2")
    page.el("create-topic-submit").click()
    page.confirm()
    page.until(lambda: page.row("topics", "payments"), "payments never listed")
    assert page.row("topics", "payments")[1:3] == ["2", "0"]  # type: ignore[index]
    assert "Topic payments created." in page.text("notice")
    page.screenshot("topics")


def test_topic_partitions_configs_alter_and_delete(page: Page) -> None:
    page.open(f"topic/{TOPIC}")
    partitions = page.rows("partitions")
    assert [r[0] for r in partitions] == ["0", "1", "2"] and {r[2] for r in partitions} == {str(PER_PARTITION)}
    assert page.row("topic-configs", "cleanup.policy")[1:3] == ["delete", "DEFAULT_CONFIG"]  # type: ignore[index]
    # humanized, with the raw value on hover
    assert page.row("topic-configs", "retention.ms")[1:3] == ["7 d", "DEFAULT_CONFIG"]  # type: ignore[index]
    assert page.row("topic-configs", "retention.bytes")[1] == "unlimited"  # type: ignore[index]
    assert page.row("topic-configs", "segment.bytes")[1] == "1 GiB"  # type: ignore[index]
    assert _config_cell(page, "topic-configs", "retention.ms").get_attribute("title") == "raw value: 604800000"
    page.fill("config-key", "retention.ms")
    page.fill("config-value", "3600000")
    page.el("alter-config-submit").click()
    page.confirm()
    page.until(lambda: (page.row("topic-configs", "retention.ms") or [""])[1:3] == ["1 h", "DYNAMIC_TOPIC_CONFIG"],
               "retention.ms was not altered")
    assert _row_classes(page, "topic-configs", "retention.ms") == "override"
    assert _row_classes(page, "topic-configs", "cleanup.policy") == ""
    page.screenshot("topic")
    # edited in place: a refusal shows Kafka's words and keeps the edit open; Enter saves; "default" removes
    _edit_config(page, "topic-configs", "retention.ms", "soon")
    page.until(lambda: "INVALID_CONFIG" in page.text("notice"), "no Kafka error for a bad value")
    _edit_config(page, "topic-configs", "retention.ms", "5400000")
    page.until(lambda: (page.row("topic-configs", "retention.ms") or ["", ""])[1] == "1 h 30 min", "the inline edit was lost")
    _row_button(page, "topic-configs", "retention.ms", "cfg-edit").click()
    _row_button(page, "topic-configs", "retention.ms", "cfg-reset").click()
    page.until(lambda: (page.row("topic-configs", "retention.ms") or [""])[1:3] == ["7 d", "DEFAULT_CONFIG"],
               "the override was not removed")
    page.fill("config-key", "retention.ms")
    page.fill("config-value", "3600000")
    page.el("alter-config-submit").click()
    page.confirm()
    page.until(lambda: (page.row("topic-configs", "retention.ms") or ["", ""])[1] == "1 h", "retention.ms was not set back")

    page.open("topic/payments")
    page.el("delete-topic").click()
    page.confirm(typed="payments")
    page.until(lambda: page.driver.current_url.endswith("#/topics") and page.row("topics", TOPIC), "not back at topics")
    assert page.row("topics", "payments") is None


def _config_row(page: Page, table_id: str, name: str) -> Any:
    row = page.driver.execute_script(
        "return Array.from(document.querySelectorAll(`#${arguments[0]} tbody tr`))"
        ".find(tr => tr.cells[0].innerText.trim() === arguments[1]) || null", table_id, name)
    if row is None:
        raise AssertionError(f"no row {name} in {table_id}")
    return row


def _config_cell(page: Page, table_id: str, name: str) -> Any:
    return _config_row(page, table_id, name).find_element("css selector", ".cfg-value")


def _row_classes(page: Page, table_id: str, name: str) -> str:
    return str(_config_row(page, table_id, name).get_attribute("class") or "")


def _row_button(page: Page, table_id: str, name: str, css_class: str) -> Any:
    return _config_row(page, table_id, name).find_element("css selector", f"button.{css_class}")


def _edit_config(page: Page, table_id: str, name: str, value: str) -> None:
    from selenium.webdriver.common.keys import Keys

    if not _config_row(page, table_id, name).find_elements("css selector", "input.cfg-input"):
        _row_button(page, table_id, name, "cfg-edit").click()
    field = _config_row(page, table_id, name).find_element("css selector", "input.cfg-input")
    field.clear()
    field.send_keys(value, Keys.ENTER)


def test_messages_browse_search_page_and_tail(page: Page, console_broker: MetricsBrokerProcess) -> None:
    page.open(f"messages?topic={TOPIC}&partition=1")
    page.until(lambda: len(page.rows("message-table")) == PER_PARTITION, "the partition's messages never showed")
    rows = page.rows("message-table")
    assert [r[1] for r in rows] == [str(i) for i in reversed(range(PER_PARTITION))]  # newest first
    oldest = rows[-1]
    assert oldest[:2] == ["1", "0"] and oldest[3] == "customer-0" and oldest[5] == "source=shop"
    assert "\n" not in oldest[4] and json.loads(oldest[4]) == {"order": 0, "partition": 1}  # folded to one line
    page.el("msg-order").click()
    page.until(lambda: page.cells("message-table", 0)[1:2] == ["0"], "oldest first did not reorder")
    toggle = page.driver.find_elements("css selector", "#message-table tbody tr")[0].find_element("css selector", ".rec-toggle")
    toggle.click()
    page.until(lambda: "\n" in page.cells("message-table", 0)[4], "the record did not unfold")
    assert json.loads(page.cells("message-table", 0)[4]) == {"order": 0, "partition": 1}
    page.driver.find_elements("css selector", "#message-table tbody tr")[1].find_element("css selector", ".rec-hex").click()
    page.until(lambda: page.cells("message-table", 1)[3:4] == [b"customer-1".hex(" ")], "no hex view of one record")
    page.el("msg-order").click()
    page.select("msg-format", "hex")
    page.el("msg-load").click()
    page.until(lambda: page.cells("message-table", -1)[3:4] == [b"customer-0".hex(" ")], "hex keys never showed")
    page.select("msg-format", "auto")
    page.fill("msg-partition", "all")
    page.el("msg-load").click()
    page.until(lambda: len(page.rows("message-table")) == PARTITIONS * PER_PARTITION, "all partitions never showed")
    assert {r[0] for r in page.rows("message-table")} == {"0", "1", "2"}
    assert page.text("msg-status").startswith(f"{PARTITIONS * PER_PARTITION} messages from {PARTITIONS} partitions")

    # searches run in the broker: a key, a value, a header, a time range
    page.fill("msg-key", "customer-7")
    page.el("msg-search").click()
    page.until(lambda: len(page.rows("message-table")) == PARTITIONS, "the key search did not narrow")
    assert {r[3] for r in page.rows("message-table")} == {"customer-7"}
    page.fill("msg-key", "")
    page.el("msg-key").clear()
    page.fill("msg-value", '"order": 3,')
    page.el("msg-search").click()
    page.until(lambda: [r[0] for r in page.rows("message-table")] and {json.loads(r[4])["order"] for r in
               page.rows("message-table")} == {3} and len(page.rows("message-table")) == PARTITIONS,
               "the value search did not narrow")
    page.el("msg-value").clear()
    page.fill("msg-header", "source")
    page.fill("msg-header-value", "nope")
    page.el("msg-search").click()
    page.until(lambda: page.rows("message-table") == [] and page.text("msg-status").startswith("0 messages"),
               "a header value nobody has still matched")
    page.el("msg-header-value").clear()
    page.el("msg-search").click()
    page.until(lambda: len(page.rows("message-table")) == PARTITIONS * PER_PARTITION, "the header search lost records")
    page.el("msg-header").clear()
    page.driver.execute_script("document.getElementById('msg-to-ts').value = '2001-01-01T00:00:00'")
    page.el("msg-search").click()
    page.until(lambda: page.rows("message-table") == [] and "the oldest there is" in page.text("msg-status"),
               "a time range before every record still matched")
    page.driver.execute_script("document.getElementById('msg-to-ts').value = ''")

    # paging older and newer from the window's edges
    page.fill("msg-partition", "1")
    page.fill("msg-limit", "4")
    page.el("msg-load").click()
    offsets = lambda: [r[1] for r in page.rows("message-table")]  # noqa: E731
    page.until(lambda: offsets() == ["9", "8", "7", "6"], "the newest page of 4")
    assert page.el("msg-newer").get_attribute("disabled") is not None
    page.el("msg-older").click()
    page.until(lambda: offsets() == ["5", "4", "3", "2"], "the older page")
    page.el("msg-older").click()
    page.until(lambda: offsets() == ["1", "0"], "the oldest page")
    assert page.el("msg-older").get_attribute("disabled") is not None
    page.el("msg-newer").click()
    page.until(lambda: offsets() == ["5", "4", "3", "2"], "the newer page")
    page.screenshot("messages-search")
    page.fill("msg-limit", "50")
    page.el("msg-load").click()
    page.until(lambda: len(page.rows("message-table")) == PER_PARTITION, "partition 1 alone never showed again")

    page.fill("produce-key", "from-the-console")
    page.fill("produce-value", "hello from the browser")
    page.fill("produce-headers", "via=console")
    page.el("produce-submit").click()
    page.until(lambda: page.text("produce-result") == f"Produced to {TOPIC}-1 at offset {PER_PARTITION}",
               "the produce never answered")
    page.until(lambda: page.cells("message-table", 0)[3:6] == ["from-the-console", "hello from the browser",
                                                               "via=console"], "the produced message never showed")

    page.el("msg-tail").click()
    page.until(lambda: page.cells("message-table", 0)[3:4] == ["from-the-console"], "the tail did not start at the end")
    with kp_producer(console_broker.bootstrap, acks="all", linger_ms=0) as producer:
        producer.send(TOPIC, b"tailed", key=b"live", partition=1)
        producer.flush(timeout=20)
    page.until(lambda: page.cells("message-table", 0)[3:5] == ["live", "tailed"], "the live tail missed a message")
    page.screenshot("messages")


def test_a_search_stopped_by_a_cap_offers_continue(page: Page, console_broker: MetricsBrokerProcess) -> None:
    """More records than one search request may examine (200,000): a search for a value nobody has stops at a
    cap, says so and offers Continue, which goes on from where it stopped until the oldest record."""
    from confluent_kafka import Producer
    from kafka.admin import NewTopic

    hay = 230_000
    with kp_admin(console_broker.bootstrap) as admin:
        admin.create_topics([NewTopic("haystack", 1, 1)])
    producer = Producer({"bootstrap.servers": console_broker.bootstrap, "linger.ms": 100, "acks": "all",
                         "batch.num.messages": 10_000, "queue.buffering.max.messages": hay + 1000})
    for i in range(hay):
        producer.produce("haystack", value=b"hay", partition=0)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    page.open("messages?topic=haystack&partition=0")
    page.until(lambda: len(page.rows("message-table")) == 50, "the newest haystack page never showed")
    page.fill("msg-value", "needle")
    page.el("msg-search").click()
    page.until(lambda: page.el("msg-continue").is_displayed(), "no Continue after a capped search", timeout=60)
    assert "cap of one request" in page.text("msg-status") and page.rows("message-table") == []
    page.screenshot("messages-continue")
    for _ in range(10):
        if not page.el("msg-continue").is_displayed():
            break
        before = page.text("msg-status")
        page.el("msg-continue").click()
        page.until(lambda b=before: page.text("msg-status") != b, "Continue did not answer", timeout=60)
    page.until(lambda: "the oldest there is" in page.text("msg-status"), "Continue never reached the oldest record",
               timeout=60)
    assert not page.el("msg-continue").is_displayed()


def test_groups_lag_and_reset(page: Page, console_broker: MetricsBrokerProcess) -> None:
    lag = PARTITIONS * (PER_PARTITION - COMMITTED) + 2  # two more messages on partition 1 since
    with kp_consumer(console_broker.bootstrap, group_id="live", client_id="live-reader",
                     auto_offset_reset="earliest") as consumer:
        consumer.subscribe([TOPIC])
        for _ in range(100):
            consumer.poll(timeout_ms=200)
            if len(consumer.assignment()) == PARTITIONS:
                break
        page.open("groups")
        assert page.row("groups", GROUP) == [GROUP, "Empty", "0", str(PARTITIONS), str(lag), "classic"]
        assert page.row("groups", "live")[1:3] == ["Stable", "1"]  # type: ignore[index]
        page.screenshot("groups")
        page.open("group/live")
        member = page.rows("members")[0]
        assert member[1] == "live-reader" and member[3] == f"{TOPIC}-0, {TOPIC}-1, {TOPIC}-2"
        assert "only while the group is Empty (it is Stable)" in page.text("reset-unavailable")
        page.screenshot("group-live")
    page.open(f"group/{GROUP}")
    assert page.text("group-state") == "Empty" and page.text("group-lag") == str(lag)
    offsets = page.rows("offsets")
    assert [(r[1], r[2], r[3], r[4]) for r in offsets] == [
        ("0", "4", "10", "6"), ("1", "4", "12", "8"), ("2", "4", "10", "6")]
    assert len(page.driver.find_elements("css selector", "#offsets svg.spark")) == PARTITIONS
    page.select("reset-to", "latest")
    page.el("reset-submit").click()
    page.until(lambda: page.el("confirm").is_displayed(), "no reset plan shown")
    assert [r[1:] for r in page.rows("reset-plan")] == [["4", "10"], ["4", "12"], ["4", "10"]]
    page.screenshot("group-reset-plan")
    page.confirm()
    page.until(lambda: page.text("group-lag") == "0", "the lag did not drop to 0 after the reset")
    assert [r[4] for r in page.rows("offsets")] == ["0", "0", "0"]
    page.screenshot("group")


def test_a_consumer_protocol_group_page(page: Page, console_broker: MetricsBrokerProcess) -> None:
    """A KIP-848 group (librdkafka, group.protocol=consumer): Stable, its member and assignment, its epochs;
    DescribeGroups alone would call it Dead and the page would say it does not exist."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": console_broker.bootstrap, "group.id": "kip848-live",
                         "group.protocol": "consumer", "client.id": "kip848-reader", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([TOPIC])

        def assigned() -> bool:
            consumer.poll(0.2)  # heartbeats go out while the client is polled
            return len(consumer.assignment()) == PARTITIONS

        page.until(assigned, "the consumer-protocol member got no assignment")
        page.open("group/kip848-live")
        page.until(lambda: page.text("group-state") == "Stable", "the group page does not show a Stable group")
        assert page.text("group-protocol").startswith("consumer, epoch ")
        member = page.rows("members")[0]
        assert member[1] == "kip848-reader" and member[3] == f"{TOPIC}-0, {TOPIC}-1, {TOPIC}-2"
        assert int(member[4]) > 0  # the member's epoch
    finally:
        consumer.close()


def test_a_streams_group_page(page: Page, console_broker: MetricsBrokerProcess) -> None:
    """A streams group (KIP-1071; one member written with our codecs, as docs/streams-groups.md does):
    its state, epochs and topology epoch, and the member's process and tasks (StreamsGroupDescribe), where
    DescribeGroups would answer "not a classic group"."""
    from pybroker.clients.wire import Connection
    from pybroker.protocol.messages import streams_group_heartbeat as h

    host, port = console_broker.bootstrap.rsplit(":", 1)
    connection = Connection(host, int(port), timeout_s=30)
    topology = h.Topology(epoch=2, subtopologies=[h.Subtopology(
        subtopology_id="0", source_topics=[TOPIC], source_topic_regex=[], repartition_sink_topics=[],
        state_changelog_topics=[], repartition_source_topics=[], copartition_groups=[])])
    answer = connection.request(h.StreamsGroupHeartbeatRequest(
        group_id="streams-live", member_id="streams-member", member_epoch=0, endpoint_information_epoch=0,
        rebalance_timeout_ms=30_000, topology=topology, process_id="process-a", client_tags=[], active_tasks=[],
        standby_tasks=[], warmup_tasks=[]), 0)
    owned: list[Any] = []
    try:
        def assigned() -> bool:  # a heartbeat reports what the member owns, as Kafka Streams' does
            nonlocal answer, owned
            owned = answer.active_tasks if answer.active_tasks is not None else owned
            answer = connection.request(h.StreamsGroupHeartbeatRequest(
                group_id="streams-live", member_id="streams-member", member_epoch=answer.member_epoch,
                endpoint_information_epoch=0, active_tasks=owned, standby_tasks=[], warmup_tasks=[]), 0)
            return answer.error_code == 0 and sum(len(t.partitions) for t in owned) == PARTITIONS

        page.until(assigned, "the streams member got no tasks")
        page.open("group/streams-live")
        page.until(lambda: page.text("group-state") == "Stable", "the group page does not show a Stable streams group")
        assert re.fullmatch(r"streams \(sticky\), epoch \d+, topology epoch 2", page.text("group-protocol"))
        assert page.rows("subtopologies") == [["0", TOPIC, "", ""]]
        assert "does not reset a streams group's offsets" in page.text("reset-unavailable")
        member = page.rows("members")[0]
        assert member[:2] == ["streams-member", "process-a"] and member[4] == "0_0, 0_1, 0_2"
        assert member[5] == "" and member[6] == "" and member[8] == "2"  # no standby, no warm-up; topology epoch
        page.screenshot("group-streams")
    finally:
        connection.request(h.StreamsGroupHeartbeatRequest(group_id="streams-live", member_id="streams-member",
                                                          member_epoch=-1, endpoint_information_epoch=0), 0)
        connection.close()


def test_a_share_group_page(page: Page, console_broker: MetricsBrokerProcess) -> None:
    """A share group (KIP-932; librdkafka's ShareConsumer from the earliest offset) that accepted the odd
    offsets of what it was handed and holds the even ones: the group list names it a share group, and its
    page shows the epochs, the member's subscription and assignment, and per partition the start offset,
    the records in flight by state and Kafka's lag (DescribeShareGroupOffsets)."""
    from confluent_kafka import AcknowledgeType, ShareConsumer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    from tests.integration.clients import ck_admin

    group = "share-live"
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin = ck_admin(console_broker.bootstrap)  # kept: its handle must outlive the answer
    admin.incremental_alter_configs([resource])[resource].result(30)
    consumer = ShareConsumer({"bootstrap.servers": console_broker.bootstrap, "group.id": group,
                              "client.id": "share-reader", "share.acknowledgement.mode": "explicit"})
    handed: list[Any] = []
    try:
        consumer.subscribe([TOPIC])

        def polled() -> bool:
            handed.extend(m for m in consumer.poll(0.5) if m.error() is None)
            return bool(handed)  # one batch: explicit mode wants it acknowledged before another poll

        page.until(polled, "the share consumer was handed no records")
        accepted = [m for m in handed if m.offset() % 2]
        for m in accepted:
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        consumer.commit_sync(30)  # the even offsets stay acquired: no poll follows while the page is read
        page.open("groups")
        page.until(lambda: (page.row("groups", group) or [])[1:3] == ["Stable", "1"],
                   "the group list does not show a Stable share group with its member")
        assert page.row("groups", group)[-1] == "share"  # type: ignore[index]
        page.open(f"group/{group}")
        page.until(lambda: page.text("group-state") == "Stable", "the share group page does not show a Stable group")
        assert re.fullmatch(r"share \(simple\), epoch \d+, assignment epoch \d+", page.text("group-protocol"))
        member = page.rows("members")[0]
        assert member[1] == "share-reader" and member[3] == TOPIC
        assert member[4] == f"{TOPIC}-0, {TOPIC}-1, {TOPIC}-2" and int(member[5]) > 0
        rows = page.rows("share-partitions")
        assert [r[:2] for r in rows] == [[TOPIC, str(p)] for p in range(PARTITIONS)]
        columns = [[int(c.replace(",", "")) for c in r[2:]] for r in rows]  # start, avail, acq, ack, arch, lag
        assert sum(c[2] for c in columns) == len(handed) - len(accepted)
        assert sum(c[3] for c in columns) == len(accepted)
        assert all(c[4] == 0 for c in columns)
        ends = [PER_PARTITION, PER_PARTITION + 2, PER_PARTITION]  # partition 1 got two more records since
        assert [c[5] for c in columns] == [end - c[0] - c[3] for end, c in zip(ends, columns, strict=True)]
        assert int(page.text("group-lag").replace(",", "")) == sum(c[5] for c in columns)
        assert "does not reset a share group's start offsets" in page.text("reset-unavailable")
        page.screenshot("group-share")
    finally:
        consumer.close()


def test_broker_configs(page: Page) -> None:
    page.open("configs")
    assert page.row("broker-configs", "console.port")[2] == "STATIC_BROKER_CONFIG"  # type: ignore[index]
    assert page.row("broker-configs", "log.segment.bytes")[1:3] == ["1 GiB", "DEFAULT_CONFIG"]  # type: ignore[index]
    assert page.row("broker-configs", "log.retention.hours")[1] == "7 d"  # type: ignore[index]
    assert page.row("broker-configs", "log.flush.interval.messages")[1] == "unlimited"  # type: ignore[index]
    assert _config_cell(page, "broker-configs", "log.segment.bytes").get_attribute("title") == "raw value: 1073741824"
    assert _row_classes(page, "broker-configs", "console.port") == "override"
    assert page.row("broker-configs", "num.io.threads")[3] == "read-only"  # type: ignore[index]
    # the table fits its card at both widths (long list values wrap instead of widening it)
    try:
        for width in (1400, 2200):
            page.driver.set_window_size(width, 1000)
            page.until(lambda w=width: page.driver.execute_script("return window.innerWidth") >= w - 40,
                       f"window at {width}")
            fits = page.driver.execute_script(
                "const t = document.getElementById('broker-configs'), c = document.getElementById('broker-configs-section');"
                "return [t.scrollWidth, c.clientWidth, document.documentElement.scrollWidth, window.innerWidth];")
            assert fits[0] <= fits[1] and fits[2] <= fits[3], f"at {width} px: table, card, page, window = {fits}"
            page.screenshot(f"configs-{width}")
    finally:
        page.driver.set_window_size(1400, 1000)
    # a dynamic broker config edited in place, then back to its default
    _edit_config(page, "broker-configs", "log.retention.ms", "1209600000")
    page.until(lambda: (page.row("broker-configs", "log.retention.ms") or [""])[1:3] == ["14 d", "DYNAMIC_BROKER_CONFIG"],
               "the broker config was not altered")
    _row_button(page, "broker-configs", "log.retention.ms", "cfg-edit").click()
    _row_button(page, "broker-configs", "log.retention.ms", "cfg-reset").click()
    page.until(lambda: (page.row("broker-configs", "log.retention.ms") or ["", "", ""])[2] != "DYNAMIC_BROKER_CONFIG",
               "the broker override was not removed")
    page.fill("config-filter", "group.initial")
    page.until(lambda: [r[0] for r in page.rows("broker-configs")] == ["group.initial.rebalance.delay.ms"],
               "the filter did not narrow the table")
    assert page.rows("broker-configs")[0][1:3] == ["0 ms", "STATIC_BROKER_CONFIG"]
    page.screenshot("configs")


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory: pytest.TempPathFactory, broker_target: str) -> Iterator[MetricsBrokerProcess]:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own console")
    console_port = free_port()
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-pw" '
            'user_alice="alice-pw";')
    proc = MetricsBrokerProcess(tmp_path_factory.mktemp("console-secured") / "broker", {
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.plaintext.plain.sasl.jaas.config": jaas,
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin"}, extra_args=["--console-port", str(console_port)])
    proc.console_port = console_port  # type: ignore[attr-defined]
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


def test_an_iceberg_topic_page_shows_its_table(page: Page, console_broker: MetricsBrokerProcess) -> None:
    """A topic with iceberg.mode=key_value: its page shows the table the broker's worker keeps (docs/iceberg.md)."""
    from kafka.admin import NewTopic

    with kp_admin(console_broker.bootstrap) as admin:
        admin.create_topics([NewTopic("clickstream", 1, 1, topic_configs={
            "iceberg.mode": "key_value", "iceberg.commit.interval.ms": "200"})])
    with kp_producer(console_broker.bootstrap, acks="all", linger_ms=0) as producer:
        for i in range(4):
            producer.send("clickstream", f"click-{i}".encode(), partition=0)
        producer.flush(timeout=20)

    def shown() -> dict[str, str]:
        page.open("topic/clickstream")
        return {row[0]: row[1] for row in page.rows("iceberg-status") if len(row) > 1}

    status = page.until(lambda: (lambda s: s if s.get("Rows") == "4" else None)(shown()),
                        "the Iceberg table's 4 rows never shown", timeout=120)
    assert status["Table"] == "pybroker.clickstream" and status["Mode"] == "key_value"
    assert status["Error"] == "none" and status["Offsets behind the log"] == "0"


def test_login_and_acls_in_the_browser(browser: Any, secured_broker: MetricsBrokerProcess) -> None:
    """Basic credentials (sent by the browser as a logged-in user's would be) decide what each user sees.
    (Wrong credentials leave the browser at its own login prompt, which a test cannot read: the unit tests
    check that answer.)"""
    import base64

    page = Page(browser, f"http://127.0.0.1:{secured_broker.console_port}", ARTIFACTS)  # type: ignore[attr-defined]

    def log_in(user: str, password: str) -> None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        browser.execute_cdp_cmd("Network.enable", {})
        browser.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}})

    try:
        log_in("admin", "admin-pw")
        page.open("topics")
        page.until(lambda: page.text("who").startswith("User:admin"), "admin never logged in")
        page.fill("new-topic-name", "secret")
        page.el("create-topic-submit").click()
        page.confirm()
        page.until(lambda: page.row("topics", "secret"), "admin's topic never listed")
        log_in("alice", "alice-pw")
        page.open("topics")
        page.until(lambda: page.text("who").startswith("User:alice"), "alice never logged in")
        assert page.rows("topics") == [] and page.text("topic-count") == "0 topics"
        page.open("topic/secret")
        assert "TOPIC_AUTHORIZATION_FAILED" in page.text("page-error")
        page.screenshot("login-acl")
    finally:
        browser.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {}})


def test_screenshots_of_every_page_were_kept() -> None:
    kept = {p.stem for p in Path(ARTIFACTS).glob("*.png")}
    assert {"overview", "topics", "topic", "messages", "messages-search", "messages-continue", "groups", "group", "group-live", "configs",
            "configs-1400", "configs-2200", "login-acl"} <= kept
