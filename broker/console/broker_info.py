"""The broker page: which software this is, since when, its identity, features, and (for who may see the
cluster) its listeners, log dirs and the security it enforces.

Called on the event loop by the console's router (`admin_routes`). What it reads, and what that
authorizes:

| part | from | authorizes |
| --- | --- | --- |
| version, uptime, node and cluster id, the principal | the package metadata, the console's start time, the broker's state | nothing beyond the login |
| features (finalized and supported), served APIs | ApiVersions (v4) | nothing: every client may ask |
| the principal's operations on the cluster | DescribeCluster with `include_cluster_authorized_operations` | none (Kafka answers an empty set to whom may not DESCRIBE the CLUSTER) |
| listeners, security features, log dirs | the broker's config; DescribeLogDirs | DESCRIBE on the CLUSTER |

A user who may not DESCRIBE the cluster sees the first two rows and `cluster_details: false`, as a Kafka
client sees no more. Nothing secret is read: listener passwords, keys and JAAS texts are not part of it.
"""

from __future__ import annotations

from importlib import metadata as package_metadata
from typing import TYPE_CHECKING, Any

from pybroker.broker.console.local_client import LocalClient
from pybroker.broker.console.reads import error_name, log_dirs
from pybroker.protocol.acl_codes import AclOperation
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages.api_versions import ApiVersionsRequest
from pybroker.protocol.messages.describe_cluster import DescribeClusterRequest

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState

API_VERSIONS_VERSION = 4
DESCRIBE_CLUSTER_VERSION = 1
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
NO_PEER = "127.0.0.1:0"


def software_version() -> str:
    try:
        return package_metadata.version("pybroker")
    except package_metadata.PackageNotFoundError:
        return "unknown"


def _api_name(key: int) -> str:
    return ApiKey(key).name if key in ApiKey._value2member_map_ else str(key)


def _listeners(state: BrokerState) -> list[dict[str, Any]]:
    rows = []
    for spec in state.config.listener_specs():
        host, port = state.address_of(spec.name)
        sasl = state.sasl_listeners.get(spec.name)
        rows.append({"name": spec.name, "security_protocol": spec.security_protocol,
                     "bind": f"{spec.host or '0.0.0.0'}:{spec.port}", "advertised": f"{host}:{port}",
                     "tls": spec.security_protocol in TLS_PROTOCOLS,
                     "client_auth": str(state.config.listener_get(spec.name, "ssl.client.auth"))
                     if spec.security_protocol in TLS_PROTOCOLS else None,
                     "sasl_mechanisms": list(sasl.mechanisms) if sasl is not None else []})
    return rows


def _security(state: BrokerState, login_required: bool) -> dict[str, Any]:
    config = state.config
    return {"authorizer": str(config.get("authorizer.class.name") or "") or None,
            "super_users": sorted(p for p in str(config.get("super.users") or "").split(";") if p),
            "allow_everyone_if_no_acl_found": bool(config.get("allow.everyone.if.no.acl.found")),
            "sasl_listeners": sorted(state.sasl_listeners), "console_login": login_required}


async def broker(state: BrokerState, client: LocalClient, started_ms: int, login_required: bool) -> dict[str, Any]:
    # from port 0, which no connection has: ApiVersions notes the software a peer names (for telemetry's
    # selectors), and the HTTP peer's port may be a Kafka client's too
    anonymous_peer = LocalClient(state, client.principal, NO_PEER)
    versions = await anonymous_peer.call(ApiVersionsRequest(client_software_name="pybroker-console",
                                                            client_software_version=software_version()),
                                         API_VERSIONS_VERSION)
    cluster = await client.call(DescribeClusterRequest(include_cluster_authorized_operations=True),
                                DESCRIBE_CLUSTER_VERSION)
    bits = cluster.cluster_authorized_operations
    operations = [op.name for op in AclOperation if bits > 0 and bits & (1 << op.value)]
    now = state.clock_ms()
    answer: dict[str, Any] = {
        "version": software_version(), "started_ms": started_ms, "uptime_ms": max(0, now - started_ms),
        "node_id": state.node_id, "cluster_id": state.cluster_id, "principal": client.principal,
        "cluster_operations": operations,
        "features": {
            "finalized_epoch": versions.finalized_features_epoch,
            "finalized": [{"name": f.name, "level": f.max_version_level} for f in versions.finalized_features],
            "supported": [{"name": f.name, "min": f.min_version, "max": f.max_version}
                          for f in versions.supported_features]},
        "apis": [{"key": a.api_key, "name": _api_name(a.api_key), "min": a.min_version, "max": a.max_version}
                 for a in sorted(versions.api_keys, key=lambda a: a.api_key)],
        "cluster_details": AclOperation.DESCRIBE.name in operations,
    }
    if answer["cluster_details"]:
        answer["listeners"] = _listeners(state)
        answer["security"] = _security(state, login_required)
        answer["log_dirs"] = [{"path": d.log_dir, "online": d.error_code == 0,
                               "error": error_name(d.error_code) if d.error_code else None,
                               "total_bytes": d.total_bytes, "usable_bytes": d.usable_bytes}
                              for d in await log_dirs(client)]
    return answer
