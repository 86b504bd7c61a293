"""Client telemetry (KIP-714): the OTLP decoder against hostile bytes, subscription configs, and the two
APIs through the real server (Kafka's rules for asking, pushing, throttling and limits), up to the
families a scrape serves."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.broker.telemetry import prometheus
from pybroker.broker.telemetry.subscriptions import SubscriptionError, Subscriptions, plan_for, validate
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import describe_configs as dc
from pybroker.protocol.messages import incremental_alter_configs as iac
from pybroker.protocol.messages import list_config_resources as lcr
from pybroker.protocol.messages.get_telemetry_subscriptions import GetTelemetrySubscriptionsRequest
from pybroker.protocol.messages.push_telemetry import PushTelemetryRequest
from pybroker.protocol.otlp_metrics import OtlpError, decode_metrics_data
from pybroker.protocol.records.codecs import compress
from tests.otlp_payloads import field, gauge, metrics_data, monotonic_sum, number_point, varint
from tests.unit.broker.conftest import RawClient

E = ErrorCode
SET, DELETE, APPEND = 0, 1, 2
QUEUE_TIME = "org.apache.kafka.producer.record.queue.time.avg"
SENT = "org.apache.kafka.producer.record.sent.total"


# -- the OTLP decoder -------------------------------------------------------------------------------------
def test_gauges_and_sums_decode_with_their_attributes() -> None:
    data = metrics_data(gauge(QUEUE_TIME, number_point(2.5, {"topic": "t", "partition": "0"})),
                        monotonic_sum(SENT, number_point(7), delta=True), resource={"client_id": "app"})
    decoded = decode_metrics_data(data)
    assert decoded.resource == {"client_id": "app"}
    assert [(p.name, p.attributes, p.value, p.kind, p.delta) for p in decoded.points] == [
        (QUEUE_TIME, (("topic", "t"), ("partition", "0")), 2.5, "gauge", False),
        (SENT, (), 7.0, "counter", True)]


@pytest.mark.parametrize("data", [
    b"\x0a",  # a length-delimited field with no length
    b"\x0a\x05\x01",  # a length past the end
    b"\x0a" + b"\xff" * 11,  # a varint that never ends
    b"\x0b\x00",  # wire type 3 (groups)
    field(1, field(2, field(2, field(1, b"m") + field(5, field(1, b"\x21\x00")))))  # a truncated double
])
def test_malformed_metrics_are_refused(data: bytes) -> None:
    with pytest.raises(OtlpError):
        decode_metrics_data(data)


def test_points_past_the_cap_are_refused_and_strings_are_cut() -> None:
    many = metrics_data(gauge("m", *[number_point(1.0) for _ in range(11)]))
    with pytest.raises(OtlpError):
        decode_metrics_data(many, max_points=10)
    long = decode_metrics_data(metrics_data(gauge("x" * 10_000, number_point(1.0, {"k": "v" * 10_000}))))
    assert len(long.points[0].name) == 256 and len(long.points[0].attributes[0][1]) == 256


def test_unknown_fields_are_skipped() -> None:
    extra = varint(15 << 3) + varint(99) + varint(14 << 3 | 5) + b"abcd" + varint(13 << 3 | 1) + b"12345678"
    data = metrics_data(gauge("m", number_point(3.0)) + extra)
    assert [p.value for p in decode_metrics_data(data).points] == [3.0]


# -- subscriptions -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("configs", [{"interval.ms": "50"}, {"interval.ms": "x"}, {"match": "client_id"},
                                     {"match": "nope=.*"}, {"match": "client_id=("}, {"other": "1"},
                                     {"match": "client_id=(a+)+$"}, {"match": "client_id=(x(a|b)*)*"},
                                     {"match": "client_id=a*b*c*"}, {"match": "client_id=a,client_id=b"}, {"match": "client_id=" + "a" * 300}])
def test_invalid_subscriptions_are_refused(configs: dict[str, str]) -> None:
    with pytest.raises(SubscriptionError):
        validate("sub", configs)


def test_reasonable_patterns_are_accepted() -> None:
    for pattern in ("client_id=billing-.*", "client_software_name=apache-kafka-java|confluent-kafka-python",
                    "client_source_address=10\\.0\\..*", "client_id=(ab|cd){2}x+"):
        validate("sub", {"match": pattern})


def test_a_plan_is_the_union_of_matching_subscriptions(tmp_path: Path) -> None:
    subs = Subscriptions(tmp_path / "client-metrics.json")
    subs.replace("a", {"metrics": "org.apache.kafka.producer.", "interval.ms": "5000"}, False)
    subs.replace("b", {"metrics": "org.apache.kafka.consumer.", "interval.ms": "1000",
                       "match": "client_id=billing-.*"}, False)
    plain = plan_for(subs.all(), {"client_id": "web"})
    billing = plan_for(subs.all(), {"client_id": "billing-1"})
    assert (plain.metrics, plain.interval_ms) == (("org.apache.kafka.producer.",), 5000)
    assert (billing.metrics, billing.interval_ms) == (
        ("org.apache.kafka.consumer.", "org.apache.kafka.producer."), 1000)
    assert plain.subscription_id != billing.subscription_id
    again = Subscriptions(tmp_path / "client-metrics.json")
    again.load()
    assert again.names() == ["a", "b"]
    subs.replace("star", {"metrics": "*"}, False)
    assert plan_for(subs.all(), {"client_id": "web"}).metrics == ("",)


# -- through the server ---------------------------------------------------------------------------------------
async def _subscribe(client: RawClient, name: str, *configs: tuple[str, int, str | None]) -> int:
    response = await client.call(iac.IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
        resource_type=16, resource_name=name, configs=[iac.AlterableConfig(name=n, config_operation=op, value=v)
                                                       for n, op, v in configs])]), 1)
    return int(response.responses[0].error_code)


async def _push(client: RawClient, instance: uuid.UUID, subscription: int, payload: bytes, *,
                compression: int = 0, terminating: bool = False) -> int:
    response = await client.call(PushTelemetryRequest(client_instance_id=instance, subscription_id=subscription,
                                                      terminating=terminating, compression_type=compression,
                                                      metrics=payload), 0)
    return int(response.error_code)


async def test_subscribe_ask_push_and_scrape(app: BrokerApp, client: RawClient) -> None:
    assert await _subscribe(client, "producers", ("metrics", SET, "org.apache.kafka.producer."),
                            ("interval.ms", SET, "1000")) == E.NONE
    assert await _subscribe(client, "producers", ("metrics", APPEND, "org.apache.kafka.consumer.")) == E.NONE
    listed = await client.call(lcr.ListConfigResourcesRequest(resource_types=[16]), 1)
    assert [r.resource_name for r in listed.config_resources] == ["producers"]
    described = await client.call(dc.DescribeConfigsRequest(resources=[dc.DescribeConfigsResource(
        resource_type=16, resource_name="producers", configuration_keys=None)]), 4)
    assert {c.name: c.value for c in described.results[0].configs} == {
        "metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer.", "interval.ms": "1000", "match": ""}

    got = await client.call(GetTelemetrySubscriptionsRequest(), 0)
    assert got.error_code == E.NONE and got.client_instance_id.int != 0
    assert got.requested_metrics == ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]
    assert (got.push_interval_ms, got.telemetry_max_bytes, got.delta_temporality) == (1000, 1_048_576, False)
    assert set(got.accepted_compression_types) == {1, 2, 3, 4}
    again = await client.call(GetTelemetrySubscriptionsRequest(client_instance_id=got.client_instance_id), 0)
    assert again.error_code == E.THROTTLING_QUOTA_EXCEEDED

    instance, sub = got.client_instance_id, got.subscription_id
    payload = metrics_data(gauge(QUEUE_TIME, number_point(2.5, {"topic": "t"})),
                           monotonic_sum(SENT, number_point(7)), gauge("not.subscribed", number_point(1.0)))
    assert await _push(client, instance, sub + 1, payload) == E.UNKNOWN_SUBSCRIPTION_ID
    assert await _push(client, instance, sub, compress(4, payload), compression=4) == E.NONE
    assert await _push(client, instance, sub, payload) == E.THROTTLING_QUOTA_EXCEEDED  # too soon
    assert await _push(client, uuid.UUID(int=0), sub, payload) == E.INVALID_REQUEST

    families = {f.name: f for f in prometheus.families(app.state.client_metrics, app.state.clock_ms())}
    gauge_family = families[prometheus.family_name(QUEUE_TIME)]
    [sample] = gauge_family.samples
    assert sample.value == 2.5 and sample.labels["topic"] == "t"
    assert sample.labels["client_instance_id"] == str(instance)
    assert families[prometheus.family_name(SENT)].type == "counter"
    assert prometheus.family_name("not.subscribed") not in families
    assert families["pybroker_client_telemetry_instances"].samples[0].value == 1

    # the last push, terminating, is accepted once
    assert await _push(client, instance, sub, b"", terminating=True) == E.NONE
    assert await _push(client, instance, sub, b"", terminating=True) == E.INVALID_REQUEST


async def test_pushes_that_are_too_large_unsupported_or_undecodable(app: BrokerApp, client: RawClient) -> None:
    assert await _subscribe(client, "all", ("metrics", SET, "*"), ("interval.ms", SET, "100")) == E.NONE
    got = await client.call(GetTelemetrySubscriptionsRequest(), 0)
    instance, sub = got.client_instance_id, got.subscription_id
    assert got.requested_metrics == [""]
    assert await _push(client, instance, sub, b"x" * (1_048_576 + 1)) == E.TELEMETRY_TOO_LARGE
    assert await _push(client, instance, sub, b"x", compression=9) == E.UNSUPPORTED_COMPRESSION_TYPE
    assert await _push(client, instance, sub, b"\x0a\x05\x01") == E.INVALID_RECORD
    app.state.client_metrics.instances[instance].last_push_ms = 0
    assert await _push(client, instance, sub, b"not gzip", compression=1) == E.INVALID_RECORD


async def test_changing_the_subscriptions_asks_clients_to_ask_again(client: RawClient) -> None:
    assert await _subscribe(client, "s", ("metrics", SET, "a."), ("interval.ms", SET, "100")) == E.NONE
    got = await client.call(GetTelemetrySubscriptionsRequest(), 0)
    assert await _subscribe(client, "s", ("metrics", SET, "b.")) == E.NONE
    payload = metrics_data(gauge("b.x", number_point(1.0)))
    assert await _push(client, got.client_instance_id, got.subscription_id, payload) == E.UNKNOWN_SUBSCRIPTION_ID
    fresh = await client.call(GetTelemetrySubscriptionsRequest(client_instance_id=got.client_instance_id), 0)
    assert fresh.error_code == E.NONE and fresh.requested_metrics == ["b."]
    assert fresh.client_instance_id == got.client_instance_id
    # deleting every config removes the subscription
    assert await _subscribe(client, "s", ("metrics", DELETE, None), ("interval.ms", DELETE, None)) == E.NONE
    listed = await client.call(lcr.ListConfigResourcesRequest(resource_types=[16]), 1)
    assert listed.config_resources == []


@pytest.mark.parametrize(("configs", "code"), [
    ((("interval.ms", SET, "5"),), E.INVALID_CONFIG),
    ((("match", SET, "client_id=("),), E.INVALID_CONFIG),
    ((("nope", SET, "1"),), E.INVALID_CONFIG),
    ((("interval.ms", APPEND, "5"),), E.INVALID_REQUEST),
    ((("metrics", SET, None),), E.INVALID_REQUEST),
])
async def test_refused_subscription_changes(client: RawClient, configs: tuple[tuple[str, int, str | None], ...],
                                            code: int) -> None:
    assert await _subscribe(client, "bad", *configs) == code
    listed = await client.call(lcr.ListConfigResourcesRequest(resource_types=[16]), 1)
    assert listed.config_resources == []


async def test_the_series_cap_drops_and_counts(app: BrokerApp, client: RawClient) -> None:
    from pybroker.broker.telemetry import clients

    assert await _subscribe(client, "all", ("metrics", SET, "*"), ("interval.ms", SET, "100")) == E.NONE
    got = await client.call(GetTelemetrySubscriptionsRequest(), 0)
    points = [number_point(1.0, {"i": str(i)}) for i in range(clients.MAX_SERIES_PER_INSTANCE + 5)]
    assert await _push(client, got.client_instance_id, got.subscription_id, metrics_data(gauge("m", *points))) == 0
    telemetry = app.state.client_metrics
    assert len(telemetry.instances[got.client_instance_id].series) == clients.MAX_SERIES_PER_INSTANCE
    assert telemetry.dropped_series == 5


async def test_instances_are_capped_and_forgotten_with_their_series(app: BrokerApp, client: RawClient,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from pybroker.broker.telemetry import clients

    monkeypatch.setattr(clients, "MAX_INSTANCES", 3)
    monkeypatch.setattr(clients, "MAX_SERIES", 4)
    assert await _subscribe(client, "all", ("metrics", SET, "*"), ("interval.ms", SET, "100")) == E.NONE
    telemetry = app.state.client_metrics
    ids = []
    for _ in range(5):
        got = await client.call(GetTelemetrySubscriptionsRequest(), 0)
        ids.append(got.client_instance_id)
        points = [number_point(1.0, {"i": str(i)}) for i in range(2)]
        assert await _push(client, got.client_instance_id, got.subscription_id,
                           metrics_data(gauge("m", *points))) == E.NONE
        assert telemetry.series_count == sum(len(i.series) for i in telemetry.instances.values()) <= 4
    assert list(telemetry.instances) == ids[2:]
    assert telemetry.dropped_series > 0
    telemetry.snapshot(app.state.clock_ms() + 10_000)  # three push intervals later: all forgotten
    assert not telemetry.instances and telemetry.series_count == 0


async def test_a_subscription_matches_the_software_named_in_api_versions(client: RawClient) -> None:
    from pybroker.protocol.messages.api_versions import ApiVersionsRequest

    assert await _subscribe(client, "java", ("metrics", SET, "java."), ("match", SET, "client_software_name=apache-.*"),
                            ("interval.ms", SET, "100")) == E.NONE
    assert await _subscribe(client, "py", ("metrics", SET, "py."),
                            ("match", SET, "client_software_name=py-app,client_software_version=1\\..*"),
                            ("interval.ms", SET, "100")) == E.NONE
    before = await client.call(GetTelemetrySubscriptionsRequest(), 0)
    assert before.requested_metrics == []
    await client.call(ApiVersionsRequest(client_software_name="py-app", client_software_version="1.2"), 3)
    after = await client.call(GetTelemetrySubscriptionsRequest(), 0)
    assert after.requested_metrics == ["py."]
