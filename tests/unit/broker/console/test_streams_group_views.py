"""What a person sees of a streams group: `pybroker groups describe` (text, `--members`, `--json`) and the
console's group list and group page, read through StreamsGroupDescribe from an in-process broker where two
Kafka Streams processes (written with our codecs) share a stateful topology with one standby replica."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pybroker.broker.app import BrokerApp
from pybroker.broker.cli import cli
from pybroker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pybroker.protocol.messages.streams_group_heartbeat import (
    KeyValue,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
    Subtopology,
    TopicInfo,
    Topology,
)
from tests.unit.broker.conftest import RawClient
from tests.unit.broker.console.console_http import Http, start_broker

GROUP = "counter"
TOPOLOGY = Topology(epoch=3, subtopologies=[Subtopology(
    subtopology_id="0", source_topics=["words"], source_topic_regex=[], repartition_sink_topics=[],
    state_changelog_topics=[TopicInfo(name="counter-store-changelog", partitions=0, replication_factor=0,
                                      topic_configs=[KeyValue(key="cleanup.policy", value="compact")])],
    repartition_source_topics=[], copartition_groups=[])])


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    broker = await start_broker(tmp_path, **{"group.streams.num.standby.replicas": "1"})
    try:
        yield broker
    finally:
        await broker.stop()


def _join(member: str) -> StreamsGroupHeartbeatRequest:
    return StreamsGroupHeartbeatRequest(
        group_id=GROUP, member_id=member, member_epoch=0, endpoint_information_epoch=0, rebalance_timeout_ms=30_000,
        topology=TOPOLOGY, active_tasks=[], standby_tasks=[], warmup_tasks=[], process_id=f"process-{member}",
        client_tags=[KeyValue(key="zone", value=member)], task_offsets=[], task_end_offsets=[])


async def _settled(client: RawClient) -> None:
    """Both members heartbeat (reporting what they own) until each runs 2 active tasks and 2 standbys."""
    answers: dict[str, StreamsGroupHeartbeatResponse] = {m: await client.call(_join(m), 0) for m in ("m1", "m2")}
    owned: dict[str, tuple[list[Any], list[Any]]] = {m: ([], []) for m in answers}
    deadline = time.monotonic() + 60
    while True:
        for m, last in answers.items():
            if last.active_tasks is not None:
                owned[m] = (last.active_tasks, last.standby_tasks or [])
            answers[m] = await client.call(StreamsGroupHeartbeatRequest(
                group_id=GROUP, member_id=m, member_epoch=last.member_epoch, endpoint_information_epoch=0,
                active_tasks=owned[m][0], standby_tasks=owned[m][1], warmup_tasks=[],
                client_tags=None, task_offsets=None, task_end_offsets=None), 0)  # unchanged (the class's default is [])
        counts = [(sum(len(t.partitions) for t in a), sum(len(t.partitions) for t in s)) for a, s in owned.values()]
        if counts == [(2, 2), (2, 2)]:
            return
        assert time.monotonic() < deadline, (counts, answers)
        await asyncio.sleep(0.05)


async def test_the_cli_and_the_console_describe_a_streams_group(app: BrokerApp, http: Http) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
    client = RawClient(reader, writer)
    try:
        created = await client.call(CreateTopicsRequest(topics=[CreatableTopic(
            name="words", num_partitions=4, replication_factor=1)], timeout_ms=5000), 4)
        assert created.topics[0].error_code == 0
        await _settled(client)
        bootstrap = f"127.0.0.1:{app.bound_ports[0]}"

        def cli_run(*args: str) -> str:
            result = CliRunner().invoke(cli, ["groups", "describe", GROUP, *args, "--bootstrap-server", bootstrap])
            assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
            return result.stdout

        described = json.loads(await asyncio.to_thread(cli_run, "--json"))
        assert (described["group_type"], described["state"], described["topology_epoch"]) == ("streams", "Stable", 3)
        assert described["protocol"] == "sticky"  # StreamsGroupDescribe v1's assignor name
        assert described["group_epoch"] >= 1 and described["assignment_epoch"] == described["group_epoch"]
        members = described["members"]
        assert [m["process_id"] for m in members] == ["process-m1", "process-m2"]
        assert sorted(t for m in members for t in m["active_tasks"]) == ["0_0", "0_1", "0_2", "0_3"]
        for m in members:  # each standby is another process's active task
            assert len(m["standby_tasks"]) == 2 and not set(m["standby_tasks"]) & set(m["active_tasks"])
            assert m["warmup_tasks"] == [] and m["topology_epoch"] == 3 and m["partitions"] is None
            assert m["client_tags"] == {"zone": m["member_id"]}
        text = await asyncio.to_thread(cli_run)
        assert f"group {GROUP} (streams protocol, group epoch {described['group_epoch']}, topology epoch 3): " \
               "Stable, 2 member(s)" in text
        assert "process-m1" in text and "ACTIVE-TASKS" in text and "WARMUP-TASKS" in text
        rows = json.loads(await asyncio.to_thread(cli_run, "--members", "--verbose", "--json"))
        assert [(r["member_id"], r["active_tasks"]) for r in rows] == [(m["member_id"], m["active_tasks"])
                                                                       for m in members]
        state = json.loads(await asyncio.to_thread(cli_run, "--state", "--json"))
        assert (state[0]["state"], state[0]["members"], state[0]["assignment_strategy"]) == ("Stable", 2, "sticky")

        listed = await http.get("groups")
        assert [(r["group"], r["group_type"], r["state"], r["members"]) for r in listed] == \
            [(GROUP, "streams", "Stable", 2)]
        page = await http.get(f"group?id={GROUP}")
        assert (page["group_type"], page["topology_epoch"], page["group_epoch"], page["protocol"]) == \
            ("streams", 3, described["group_epoch"], "sticky")
        assert page["subtopologies"][0]["changelog_topics"] == ["counter-store-changelog"]
        assert [(m["process_id"], m["active_tasks"], m["standby_tasks"], m["warmup_tasks"]) for m in page["members"]] \
            == [(m["process_id"], m["active_tasks"], m["standby_tasks"], []) for m in members]
    finally:
        client.close()
