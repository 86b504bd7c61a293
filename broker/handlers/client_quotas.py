"""DescribeClientQuotas (key 48) 0-1 and AlterClientQuotas (key 49) 0-1: client quotas at runtime.

Authorizes as Kafka: Describe needs DESCRIBE_CONFIGS on the CLUSTER, Alter ALTER_CONFIGS on the CLUSTER
(the rules it registers with, from `broker/security/authorization_cluster.py`); without an authorizer
anyone may use them.

Describe answers the configured entities that pass the filter (each component: an exact name, the
default, or any specified name; `strict` leaves out entities with other types); a bad filter is
INVALID_REQUEST for the whole request. Alter checks each entry as Kafka does (entity types and
combinations, keys the entity takes, positive values, whole numbers for byte rates): an entry with an
error has none of its operations applied; `remove` drops a key; `validate_only` applies nothing. The
changes are written once per request, off the loop, and answered once durable.
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_check import Op
from pybroker.broker.security.authorization_cluster import (
    alter_client_quotas_refusal,
    cluster_only,
    top_level_refusal,
)
from pybroker.broker.security.quota_entities import (
    MAX_ENTITIES,
    Entity,
    QuotaError,
    check_filter,
    check_key,
    check_value,
    entity_of,
    matches,
)
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)
from pybroker.protocol.messages.alter_client_quotas import AlterClientQuotasResponseEntityData as AlterEntity
from pybroker.protocol.messages.alter_client_quotas import AlterClientQuotasResponseEntryData as AlterEntry
from pybroker.protocol.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    EntityData,
    EntryData,
    ValueData,
)


@handler(ApiKey.DESCRIBE_CLIENT_QUOTAS, versions=(0, 1),
         authorize=cluster_only(Op.DESCRIBE_CONFIGS, top_level_refusal(ApiKey.DESCRIBE_CLIENT_QUOTAS)))
def handle_describe(ctx: RequestContext, request: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    try:
        components = check_filter((c.entity_type, c.match_type, c.match) for c in request.components)
    except QuotaError as exc:
        return DescribeClientQuotasResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc), entries=None)
    entries = [
        EntryData(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
                  values=[ValueData(key=k, value=v) for k, v in sorted(values.items())])
        for entity, values in ctx.state.quotas.quotas.items()
        if values and matches(entity, components, request.strict)
    ]
    return DescribeClientQuotasResponse(entries=entries)


def _changes(entry: Any) -> tuple[Entity, dict[str, float | None]]:
    """The entity and its key -> new value (None: remove), or QuotaError."""
    entity = entity_of((e.entity_type, e.entity_name) for e in entry.entity)
    changes: dict[str, float | None] = {}
    for op in entry.ops:
        if op.key in changes:
            raise QuotaError(f"Duplicate quota key {op.key} in one entity")
        if op.remove:
            check_key(entity, op.key)
        else:
            check_value(entity, op.key, op.value)
        changes[op.key] = None if op.remove else float(op.value)
    return entity, changes


@handler(ApiKey.ALTER_CLIENT_QUOTAS, versions=(0, 1),
         authorize=cluster_only(Op.ALTER_CONFIGS, alter_client_quotas_refusal))
def handle_alter(ctx: RequestContext, request: AlterClientQuotasRequest) -> Any:
    store = ctx.state.quotas
    updated = {entity: dict(values) for entity, values in store.quotas.items()}
    answers: list[AlterEntry] = []
    changed = False
    seen: set[Entity] = set()
    for entry in request.entries:
        named = [AlterEntity(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity]
        try:
            entity, changes = _changes(entry)
            if entity in seen:
                raise QuotaError("An entity cannot be altered twice in the same request")
            seen.add(entity)
            values = dict(updated.get(entity, {}))
            for key, value in changes.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            if values and entity not in updated and len(updated) >= MAX_ENTITIES:
                raise QuotaError(f"Too many quota entities (at most {MAX_ENTITIES})")
        except QuotaError as exc:
            answers.append(AlterEntry(error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc), entity=named))
            continue
        answers.append(AlterEntry(entity=named))
        if values != updated.get(entity, {}):
            changed = True
            if values:
                updated[entity] = values
            else:
                updated.pop(entity, None)
    response = AlterClientQuotasResponse(entries=answers)
    if request.validate_only or not changed:
        return response

    async def apply() -> AlterClientQuotasResponse:
        await ctx.state.detached.run(store.replace, updated)
        return response

    return apply()
