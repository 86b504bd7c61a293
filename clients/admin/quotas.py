"""`pybroker quotas describe|alter` over the wire: DescribeClientQuotas and AlterClientQuotas, with
kafka-configs' options (--entity-type users|clients, --entity-name NAME or --entity-default)."""

from __future__ import annotations

from typing import Any

from pybroker.clients.admin.users import _error
from pybroker.clients.wire import WireClient, WireError
from pybroker.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasRequestEntityData,
    AlterClientQuotasRequestEntryData,
    OpData,
)
from pybroker.protocol.messages.describe_client_quotas import ComponentData, DescribeClientQuotasRequest

#: kafka-configs' entity types -> Kafka's quota entity types
ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def _shown(name: str | None) -> str:
    return "<default>" if name is None else name


def describe(client: WireClient, entity_type: str | None, name: str | None, default: bool) -> list[dict[str, Any]]:
    components = []
    if entity_type is not None:
        match_type = MATCH_DEFAULT if default else MATCH_EXACT if name is not None else MATCH_SPECIFIED
        components.append(ComponentData(entity_type=ENTITY_TYPES[entity_type], match_type=match_type, match=name))
    response = client.call(DescribeClientQuotasRequest(components=components, strict=False))
    if response.error_code:
        raise WireError(_error(response.error_code, response.error_message))
    rows = []
    for entry in response.entries or []:
        entity = ",".join(f"{e.entity_type}={_shown(e.entity_name)}" for e in entry.entity)
        for value in entry.values:
            shown = int(value.value) if value.value == int(value.value) else value.value
            rows.append({"entity": entity, "key": value.key, "value": shown})
    return rows


def alter(client: WireClient, entity_type: str, name: str | None, add: dict[str, str], delete: list[str]) -> None:
    ops = []
    for key, text in add.items():
        try:
            value = float(text)
        except ValueError:
            raise WireError(f"{key}: {text!r} is not a number") from None
        ops.append(OpData(key=key, value=value, remove=False))
    ops += [OpData(key=key, remove=True) for key in delete]
    entity = [AlterClientQuotasRequestEntityData(entity_type=ENTITY_TYPES[entity_type], entity_name=name)]
    response = client.call(AlterClientQuotasRequest(entries=[AlterClientQuotasRequestEntryData(entity=entity,
                                                                                                ops=ops)]))
    for entry in response.entries:
        if entry.error_code:
            raise WireError(_error(entry.error_code, entry.error_message))
