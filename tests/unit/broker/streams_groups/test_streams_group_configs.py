"""A streams group's own settings (group_configs.py): Kafka 4.4's checks and messages, the file they live in,
what the coordinator uses (the group's heartbeat interval, session timeout, standby count and initial
rebalance delay, with Kafka's epoch counting at a first join), and the GROUP
resource of IncrementalAlterConfigs/DescribeConfigs routing streams keys and share keys to their stores."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.broker.app import BrokerApp
from pybroker.broker.groups.config import GroupConfig
from pybroker.broker.streams_groups.assignor import Target
from pybroker.broker.streams_groups.group import StreamsGroupState
from pybroker.broker.streams_groups.group_configs import DELETE, FILE_NAME, SET, StreamsGroupConfigs
from pybroker.broker.streams_groups.topology import StatusCode, Subtopology, TopicInfo, Topology
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from pybroker.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from tests.unit.broker.handlers.test_share_handlers import _client, _started
from tests.unit.broker.streams_groups.test_streams_groups import Kit

CONFIG = GroupConfig()
SESSION, HEARTBEAT = "streams.session.timeout.ms", "streams.heartbeat.interval.ms"
STANDBY, DELAY = "streams.num.standby.replicas", "streams.initial.rebalance.delay.ms"
TAGS = "streams.rack.aware.assignment.tags"


@pytest.mark.parametrize(("key", "value", "message"), [
    (SESSION, "30000", "streams.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    (SESSION, "0", "Invalid value 0 for configuration streams.session.timeout.ms: Value must be at least 1"),
    (HEARTBEAT, "20000", "streams.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
    (STANDBY, "3", "streams.num.standby.replicas must be less than or equal to 2"),
    (STANDBY, "-1", "Invalid value -1 for configuration streams.num.standby.replicas: Value must be at least 0"),
    (DELAY, "soon", "Invalid value soon for configuration streams.initial.rebalance.delay.ms: Not a number of "
                    "type INT"),
    (DELAY, "99999999999", "Invalid value 99999999999 for configuration streams.initial.rebalance.delay.ms: Not a "
                           "number of type INT"),
    ("streams.num.warmup.replicas", "1", "Group config streams.num.warmup.replicas is not served by this broker."),
])
def test_a_refused_value_says_why_as_kafka_does_and_changes_nothing(key: str, value: str, message: str) -> None:
    configs = StreamsGroupConfigs(None)
    assert configs.alter("g", [(key, SET, value)], False, CONFIG) == (ErrorCode.INVALID_CONFIG, message)
    assert configs.configs == {}


def test_the_session_must_outlast_the_heartbeat_with_the_bounds_the_broker_allows() -> None:
    wide = GroupConfig(streams_min_session_timeout_ms=1000, streams_min_heartbeat_interval_ms=1000)
    configs = StreamsGroupConfigs(None)
    assert configs.alter("g", [(SESSION, SET, "5000")], False, wide) == (
        ErrorCode.INVALID_CONFIG, "streams.session.timeout.ms must be greater than streams.heartbeat.interval.ms")
    assert configs.alter("g", [(HEARTBEAT, SET, "2000"), (SESSION, SET, "5000")], False, wide) == (ErrorCode.NONE, None)
    # the check is on the group's overrides after the change, the broker's value standing in for one not set
    assert configs.alter("g", [(HEARTBEAT, DELETE, None)], False, wide)[0] is ErrorCode.INVALID_CONFIG
    assert configs.effective("g", HEARTBEAT, wide) == 2000


def test_set_described_deleted_and_kept_in_a_file(tmp_path: Path) -> None:
    configs = StreamsGroupConfigs(tmp_path / FILE_NAME)
    assert configs.described("g", CONFIG) == [(DELAY, "3000", True), (HEARTBEAT, "5000", True),
                                              (SESSION, "45000", True), (STANDBY, "0", True), (TAGS, "", True)]
    assert configs.alter("g", [(SESSION, SET, " 50000"), (STANDBY, SET, "1")], False, CONFIG) == (ErrorCode.NONE, None)
    assert configs.alter("g", [(DELAY, SET, "0")], True, CONFIG) == (ErrorCode.NONE, None)  # validate only
    reopened = StreamsGroupConfigs(tmp_path / FILE_NAME)
    assert reopened.configs == {"g": {SESSION: "50000", STANDBY: "1"}}
    assert reopened.effective("g", SESSION, CONFIG) == 50000 and reopened.effective("other", SESSION, CONFIG) == 45000
    assert reopened.alter("g", [(SESSION, DELETE, None), (STANDBY, DELETE, None)], False, CONFIG)[0] is ErrorCode.NONE
    assert StreamsGroupConfigs(tmp_path / FILE_NAME).configs == {}


def test_a_value_the_broker_bounds_later_exclude_is_capped_where_it_is_used() -> None:
    configs = StreamsGroupConfigs(None)
    configs.alter("g", [(SESSION, SET, "60000"), (STANDBY, SET, "2")], False, CONFIG)
    narrower = GroupConfig(streams_max_session_timeout_ms=50000, streams_max_standby_replicas=1)
    assert configs.effective("g", SESSION, narrower) == 50000 and configs.effective("g", STANDBY, narrower) == 1


@pytest.mark.parametrize("text", ["{not json", '{"groups": {"g": {"streams.session.timeout.ms": "x"}}}', "[]"])
def test_an_unreadable_file_leaves_every_group_on_the_broker_settings(tmp_path: Path, text: str) -> None:
    (tmp_path / FILE_NAME).write_text(text)
    configs = StreamsGroupConfigs(tmp_path / FILE_NAME)
    assert configs.configs == {} and configs.effective("g", SESSION, CONFIG) == 45000


def _set(kit: Kit, group: str, **values: str) -> None:
    changes = [(key.replace("_", "."), SET, value) for key, value in values.items()]
    assert kit.co.streams.group_configs.alter(group, changes, False, kit.co.config) == (ErrorCode.NONE, None)


def test_the_coordinator_uses_the_groups_heartbeat_interval_and_session_timeout() -> None:
    kit = Kit({"in": 1, "app-rep": 1, "app-store-changelog": 1})
    _set(kit, "app", **{"streams_heartbeat_interval_ms": "7000", "streams_session_timeout_ms": "50000",
                        "streams_initial_rebalance_delay_ms": "0"})
    answer = kit.beat("m1", 0)
    assert answer.heartbeat_interval_ms == 7000
    assert kit.beat("other", 0, group="plain").heartbeat_interval_ms == 5000  # the broker's, for another group
    kit.co.tick(46_000)  # past the broker's 45 s, within the group's 50 s
    assert "m1" in kit.data().members and "other" not in kit.data("plain").members
    kit.co.tick(50_000)
    assert "m1" not in kit.data().members


def test_the_groups_standby_count_places_standbys() -> None:
    stateful = Topology(0, (Subtopology("0", source_topics=("in",), state_changelog_topics=(
        TopicInfo("app-store-changelog"),)),))
    kit = Kit({"in": 1, "app-store-changelog": 1})
    _set(kit, "app", streams_num_standby_replicas="1", streams_initial_rebalance_delay_ms="0")
    a = kit.beat("m1", 0, topology=stateful)
    b = kit.beat("m2", 0, topology=stateful)
    kit.beat("m1", a.member_epoch, owned=Target())
    kit.beat("m2", b.member_epoch, owned=Target())
    targets = kit.data().targets
    assert sorted(len(t.standby.get("0", ())) for t in targets.values()) == [0, 1]


async def test_the_group_resource_routes_streams_keys_and_share_keys_all_or_none(tmp_path: Path) -> None:
    broker: BrokerApp = await _started(tmp_path / "data")
    try:
        client = await _client(broker)

        async def alter(*changes: tuple[str, str]) -> tuple[int, str | None]:
            answer = await client.call(IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
                resource_type=32, resource_name="app", configs=[
                    AlterableConfig(name=k, config_operation=SET, value=v) for k, v in changes])]), 1)
            return answer.responses[0].error_code, answer.responses[0].error_message

        assert await alter((SESSION, "50000"), ("share.isolation.level", "read_committed")) == (0, None)
        # one bad key of either kind: neither store changes
        assert (await alter((SESSION, "55000"), ("share.isolation.level", "sometimes")))[0] == ErrorCode.INVALID_CONFIG
        assert (await alter((STANDBY, "9"), ("share.isolation.level", "read_uncommitted")))[0] \
            == ErrorCode.INVALID_CONFIG
        described = await client.call(DescribeConfigsRequest(resources=[DescribeConfigsResource(
            resource_type=32, resource_name="app", configuration_keys=None)]), 4)
        values = {c.name: (c.value, c.config_source, c.config_type) for c in described.results[0].configs}
        assert values[SESSION] == ("50000", 8, 3) and values[STANDBY] == ("0", 5, 3)
        assert values["share.isolation.level"][:2] == ("read_committed", 8)
        client.close()
    finally:
        await broker.stop()
    # the group's settings outlive a restart
    again: BrokerApp = await _started(tmp_path / "data")
    try:
        assert again.state.groups.coordinator.streams.setting("app", SESSION) == 50000
    finally:
        await again.stop()


def test_a_first_join_waits_for_the_initial_rebalance_delay_then_the_next_heartbeat_assigns() -> None:
    stateless = Topology(0, (Subtopology("0", source_topics=("in",)),))
    kit = Kit({"in": 2}, streams_initial_rebalance_delay_ms=3000)
    first = kit.beat("m1", 0, 1000, topology=stateless)
    # answered at the first of two epochs, with nothing assigned yet and the delay said (Kafka 4.4's answer)
    assert (first.member_epoch, first.assignment) == (1, Target())
    assert [(s.code, s.detail) for s in first.statuses] == [
        (StatusCode.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay.")]
    assert (kit.data().group_epoch, kit.data().assignment_epoch) == (2, 1)
    assert kit.data().state is StreamsGroupState.ASSIGNING
    second = kit.beat("m2", 0, 2000, topology=stateless)  # within the delay: no target yet
    assert second.member_epoch == 1 and second.assignment == Target()
    assert kit.data().group_epoch == 3 and [s.code for s in second.statuses] == [StatusCode.ASSIGNMENT_DELAYED]
    after = kit.beat("m1", first.member_epoch, 4000)
    assert after.member_epoch == 3 and not after.statuses
    assert sum(len(t.active.get("0", ())) for t in kit.data().targets.values()) == 2


def test_a_group_that_emptied_counts_one_epoch_at_its_next_join_without_a_delay() -> None:
    kit = Kit({"in": 1, "app-rep": 1, "app-store-changelog": 1})
    assert kit.beat("m1", 0).member_epoch == 2  # a new group: two, as Kafka 4.4 counts them
    kit.beat("m1", -1, 10)
    epoch = kit.data().group_epoch
    assert kit.beat("m2", 0, 20).member_epoch == epoch + 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from([SESSION, HEARTBEAT, STANDBY, DELAY, "streams.x", "share.y", ""]),
                          st.integers(-1, 4), st.one_of(st.none(), st.text(max_size=12),
                                                        st.integers(-2**40, 2**40).map(str))), max_size=6),
       st.text(max_size=8))
def test_any_change_is_answered_and_only_valid_values_are_kept(changes: list[tuple[str, int, str | None]],
                                                               group: str) -> None:
    configs = StreamsGroupConfigs(None)
    code, message = configs.alter(group, changes, False, CONFIG)
    assert isinstance(code, ErrorCode) and (code is ErrorCode.NONE) == (message is None)
    for overrides in configs.configs.values():
        for key, text in overrides.items():
            value = configs.effective(group, key, CONFIG)
            assert str(value) == text  # kept values are in Kafka's bounds, so nothing is capped


def test_rack_aware_tags_are_a_list_without_duplicates_kept_as_kafka_writes_it() -> None:
    configs = StreamsGroupConfigs(None)
    code, message = configs.alter("g", [(TAGS, SET, "zone, zone")], False, CONFIG)
    assert code is ErrorCode.INVALID_CONFIG and message is not None and "must not be duplicated" in message
    assert configs.alter("g", [(TAGS, SET, " zone , rack ")], False, CONFIG) == (ErrorCode.NONE, None)
    assert configs.described("g", CONFIG)[-1] == (TAGS, "zone,rack", False)
    assert configs.tags("g", CONFIG) == ("zone", "rack")
    assert configs.tags("other", GroupConfig(streams_rack_aware_assignment_tags=("az",))) == ("az",)
    assert configs.alter("g", [(TAGS, SET, "x" * 5000)], False, CONFIG)[0] is ErrorCode.INVALID_CONFIG


def test_a_v1_member_without_the_groups_tags_is_told_missing_client_tags_and_a_v0_member_is_not() -> None:
    kit = Kit({"in": 1, "app-rep": 1, "app-store-changelog": 1}, streams_rack_aware_assignment_tags=("zone", "rack"))
    lacking = kit.beat("m1", 0, client_tags={"zone": "a"}, version=1)
    assert [(s.code, s.detail) for s in lacking.statuses][-1] == (
        StatusCode.MISSING_CLIENT_TAGS, "Missing required client tags for rack-aware standby assignment: [rack]. "
        "Configure them via 'client.tag.<tagKey>' in your Streams config.")
    assert StatusCode.MISSING_CLIENT_TAGS not in [s.code for s in kit.beat("m2", 0, client_tags={}).statuses]
    full = kit.beat("m3", 0, client_tags={"zone": "b", "rack": "r"}, version=1)
    assert StatusCode.MISSING_CLIENT_TAGS not in [s.code for s in full.statuses]
    _set(kit, "app", streams_rack_aware_assignment_tags="")  # the group's own (empty) list wins over the broker's
    assert StatusCode.MISSING_CLIENT_TAGS not in [s.code for s in kit.beat("m1", lacking.member_epoch,
                                                                            version=1).statuses]
