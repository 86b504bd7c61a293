"""The connection budget taken from the open-file limit, the room it keeps, and what happens at it: the
longest idle connection makes way, or the new one is refused; a descriptor error (EMFILE, injected here)
closes that one connection with a warning and a metric, never a traceback, and the broker backs off."""

from __future__ import annotations

import asyncio
import errno
import resource
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from pybroker.broker import connection as connection_module
from pybroker.broker import connection_guard, descriptor_budget
from pybroker.broker.app import BrokerApp
from pybroker.broker.descriptor_budget import DescriptorBudget, connection_budget
from pybroker.config.broker_config import BrokerConfig
from pybroker.protocol.messages.api_versions import ApiVersionsRequest
from tests.unit.broker.conftest import RawClient


def test_the_budget_keeps_headroom_and_room_for_partitions() -> None:
    # 20,000 descriptors: 1,250 of headroom, 5,000 kept for partitions, the rest for connections
    assert connection_budget(20_000, 15_000) == 13_750
    assert connection_budget(20_000, 15_000) >= 10_000
    # a small limit: at least 256 of headroom; the partitions' room is never more than their cap
    assert connection_budget(600, 344) == 600 - 256 - 150
    assert connection_budget(600, 10) == 600 - 256 - 10
    # partitions past the kept room take from the connections
    assert connection_budget(600, 344, partitions_held=300) == 600 - 256 - 300
    assert connection_budget(300, 44, partitions_held=100) == 0
    assert connection_budget(resource.RLIM_INFINITY, 10) == 2**31 - 1


def _count(family: str, reason: str) -> float:
    return REGISTRY.get_sample_value(family, {"reason": reason}) or 0.0


@asynccontextmanager
async def _broker(tmp_path: Path, connections: int) -> AsyncIterator[tuple[BrokerApp, list[RawClient]]]:
    """An in-process broker whose descriptor budget allows `connections` connections."""
    config = BrokerConfig.load({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0"})
    app = BrokerApp(config)
    await app.start()
    # 256 of headroom, `connections` for connections and none kept for partitions (a cap of 0)
    app.state.guard.descriptors = DescriptorBudget(256 + connections, 0, lambda: 0)
    assert app.state.guard.descriptors.connections == connections
    opened: list[RawClient] = []
    errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: errors.append(context))
    try:
        yield app, opened
    finally:
        for client in opened:
            client.close()
        await app.stop()
        asyncio.get_running_loop().set_exception_handler(None)
    assert errors == [], "a traceback reached the event loop"


async def _connect(app: BrokerApp, opened: list[RawClient]) -> RawClient:
    reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
    client = RawClient(reader, writer)
    opened.append(client)
    return client


async def _served(client: RawClient) -> bool:
    try:
        answer = await client.call(ApiVersionsRequest(), 0, timeout=5)
    except (ConnectionError, asyncio.IncompleteReadError):
        return False
    return bool(answer.error_code == 0)


async def test_at_the_budget_a_new_connection_is_refused_until_one_has_been_idle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection_guard, "EVICT_IDLE_S", 0.3)
    refused = _count("pybroker_connections_refused_total", "open_files")
    evicted = _count("pybroker_connections_expired_total", "open_files")
    async with _broker(tmp_path, 3) as (app, opened):
        held = [await _connect(app, opened) for _ in range(3)]
        for client in held:
            assert await _served(client)
        assert not await _served(await _connect(app, opened))  # none idle long enough: refused
        assert _count("pybroker_connections_refused_total", "open_files") == refused + 1
        await asyncio.sleep(0.4)
        newcomer = await _connect(app, opened)
        assert await _served(newcomer)  # the longest idle one made way
        assert _count("pybroker_connections_expired_total", "open_files") == evicted + 1
        assert not await _served(held[0])
        assert await _served(held[1]) and await _served(held[2])
        assert len(app.state.connections) == 3


async def test_emfile_while_setting_up_closes_that_connection_and_backs_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(descriptor_budget, "BACKOFF_S", 0.3)
    refused = _count("pybroker_connections_refused_total", "open_files")
    async with _broker(tmp_path, 10) as (app, opened):
        bystander = await _connect(app, opened)
        assert await _served(bystander)
        real_queue = connection_module.SendQueue

        def out_of_descriptors(*_args: Any, **_kwargs: Any) -> Any:
            raise OSError(errno.EMFILE, "Too many open files")

        monkeypatch.setattr(connection_module, "SendQueue", out_of_descriptors)
        assert not await _served(await _connect(app, opened))
        monkeypatch.setattr(connection_module, "SendQueue", real_queue)
        assert not await _served(await _connect(app, opened))  # backing off: refused without setting up
        assert _count("pybroker_connections_refused_total", "open_files") == refused + 2
        assert await _served(bystander)  # the connections already open go on
        await asyncio.sleep(0.35)
        assert await _served(await _connect(app, opened))
        assert len(app.state.connections) == 2


class _Conn:
    """A connection as the ranking sees it: when it last did something, and how often it was asked."""

    def __init__(self, name: str, last_active: float) -> None:
        self.peer = name
        self.last_active = last_active
        self.asked = 0

    def silent_for(self, now: float) -> float | None:
        self.asked += 1
        return now - self.last_active

    def evict(self) -> None:
        pass


def test_evictions_at_the_budget_cost_one_scan_not_one_per_new_connection() -> None:
    """Issue 28 at 13,750 connections: a scan per new connection cost 13 ms of the loop each."""
    idle = connection_guard.EVICT_IDLE_S
    conns = [_Conn(f"c{i}", last_active=-idle - i) for i in range(2000)]  # c1999 silent the longest
    ranking = connection_guard.IdleRanking()
    taken = []
    for _ in range(500):
        found = ranking.take(conns, 0.0)
        assert found is not None
        taken.append(found[0].peer)
    assert taken == [f"c{i}" for i in range(1999, 1499, -1)]  # longest silent first
    assert sum(conn.asked for conn in conns) <= 2000 + 500  # one scan, then one check per eviction
    conns[1499].last_active = 0.0  # the next in line did something since the scan: skipped
    found = ranking.take(conns, 0.0)
    assert found is not None and found[0].peer == "c1498"


def test_with_none_idle_refusals_do_not_rescan_before_one_can_qualify() -> None:
    idle = connection_guard.EVICT_IDLE_S
    conns = [_Conn(f"c{i}", last_active=0.0) for i in range(1000)]
    conns[7].last_active = -idle + 0.2  # qualifies at now = 0.2
    ranking = connection_guard.IdleRanking()
    assert ranking.take(conns, 0.0) is None
    scanned = sum(conn.asked for conn in conns)
    for step in range(100):  # a flood of refusals: no look at the connections
        assert ranking.take(conns, step * 0.001) is None
    assert sum(conn.asked for conn in conns) == scanned
    found = ranking.take(conns, 0.25)  # past the moment it qualified: looked at again, and taken
    assert found is not None and found[0].peer == "c7"
