"""What `pybroker log-dirs`, `configs describe` and `health` ask the running broker, as plain rows.

- `log_dirs`: DescribeLogDirs (as kafka-log-dirs --describe): each dir's state, space and partitions
  (a partition being moved also shows under its target dir, `future: true`, with its offset lag).
- `move_partition`: AlterReplicaLogDirs (as kafka-reassign-partitions' log-dir moves): one partition to
  another log dir of the broker; the copy runs in the broker, `log_dirs` shows its progress.
- `describe_configs`: DescribeConfigs with synonyms (as kafka-configs --describe): every value in force
  and where it comes from (a topic override, a dynamic or static broker setting, or the default).
- `health`: the checks an operator's probe wants (it answers, every partition has a leader, every log
  dir is online), each with a verdict; `pybroker health` exits non-zero when one fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pybroker.clients.admin import topics as topic_ops
from pybroker.clients.admin.topics import TOPIC_RESOURCE, check, error_name, metadata
from pybroker.clients.wire import WireClient
from pybroker.config.broker_config import ConfigSource
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirTopic,
)
from pybroker.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from pybroker.protocol.messages.describe_log_dirs import DescribableLogDirTopic, DescribeLogDirsRequest
from pybroker.protocol.messages.metadata import MetadataRequest

BROKER_RESOURCE = 4


def _source(code: int) -> str:
    return ConfigSource(code).name if code in ConfigSource._value2member_map_ else str(code)


def node_id(client: WireClient) -> int:
    """The broker's node id (from Metadata: a single node is its own controller)."""
    response = client.call(MetadataRequest(topics=[], allow_auto_topic_creation=False), max_version=12)
    if response.brokers:
        return int(response.brokers[0].node_id)
    return int(response.controller_id)


def log_dirs(client: WireClient, topics: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One dict per log dir: its path, error, total and usable bytes, and its partitions with their sizes."""
    wanted = None
    if topics:
        found = metadata(client, sorted(set(topics)))
        for topic in found:
            check(topic.error_code, None, f"topic {topic.name}")
        wanted = [DescribableLogDirTopic(topic=t.name, partitions=sorted(p.partition_index for p in t.partitions))
                  for t in found]
    response = client.call(DescribeLogDirsRequest(topics=wanted), max_version=4)
    check(response.error_code, None, "DescribeLogDirs")
    out = []
    for result in sorted(response.results, key=lambda r: r.log_dir):
        partitions = [{"topic": t.name, "partition": p.partition_index, "size": p.partition_size,
                       "offset_lag": p.offset_lag, "future": p.is_future_key}
                      for t in result.topics for p in t.partitions]
        out.append({"log_dir": result.log_dir, "error": error_name(result.error_code) if result.error_code else None,
                    "total_bytes": result.total_bytes if result.total_bytes >= 0 else None,
                    "usable_bytes": result.usable_bytes if result.usable_bytes >= 0 else None,
                    "partition_count": len(partitions), "size": sum(p["size"] for p in partitions),
                    "partitions": partitions})
    return out


def move_partition(client: WireClient, topic: str, partition: int, log_dir: str) -> None:
    """Ask the broker to move a partition to `log_dir` (an absolute path, one of its log dirs)."""
    response = client.call(AlterReplicaLogDirsRequest(dirs=[AlterReplicaLogDir(path=log_dir, topics=[
        AlterReplicaLogDirTopic(name=topic, partitions=[partition])])]), max_version=2)
    for result in response.results:
        for answer in result.partitions:
            check(answer.error_code, None, f"partition {result.topic_name}-{answer.partition_index} to {log_dir}")


def describe_configs(client: WireClient, *, topic: str | None = None, broker: str | None = None,
                     keys: Sequence[str] = (), include_defaults: bool = False) -> list[dict[str, Any]]:
    """The configs of one topic or of the broker: value, source, read-only, sensitive and synonyms.

    Without `include_defaults` only the values that differ from the default are listed (as
    kafka-configs --describe lists the overrides); a sensitive value is never shown by the broker."""
    if topic is not None:
        resource_type, name = TOPIC_RESOURCE, topic
    else:
        resource_type, name = BROKER_RESOURCE, broker if broker is not None else str(node_id(client))
    request = DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=list(keys) or None)],
        include_synonyms=True, include_documentation=False)
    result = client.call(request, max_version=4).results[0]
    check(result.error_code, result.error_message, f"DescribeConfigs {name or 'broker'}")
    rows = []
    for entry in sorted(result.configs, key=lambda e: e.name):
        if not include_defaults and not keys and entry.config_source == ConfigSource.DEFAULT_CONFIG:
            continue
        rows.append({"name": entry.name, "value": None if entry.is_sensitive else entry.value,
                     "source": _source(entry.config_source), "read_only": entry.read_only,
                     "sensitive": entry.is_sensitive,
                     "synonyms": [f"{s.name}={s.value}({_source(s.source)})" for s in entry.synonyms]})
    return rows


def alter_configs(client: WireClient, *, topic: str | None, broker: str | None, set_: Mapping[str, str],
                  delete: Sequence[str]) -> list[dict[str, Any]]:
    """Change a topic's or the broker's configs; the keys touched, as they are now (with their sources)."""
    if topic is not None:
        topic_ops.alter_configs(client, TOPIC_RESOURCE, topic, set_, delete)
    else:
        broker = broker if broker is not None else str(node_id(client))
        topic_ops.alter_configs(client, BROKER_RESOURCE, broker, set_, delete)
    return describe_configs(client, topic=topic, broker=broker, keys=[*set_, *delete])


def health(client: WireClient) -> dict[str, Any]:
    """The broker's health as checks: `healthy` is true when every check passes."""
    checks = [{"check": "reachable", "ok": True,
               "detail": f"{client.bootstrap} answers ApiVersions ({len(client.versions)} APIs)"}]
    response = client.call(MetadataRequest(topics=None, allow_auto_topic_creation=False), max_version=12)
    brokers = [f"{b.node_id}@{b.host}:{b.port}" for b in response.brokers]
    checks.append({"check": "brokers", "ok": bool(brokers),
                   "detail": ", ".join(brokers) or "Metadata lists no broker"})
    partitions = [(t.name, p) for t in response.topics for p in t.partitions]
    leaderless = sorted(f"{name}-{p.partition_index}" for name, p in partitions if p.error_code or p.leader_id < 0)
    bad_topics = sorted(f"{t.name} ({error_name(t.error_code)})" for t in response.topics if t.error_code)
    checks.append({"check": "partitions", "ok": not leaderless and not bad_topics,
                   "detail": f"{len(partitions)} partition(s) in {len(response.topics)} topic(s)"
                   + (f"; without a leader: {', '.join(leaderless[:10])}" if leaderless else "")
                   + (f"; topics in error: {', '.join(bad_topics[:10])}" if bad_topics else "")})
    if client.serves(ApiKey.DESCRIBE_LOG_DIRS):
        dirs = log_dirs(client)
        offline = [d["log_dir"] for d in dirs if d["error"]]
        checks.append({"check": "log_dirs", "ok": bool(dirs) and not offline,
                       "detail": f"{len(dirs) - len(offline)} of {len(dirs)} online"
                       + (f"; offline: {', '.join(offline)}" if offline else "")})
    return {"healthy": all(c["ok"] for c in checks), "checks": checks}
