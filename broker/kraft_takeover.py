"""The broker half of taking over a stopped Apache Kafka 4 node's log dir: ACLs, SCRAM users, quotas, broker configs.

`storage/kraft_metadata.py` replays Kafka's metadata log and keeps the AccessControlEntryRecord and
UserScramCredentialRecord fields it found; here they become pybroker's own stores (`pybroker-acls.json`,
`scram-credentials.json`, and the ClientQuotaRecord values as `client-quotas.json`, in the first log dir), written once, at that first start, and only when the store
does not exist yet (a store pybroker already has is never overwritten), or, with `replace`, in place of
pybroker's own: Kafka served the dirs after `pybroker export-kraft`, so its metadata is the newer truth. Kafka's SCRAM records carry what
pybroker keeps (salt, stored key, server key, iterations), so a user's password goes on working; the
secrets are never logged. An ACL pybroker cannot store (a code it does not know) is skipped with a
warning naming it.

Runs on the startup thread, before the authorizer loads and before any listener serves a request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pybroker.broker.dynamic_configs import CLUSTER_DEFAULT, NODE, DynamicBrokerConfigs
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.security.acl_store import AclStore
from pybroker.broker.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_problem,
)
from pybroker.broker.security.quota_entities import Entity, QuotaError, check_value, entity_of
from pybroker.broker.security.quota_store import FILE_NAME as QUOTA_FILE
from pybroker.broker.security.quota_store import save as save_quotas
from pybroker.broker.security.scram import ScramCredential
from pybroker.broker.security.scram_store import FILE_NAME as SCRAM_FILE
from pybroker.broker.security.scram_store import ScramStore
from pybroker.broker.share.group_configs import FILE_NAME as GROUP_CONFIGS_FILE
from pybroker.broker.share.group_configs import FORMAT_VERSION as GROUP_CONFIGS_VERSION
from pybroker.broker.share.group_configs import SHARE_KEYS
from pybroker.broker.streams_groups.group_configs import FILE_NAME as STREAMS_GROUP_CONFIGS_FILE
from pybroker.broker.streams_groups.group_configs import FORMAT_VERSION as STREAMS_GROUP_CONFIGS_VERSION
from pybroker.broker.streams_groups.group_configs import KEYS as STREAMS_KEYS
from pybroker.broker.telemetry.subscriptions import FILE_NAME as CLIENT_METRICS_FILE
from pybroker.broker.telemetry.subscriptions import FORMAT_VERSION as CLIENT_METRICS_VERSION
from pybroker.broker.telemetry.subscriptions import SubscriptionError
from pybroker.broker.telemetry.subscriptions import validate as validate_subscription
from pybroker.config.broker_config import validate_dynamic_broker
from pybroker.config.types import ConfigError
from pybroker.protocol.scram_mechanisms import BY_TYPE
from pybroker.storage.files import atomic_write
from pybroker.storage.kraft_metadata import CLIENT_METRICS_RESOURCE, GROUP_RESOURCE, KraftImage

log = get_logger("pybroker.kraft_takeover")


def _binding(fields: dict[str, Any]) -> AclBinding | str:
    """The binding an AccessControlEntryRecord describes, or why it cannot be one."""
    try:
        binding = AclBinding(ResourceType(fields["resource_type"]), str(fields["resource_name"]),
                             PatternType(fields["pattern_type"]), str(fields["principal"]), str(fields["host"]),
                             AclOperation(fields["operation"]), AclPermissionType(fields["permission_type"]))
    except ValueError as exc:
        return str(exc)
    return binding_problem(binding) or binding


def adopt_acls(image: KraftImage, log_dir: Path, replace: bool = False) -> int:
    """Store Kafka's ACLs unless pybroker already has an ACL file (`replace`: in its place); how many were stored."""
    store = AclStore(log_dir)
    if not replace and (not image.acls or store.path.exists()):
        return 0
    bindings: set[AclBinding] = set()
    for acl_id, fields in image.acls.items():
        made = _binding(fields)
        if isinstance(made, str):
            log.warning("Kafka ACL not taken over", acl_id=str(acl_id), problem=made)
        else:
            bindings.add(made)
    store.save(bindings)
    return len(bindings)


def adopt_scram(image: KraftImage, log_dir: Path, replace: bool = False) -> int:
    """Store Kafka's SCRAM credentials unless pybroker already has a credential file (`replace`: in its place);
    how many were stored."""
    path = log_dir / SCRAM_FILE
    if not replace and (not image.scram or path.exists()):
        return 0
    store = ScramStore(path)
    deletes = [(user, mechanism) for user, mechanisms in store.users().items() for mechanism in mechanisms]
    upserts = []
    for (user, code), fields in image.scram.items():
        mechanism = BY_TYPE.get(code)
        if mechanism is None:
            log.warning("Kafka SCRAM credential not taken over: unknown mechanism", user=user, mechanism=code)
            continue
        credential = ScramCredential(bytes(fields["salt"]), bytes(fields["stored_key"]),
                                     bytes(fields["server_key"]), int(fields["iterations"]))
        upserts.append((user, mechanism.name, credential))
    taken = {(user, mechanism) for user, mechanism, _ in upserts}
    store.apply(upserts, [d for d in deletes if d not in taken])
    return len(upserts)


