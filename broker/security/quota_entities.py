"""Client quota entities and keys as Kafka defines them, and which configured entity governs a client.

An entity is a set of (type, name) pairs: `user`, `client-id` (alone or together) or `ip` (alone); a name
of None is that type's default entity. Each quota key is resolved on its own, in Kafka's order of
precedence (most specific first):

    user+client-id, user+default client-id, user, default user+client-id,
    default user+default client-id, default user, client-id, default client-id

The entity that wins also decides who shares the measured rate (Kafka's metric tags): a quota set on
`user=alice` alone is shared by every client-id alice uses; one on `client-id=<default>` gives each
client-id its own.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable, Mapping

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

#: the keys each kind of entity takes, and whether the value must be a whole number (Kafka's LONG/INT)
CLIENT_KEYS = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True, REQUEST_PERCENTAGE: False,
               CONTROLLER_MUTATION_RATE: False}
IP_KEYS = {CONNECTION_CREATION_RATE: True}
#: the longest entity name accepted (a user or client-id is a short string; this caps the file)
MAX_NAME_CHARS = 1024
#: the most quota entities the broker keeps: the file is rewritten whole on every change
MAX_ENTITIES = 10_000

#: an entity: its (type, name-or-None) pairs, sorted by type
Entity = tuple[tuple[str, str | None], ...]


class QuotaError(ValueError):
    """A request names an entity or a key Kafka would refuse (answered INVALID_REQUEST)."""


def entity_of(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """The entity named by `pairs`, checked as Kafka checks it."""
    pairs = list(pairs)
    if not pairs:
        raise QuotaError("Invalid empty client quota entity")
    types = [t for t, _ in pairs]
    for entity_type, name in pairs:
        if entity_type not in ENTITY_TYPES:
            raise QuotaError(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and (not name or len(name) > MAX_NAME_CHARS):
            raise QuotaError(f"Invalid {entity_type} name: must hold 1 to {MAX_NAME_CHARS} characters")
    if len(set(types)) != len(types):
        raise QuotaError("Duplicate entity type in client quota entity")
    if IP in types and len(types) > 1:
        raise QuotaError("Invalid quota entity combination: an ip entity cannot be combined with others")
    for entity_type, name in pairs:
        if entity_type == IP and name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                raise QuotaError(f"{name} is not a valid IP address") from None
    return tuple(sorted(pairs, key=lambda p: p[0]))


def check_key(entity: Entity, key: str) -> Mapping[str, bool]:
    """The keys `entity` takes, when `key` is one of them (else QuotaError)."""
    keys = IP_KEYS if entity[0][0] == IP else CLIENT_KEYS
    if key not in keys:
        raise QuotaError(f"Invalid configuration key {key}")
    return keys


def check_value(entity: Entity, key: str, value: float) -> None:
    """Kafka's checks on one key set on `entity`: a key that entity takes, a positive finite value, a
    whole number for the byte and connection rates."""
    keys = check_key(entity, key)
    if not math.isfinite(value) or value <= 0:
        raise QuotaError(f"Configuration {key} must be a positive value")
    if keys[key] and value != int(value):
        raise QuotaError(f"Configuration {key} must be a whole number")


def render(entity: Entity) -> str:
    """`user=alice,client-id=<default>`: a readable name (log lines, the metrics' entity label)."""
    return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def precedence(user: str, client_id: str) -> list[tuple[Entity, tuple[str, str]]]:
    """The entities that may govern (user, client_id), most specific first, each with the key of the
    rate its clients share: (user, "") when the user alone decides, ("", client_id) when the client-id
    alone does, both when both do."""
    both = (user, client_id)
    return [
        (((CLIENT_ID, client_id), (USER, user)), both),
        (((CLIENT_ID, None), (USER, user)), both),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, None)), both),
        (((CLIENT_ID, None), (USER, None)), both),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, None),), ("", client_id)),
    ]


def resolve(quotas: Mapping[Entity, Mapping[str, float]], user: str, client_id: str,
            key: str) -> tuple[float, Entity, tuple[str, str]] | None:
    """(the quota, the entity it is set on, the key of the shared rate), or None when nothing limits
    this client for `key`."""
    for entity, shared in precedence(user, client_id):
        value = quotas.get(entity, {}).get(key)
        if value is not None:
            return value, entity, shared
    return None


# -- DescribeClientQuotas filters ------------------------------------------------------------------
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def check_filter(components: Iterable[tuple[str, int, str | None]]) -> list[tuple[str, int, str | None]]:
    """The filter's components, checked as Kafka checks them (QuotaError when not)."""
    checked = list(components)
    seen: set[str] = set()
    for entity_type, match_type, match in checked:
        if entity_type not in ENTITY_TYPES:
            raise QuotaError(f"Custom entity type '{entity_type}' not supported")
        if entity_type in seen:
            raise QuotaError(f"Entity type {entity_type} cannot appear more than once in the filter")
        seen.add(entity_type)
        if match_type == MATCH_EXACT and match is None:
            raise QuotaError(f"Entity type {entity_type} with exact match requires a name")
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise QuotaError(f"Unexpected match type {match_type}")
    if IP in seen and len(seen) > 1:
        raise QuotaError("Invalid entity filter component combination: ip with user or client-id")
    return checked


def matches(entity: Entity, components: list[tuple[str, int, str | None]], strict: bool) -> bool:
    """Does `entity` pass the filter? Each component must match the entity's name of its type (exact
    name, the default, or any specified name); with `strict`, the entity may have no other types."""
    names = dict(entity)
    for entity_type, match_type, match in components:
        if entity_type not in names:
            return False
        name = names[entity_type]
        if match_type == MATCH_EXACT and name != match:
            return False
        if match_type == MATCH_DEFAULT and name is not None:
            return False
        if match_type == MATCH_SPECIFIED and name is None:
            return False
    return not strict or len(names) == len(components)
