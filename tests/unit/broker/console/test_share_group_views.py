"""The console's share group views (KIP-932) as the console user sees them, through the real HTTP server of
an in-process broker with an authorizer: the group list and the group page need DESCRIBE on the GROUP (as
the other group pages), and a share-partition's figures (start offset, lag, in-flight counts) also need
DESCRIBE on its TOPIC. The browser test (`tests/integration/test_console_browser.py`) drives a real share
consumer; here the share-partition is set up in the broker's own state."""

from __future__ import annotations

from pybroker.broker.app import BrokerApp
from pybroker.broker.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.unit.broker.console.console_http import Http

GROUP, TOPIC = "queue", "jobs"


def _allow(app: BrokerApp, kind: ResourceType, name: str) -> None:
    authorizer = app.state.authorizer
    assert authorizer is not None
    authorizer.create([AclBinding(kind, name, PatternType.LITERAL, "User:alice", "*", AclOperation.DESCRIBE,
                                  AclPermissionType.ALLOW)])


async def test_a_share_group_is_shown_to_who_may_describe_it(secured: BrokerApp) -> None:
    assert secured.console_bound_port is not None
    admin = Http(secured.console_bound_port)
    admin.auth = "admin:admin-pw"
    await admin.login()
    await admin.post("topics/create", {"name": TOPIC, "partitions": 1})
    for i in range(5):
        await admin.post("produce", {"topic": TOPIC, "partition": 0, "value": f"job-{i}"})
    shares = secured.state.shares
    shares.groups.ensure(GROUP)
    info = secured.state.logs.topics()[TOPIC]
    share = shares.share_partition((GROUP, info.topic_id, 0), 0, 0)
    share.reset(0)
    share.acquire("m", 5, 5, secured.state.clock_ms())  # offsets 0-4 acquired
    assert share.acknowledge("m", 1, 1, [1], secured.state.clock_ms()) == 0  # accept 1
    assert share.acknowledge("m", 2, 2, [3], secured.state.clock_ms()) == 0  # reject 2
    assert share.acknowledge("m", 3, 3, [2], secured.state.clock_ms()) == 0  # release 3

    listed = await admin.get("groups")
    assert [(r["group"], r["group_type"], r["state"], r["members"], r["partitions"], r["lag"]) for r in listed] == \
        [(GROUP, "share", "Empty", 0, 1, 3)]
    page = await admin.get(f"group?id={GROUP}")
    assert (page["group_type"], page["protocol"], page["members"], page["offsets"]) == ("share", "simple", [], [])
    assert page["share_partitions"] == [{"topic": TOPIC, "partition": 0, "error": None, "start_offset": 0, "lag": 3,
                                         "available": 1, "acquired": 2, "acknowledged": 1, "archived": 1}]

    alice = Http(secured.console_bound_port)
    alice.auth = "alice:alice-secret"
    await alice.login()
    assert await alice.get("groups") == []
    status, answer = await alice.request("GET", f"/console/api/group?id={GROUP}")
    assert status == 403 and "GROUP_AUTHORIZATION_FAILED" in answer["error"]
    _allow(secured, ResourceType.GROUP, GROUP)  # the group, not its topic: rows without figures
    assert [r["group"] for r in await alice.get("groups")] == [GROUP]
    page = await alice.get(f"group?id={GROUP}")
    assert page["share_partitions"] == [{"topic": TOPIC, "partition": 0, "error": "TOPIC_AUTHORIZATION_FAILED"}]
    _allow(secured, ResourceType.TOPIC, TOPIC)
    page = await alice.get(f"group?id={GROUP}")
    assert page["share_partitions"][0]["acquired"] == 2