def adopt_quotas(image: KraftImage, log_dir: Path, replace: bool = False) -> int:
    """Store Kafka's client quotas unless pybroker already has a quota file (`replace`: in its place); how many
    entities were stored. An entity or value pybroker would refuse is skipped with a warning naming it."""
    path = log_dir / QUOTA_FILE
    if not replace and (not image.quotas or path.exists()):
        return 0
    quotas: dict[Entity, dict[str, float]] = {}
    for pairs, values in image.quotas.items():
        try:
            entity = entity_of(pairs)
            for key, value in values.items():
                check_value(entity, key, value)
        except QuotaError as exc:
            log.warning("Kafka client quota not taken over", entity=str(pairs), problem=str(exc))
            continue
        quotas[entity] = dict(values)
    save_quotas(path, quotas)
    return len(quotas)


def adopt_broker_configs(image: KraftImage, configs: DynamicBrokerConfigs, node_id: int,
                         replace: bool = False) -> list[str]:
    """Kafka's dynamic broker configs (this node's and the cluster-wide default) become pybroker's, unless
    pybroker already has a dynamic config file. A key pybroker does not accept at run time is skipped with a
    warning (set it in pybroker's own config). Applied at once, as AlterConfigs would; the keys taken."""
    if configs.store.path.exists() and not replace:
        return []
    taken: list[str] = []
    for source, name in ((CLUSTER_DEFAULT, ""), (NODE, str(node_id))):
        usable = {}
        for key, text in image.broker_configs(name).items():
            try:
                usable.update(validate_dynamic_broker({key: text}))
            except ConfigError as exc:
                log.warning("Kafka dynamic broker config not taken over", key=key, reason=exc.message)
        if usable or replace:
            configs.replace(source, usable)
            taken += sorted(usable)
    return taken


def adopt_group_configs(image: KraftImage, log_dir: Path, replace: bool = False) -> int:
    """Kafka's group configs (ConfigRecord of resource type GROUP) of the keys pybroker serves, into the share
    and the streams group config stores, each unless pybroker already has that file (`replace`: in its place);
    how many groups were stored."""
    stored: set[str] = set()
    for file_name, version, keys in ((GROUP_CONFIGS_FILE, GROUP_CONFIGS_VERSION, SHARE_KEYS),
                                     (STREAMS_GROUP_CONFIGS_FILE, STREAMS_GROUP_CONFIGS_VERSION, STREAMS_KEYS)):
        path = log_dir / file_name
        found = {name: {k: v for k, v in configs.items() if k in keys}
                 for (kind, name), configs in image.configs.items() if kind == GROUP_RESOURCE}
        groups = {name: configs for name, configs in found.items() if configs}
        if not replace and (not groups or path.exists()):
            continue
        atomic_write(path, json.dumps({"version": version, "groups": groups}, sort_keys=True).encode())
        stored.update(groups)
    return len(stored)


def adopt_client_metrics(image: KraftImage, log_dir: Path, replace: bool = False) -> int:
    """Kafka's client-metrics subscriptions (ConfigRecord of resource type CLIENT_METRICS) that pass
    pybroker's checks, unless pybroker already has a subscriptions file (`replace`: in its place); how many
    were stored. One that fails the checks is left out with a log line naming it."""
    path = log_dir / CLIENT_METRICS_FILE
    subscriptions: dict[str, dict[str, str]] = {}
    for (kind, name), configs in sorted(image.configs.items()):
        if kind != CLIENT_METRICS_RESOURCE or not configs:
            continue
        try:
            validate_subscription(name, configs)
        except SubscriptionError as exc:
            log.warning("a client-metrics subscription of Kafka's is not taken over", subscription=name,
                        reason=str(exc))
            continue
        subscriptions[name] = dict(configs)
    if not replace and (not subscriptions or path.exists()):
        return 0
    atomic_write(path, json.dumps({"version": CLIENT_METRICS_VERSION, "subscriptions": subscriptions},
                                  sort_keys=True, indent=1).encode())
    return len(subscriptions)


def adopt_kafka_settings(image: KraftImage, log_dir: Path, configs: DynamicBrokerConfigs, node_id: int, *,
                         replace: bool = False) -> None:
    """Every store, then one log line with the counts and config keys (never credentials or values)."""
    acls, users = adopt_acls(image, log_dir, replace), adopt_scram(image, log_dir, replace)
    quotas = adopt_quotas(image, log_dir, replace)
    groups = adopt_group_configs(image, log_dir, replace)
    subscriptions = adopt_client_metrics(image, log_dir, replace)
    keys = adopt_broker_configs(image, configs, node_id, replace)
    log.info("took over Apache Kafka's ACLs, SCRAM credentials, client quotas and dynamic broker configs", acls=acls,
             scram_credentials=users, client_quotas=quotas, group_configs=groups,
             client_metrics_subscriptions=subscriptions, broker_configs=keys)
