"""Authorization rules on the cluster and on configs, shared by the admin APIs: `cluster_only` (one cluster
permission, else the handler module's refusal), `top_level_refusal` (a response whose top-level error says
so), the config rule of DescribeConfigs / (Incremental)AlterConfigs (a topic's permission for a topic, the
cluster's for a broker, a broker logger or client metrics), DescribeLogDirs and DescribeCluster, and the
refusals of ElectLeaders, the ACL, client quota and SCRAM admin APIs. Each handler module picks its rule
here when it registers; `authorization.call` runs it on the event loop.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

from pybroker.broker.security.acls import CLUSTER_NAME, AclOperation
from pybroker.broker.security.authorization_check import (
    CLUSTER,
    CLUSTER_DENIED,
    CONFIG_BROKER,
    CONFIG_BROKER_LOGGER,
    CONFIG_CLIENT_METRICS,
    CONFIG_TOPIC,
    GROUP,
    GROUP_DENIED,
    TOPIC,
    TOPIC_DENIED,
    Check,
    Op,
    Outcome,
    appending,
    split_by,
)
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import RESPONSES, describe_log_dirs, elect_leaders

#: the GROUP config resource (share groups' configs): its ACL is the group's
CONFIG_GROUP = 32


def config_rule(op: AclOperation, result_cls: Any, resp_attr: str, req_attr: str = "resources") -> Any:
    def rule(check: Check, r: Any) -> Outcome:
        def allowed(res: Any) -> bool:
            if res.resource_type == CONFIG_TOPIC:
                return check.ok(op, TOPIC, res.resource_name)
            if res.resource_type in (CONFIG_BROKER, CONFIG_BROKER_LOGGER, CONFIG_CLIENT_METRICS):
                return check.cluster(op)
            if res.resource_type == CONFIG_GROUP:
                return check.ok(op, GROUP, res.resource_name)
            return True  # the handler answers an unknown resource type

        kept, denied = split_by(getattr(r, req_attr), allowed)
        if not denied:
            return None
        setattr(r, req_attr, kept)
        return appending(resp_attr, [result_cls(
            error_code=TOPIC_DENIED if res.resource_type == CONFIG_TOPIC
            else GROUP_DENIED if res.resource_type == CONFIG_GROUP else CLUSTER_DENIED,
            error_message="not authorized", resource_type=res.resource_type, resource_name=res.resource_name)
            for res in denied])
    return rule


def describe_log_dirs_rule(check: Check, r: Any) -> Outcome:
    if check.cluster(Op.DESCRIBE):
        return None
    return describe_log_dirs.DescribeLogDirsResponse(error_code=CLUSTER_DENIED, results=[])


def cluster_only(op: AclOperation, refuse: Callable[[Any], Any]) -> Any:
    def rule(check: Check, r: Any) -> Outcome:
        return None if check.cluster(op) else refuse(r)
    return rule


def element_type(cls: Any, attr: str) -> Any:
    """The dataclass of the list field `attr` of a generated message class."""
    return typing.get_args(typing.get_type_hints(cls)[attr])[0]


def top_level_refusal(api_key: int) -> Callable[[Any], Any]:
    def build(r: Any) -> Any:
        response = RESPONSES[api_key]()
        response.error_code = CLUSTER_DENIED
        if hasattr(response, "error_message"):
            response.error_message = "not authorized"
        return response
    return build


def alter_client_quotas_refusal(r: Any) -> Any:
    """Every entry refused, naming its entity, as Kafka answers without ALTER_CONFIGS on the cluster."""
    cls = RESPONSES[ApiKey.ALTER_CLIENT_QUOTAS]
    entry_cls = element_type(cls, "entries")
    entity_cls = element_type(entry_cls, "entity")
    return cls(entries=[entry_cls(error_code=CLUSTER_DENIED, error_message="not authorized", entity=[
        entity_cls(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry in r.entries])


def alter_scram_refusal(r: Any) -> Any:
    """One refused result per user named, as Kafka answers without ALTER on the cluster."""
    cls = RESPONSES[ApiKey.ALTER_USER_SCRAM_CREDENTIALS]
    result_cls = element_type(cls, "results")
    users = dict.fromkeys(u.name for u in (*r.deletions, *r.upsertions))
    return cls(results=[result_cls(user=u, error_code=CLUSTER_DENIED, error_message="not authorized")
                        for u in users])


def describe_cluster_rule(check: Check, r: Any) -> Outcome:
    if not r.include_cluster_authorized_operations:
        return None

    def merge(response: Any) -> Any:
        # Kafka: the bit set only for whom may DESCRIBE the cluster, else 0
        response.cluster_authorized_operations = check.operations(CLUSTER, CLUSTER_NAME) \
            if check.cluster(Op.DESCRIBE, quiet=True) else 0
        return response
    return merge




def elect_leaders_refusal(r: elect_leaders.ElectLeadersRequest) -> Any:
    return elect_leaders.ElectLeadersResponse(error_code=CLUSTER_DENIED, replica_election_results=[
        elect_leaders.ReplicaElectionResult(topic=t.topic, partition_result=[
            elect_leaders.PartitionResult(partition_id=p, error_code=CLUSTER_DENIED, error_message=None)
            for p in t.partitions]) for t in r.topic_partitions or []])


class RefusedEntry(typing.TypedDict):
    """The fields a refused CreateAcls / DeleteAcls entry is built from (`Result(**DENIED_ACL)`)."""

    error_code: int
    error_message: str


#: the fields of a CreateAcls / DeleteAcls entry refused for want of ALTER on the cluster
DENIED_ACL: RefusedEntry = {"error_code": CLUSTER_DENIED, "error_message": "not authorized to alter ACLs"}
