"""The console's admin pages' API: security (ACLs, SCRAM users, quotas), transactions, KIP-848 groups and
the broker page. `routes` merges these tables into its own, so every path here passes the same checks
first (peer, Host, login, the CSRF guard for a POST, parameter caps, the in-flight limit).

Each handler runs on the event loop and says, in the module it calls, which ACL it needs:

| path | answers | authorizes (see the module) |
| --- | --- | --- |
| `api/acls` | `enabled`, `acls` | DESCRIBE on the CLUSTER (`security_reads`) |
| `api/users` | SCRAM users: mechanisms and iterations | DESCRIBE on the CLUSTER |
| `api/quotas` | quota entities and their values | DESCRIBE_CONFIGS on the CLUSTER |
| `api/transactions` | transactional ids: state, producer, age, partitions | DESCRIBE on each TRANSACTIONAL_ID (`transactions`) |
| `api/transactions/hanging?topic=&older_than_ms=` | open transactions no coordinator will finish | READ on the TOPICs searched |
| `api/consumer-groups` | KIP-848 groups: state, epochs, assignor | DESCRIBE on each GROUP (`consumer_groups`) |
| `api/consumer-group?id=` | members: epochs, subscriptions, assignments, targets | DESCRIBE on the GROUP |
| `api/schemas` | the schema registry's subjects: versions, ids, types, compatibility, mode | DESCRIBE on each subject's TOPIC (`schemas`) |
| `api/schema?subject=&version=` | one version's schema text and what references it | DESCRIBE on the subject's TOPIC |
| `api/broker` | version, uptime, ids, features; listeners, security and log dirs for cluster describers | see `broker_info` |
| POST `api/acls/create`, `api/acls/delete` | the binding | ALTER on the CLUSTER (`security_writes`) |
| POST `api/users/upsert`, `api/users/delete` | the user and mechanism (never the password) | ALTER on the CLUSTER |
| POST `api/quotas/alter` | the entity, key and value (null: removed) | ALTER_CONFIGS on the CLUSTER |
| POST `api/transactions/abort` | the aborted producer | READ on the TOPIC, CLUSTER_ACTION on the CLUSTER (`transactions`) |
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pybroker.broker.console import (
    broker_info,
    consumer_groups,
    schemas,
    security_reads,
    security_writes,
    transactions,
)
from pybroker.broker.console import params as p

if TYPE_CHECKING:
    from pybroker.broker.console.local_client import LocalClient
    from pybroker.broker.console.routes import Call

Handler = Callable[["Call"], Awaitable[Any]]


async def _acls(call: Call) -> Any:
    return await security_reads.acls(call.client)


async def _users(call: Call) -> Any:
    return await security_reads.users(call.client)


async def _quotas(call: Call) -> Any:
    return await security_reads.quotas(call.client)


async def _transactions(call: Call) -> Any:
    return await transactions.transactions(call.client, call.app.state.clock_ms())


async def _hanging(call: Call) -> Any:
    return await transactions.hanging(call.client, call.params, call.app.state.clock_ms())


async def _consumer_groups(call: Call) -> Any:
    return await consumer_groups.groups(call.client)


async def _consumer_group(call: Call) -> Any:
    return await consumer_groups.group(call.client, p.text(call.params, "id", max_len=p.MAX_NAME))


async def _schemas(call: Call) -> Any:
    return await schemas.subjects(call.client)


async def _schema(call: Call) -> Any:
    return await schemas.schema(call.client, p.text(call.params, "subject", max_len=p.MAX_NAME),
                                p.integer(call.params, "version", 1, 2**31 - 1))


async def _broker(call: Call) -> Any:
    return await broker_info.broker(call.app.state, call.client, call.app.started_ms, call.app.auth.required)


def _on_params(action: Callable[[LocalClient, dict[str, Any]], Awaitable[Any]]) -> Handler:
    """The handler of a change that needs only the principal's client and the request's parameters."""
    async def handler(call: Call) -> Any:
        return await action(call.client, call.params)
    return handler


GET_ROUTES: dict[str, Handler] = {
    "/api/acls": _acls, "/api/users": _users, "/api/quotas": _quotas, "/api/transactions": _transactions,
    "/api/transactions/hanging": _hanging, "/api/consumer-groups": _consumer_groups,
    "/api/consumer-group": _consumer_group, "/api/broker": _broker, "/api/schemas": _schemas,
    "/api/schema": _schema,
}
POST_ROUTES: dict[str, Handler] = {
    "/api/acls/create": _on_params(security_writes.create_acl),
    "/api/acls/delete": _on_params(security_writes.delete_acl),
    "/api/users/upsert": _on_params(security_writes.upsert_user),
    "/api/users/delete": _on_params(security_writes.delete_user),
    "/api/quotas/alter": _on_params(security_writes.alter_quota),
    "/api/transactions/abort": _on_params(transactions.abort),
}
