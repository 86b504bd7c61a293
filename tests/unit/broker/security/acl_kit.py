"""What the ACL tests share: the principals and names they use, a client that speaks as a principal, and
ACL shorthands. The `secured` broker fixture is in this folder's conftest."""

from __future__ import annotations

import asyncio
import time

from pybroker.broker.app import BrokerApp
from pybroker.broker.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pybroker.protocol.records.record import Record, build_batch
from tests.unit.broker.conftest import RawClient

Op, RT, PT, Perm = AclOperation, ResourceType, PatternType, AclPermissionType
ALICE, ADMIN = "User:alice", "User:admin"
TOPIC, GROUP, TXN = "orders", "grp-orders", "tx-orders"



async def connect_as(app: BrokerApp, principal: str) -> RawClient:
    """A client whose server-side connection speaks as `principal` (what TLS or SASL would set)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
    ip, port = writer.get_extra_info("sockname")[:2]
    for _ in range(500):
        for conn in app.state.connections:
            if conn.peer == f"{ip}:{port}":
                conn.principal = principal
                return RawClient(reader, writer)
        await asyncio.sleep(0.01)
    raise AssertionError("the server never saw the connection")


def grant(app: BrokerApp, *bindings: AclBinding) -> None:
    authorizer = app.state.authorizer
    assert authorizer is not None
    authorizer._commit(set(bindings))


def acl(rtype: ResourceType, name: str, op: AclOperation, perm: AclPermissionType = Perm.ALLOW,
        pattern: PatternType = PT.LITERAL, principal: str = ALICE) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def one_record() -> bytes:
    return build_batch([Record(0, 0, b"k", b"v")], base_timestamp=int(time.time() * 1000))
