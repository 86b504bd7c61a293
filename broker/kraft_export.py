"""`pybroker export-kraft`: a stopped pybroker's whole metadata as a KRaft snapshot, for Apache Kafka 4 to take over.

`storage/kraft_export.py` writes the snapshot and the topic part of the image (topics, partitions, topic
configs, the producer id mark); here the broker's own stores are added, as the records Kafka keeps them in:
ACLs (`pybroker-acls.json`) as AccessControlEntryRecord, SCRAM credentials (`scram-credentials.json`) as
UserScramCredentialRecord (the same salt, stored and server keys and iterations: passwords go on working),
client quotas (`client-quotas.json`) as ClientQuotaRecord, the dynamic broker configs
(`pybroker-dynamic-configs.json`: this node's and the cluster-wide default) and the share groups' group configs
(`pybroker-group-configs.json`, resource type GROUP) as ConfigRecord. Secrets are
never printed or logged; the result names counts only.

pybroker's live metadata log (`storage/metadata_log.py`) already holds these records, so a combined Kafka node
on the same dirs needs no export; the export remains for a controller-only node's own dir (`--metadata-dir`),
and to replace the log with one fresh snapshot. Run it after pybroker stopped.

Runs in its own process (the CLI), holding every log dir's lock, so no broker can run on the dirs meanwhile.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from pybroker.broker.security.acl_store import AclStore
from pybroker.broker.security.quota_store import FILE_NAME as QUOTA_FILE
from pybroker.broker.security.quota_store import load as load_quotas
from pybroker.broker.security.scram_store import FILE_NAME as SCRAM_FILE
from pybroker.broker.security.scram_store import ScramStore
from pybroker.broker.share.group_configs import FILE_NAME as GROUP_CONFIGS_FILE
from pybroker.broker.share.group_configs import GroupConfigs
from pybroker.broker.streams_groups.group_configs import FILE_NAME as STREAMS_GROUP_CONFIGS_FILE
from pybroker.broker.streams_groups.group_configs import StreamsGroupConfigs
from pybroker.broker.telemetry.subscriptions import FILE_NAME as CLIENT_METRICS_FILE
from pybroker.broker.telemetry.subscriptions import Subscriptions
from pybroker.protocol.kraft_snapshot import encode_metadata_record
from pybroker.protocol.scram_mechanisms import MECHANISMS
from pybroker.storage.dynamic_config_store import DynamicConfigStore
from pybroker.storage.kraft_export import ExportError, ExportResult, export_kraft_snapshot, node_of
from pybroker.storage.kraft_metadata import BROKER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE
from pybroker.storage.log_dir import lock_dir, unlock_dir
from pybroker.storage.topic_store import TopicStore


def _acl_id(index: int) -> bytes:
    """A stable, non-zero id per ACL: Kafka only needs them unique (it hands out random ones itself)."""
    return (index + 1).to_bytes(16, "big")


def security_values(first_dir: Path, node_id: int) -> dict[str, list[bytes]]:
    """The record values of the broker's stores in the first log dir, by kind (for the counts)."""
    acls = [encode_metadata_record("AccessControlEntryRecord", {
        "id": uuid.UUID(bytes=_acl_id(i)), "resource_type": b.resource_type.value, "resource_name": b.resource_name,
        "pattern_type": b.pattern_type.value, "principal": b.principal, "host": b.host,
        "operation": b.operation.value, "permission_type": b.permission.value})
        for i, b in enumerate(sorted(AclStore(first_dir).load()))]
    scram = []
    for user, credentials in sorted(ScramStore(first_dir / SCRAM_FILE).users().items()):
        for mechanism, credential in sorted(credentials.items()):
            scram.append(encode_metadata_record("UserScramCredentialRecord", {
                "name": user, "mechanism": MECHANISMS[mechanism].type_id, "salt": credential.salt,
                "stored_key": credential.stored_key, "server_key": credential.server_key,
                "iterations": credential.iterations}))
    quotas = [encode_metadata_record("ClientQuotaRecord", {"entity": list(entity), "key": key, "value": value,
                                                           "remove": False})
              for entity, values in sorted(load_quotas(first_dir / QUOTA_FILE).items(), key=lambda kv: repr(kv[0]))
              for key, value in sorted(values.items())]
    node, default = DynamicConfigStore(first_dir).load()
    configs = [encode_metadata_record("ConfigRecord", {"resource_type": BROKER_RESOURCE, "resource_name": name,
                                                       "name": key, "value": value})
               for name, layer in (("", default), (str(node_id), node)) for key, value in sorted(layer.items())]
    # Kafka keeps a group's share.* and streams.* keys as one resource; pybroker in two stores
    group_layers: dict[str, dict[str, str]] = {}
    for store in (GroupConfigs(first_dir / GROUP_CONFIGS_FILE).configs,
                  StreamsGroupConfigs(first_dir / STREAMS_GROUP_CONFIGS_FILE).configs):
        for group, layer in store.items():
            group_layers.setdefault(group, {}).update(layer)
    groups = [encode_metadata_record("ConfigRecord", {"resource_type": GROUP_RESOURCE, "resource_name": group,
                                                      "name": key, "value": value})
              for group, layer in sorted(group_layers.items()) for key, value in sorted(layer.items())]
    subscriptions = Subscriptions(first_dir / CLIENT_METRICS_FILE)
    subscriptions.load()
    client_metrics = [encode_metadata_record("ConfigRecord", {"resource_type": CLIENT_METRICS_RESOURCE,
                                                              "resource_name": name, "name": key, "value": value})
                      for name in subscriptions.names()
                      for key, value in sorted((subscriptions.configs(name) or {}).items())]
    return {"acls": acls, "scram_credentials": scram, "client_quotas": quotas, "broker_configs": configs,
            "group_configs": groups, "client_metrics": client_metrics}


def export_kraft(log_dirs: Sequence[Path], node_id: int | None, metadata_dir: Path | None = None,
                 controller_id: int | None = None) -> tuple[ExportResult, dict[str, int]]:
    """Write the snapshot of everything pybroker keeps in `log_dirs`; the result and the count of each kind.
    `node_id` None takes the dirs' own (meta.properties).

    Takes every log dir's lock first (`LogDirLockedError` while a broker runs on one)."""
    dirs = [Path(d) for d in log_dirs]
    for directory in dirs:
        if not directory.is_dir():
            raise ExportError(f"{directory} is not a directory")
    locks: list[int] = []
    try:
        for directory in dirs:
            locks.append(lock_dir(directory))
        node_id = node_of(dirs, node_id)
        TopicStore(dirs).load()  # an unreadable topic table stops here, before anything is written
        extra = security_values(dirs[0], node_id)
        values = [value for kind in extra.values() for value in kind]
        result = export_kraft_snapshot(dirs, node_id, values, int(time.time() * 1000), metadata_dir, controller_id)
    finally:
        for fd in locks:
            unlock_dir(fd)
    return result, {kind: len(kind_values) for kind, kind_values in extra.items()}
