"""What every served API must be allowed, in one table: Kafka's request-handler checks, not `if`s in handlers.

`call(spec, ctx, request)` runs a handler under the authorizer. Without one (`authorizer.class.name`
unset) it calls the handler unchanged. With one, the API's rule in `RULES` looks at the request and
answers one of:

- None: everything the request touches is allowed; the handler runs as it is;
- a response: the whole request is refused (a group, the cluster or a transactional id it needs is
  denied); the handler never runs;
- a merge function: the rule removed the denied entries (topics, groups, resources) from the request, the
  handler serves the rest, and the merge adds the denied entries back to its answer, each with its own
  error code: a denied topic in a multi-topic Produce fails alone while the others succeed, as in Kafka.

Merges also filter what a listing may show (Metadata and OffsetFetch list only topics the principal may
DESCRIBE, ListGroups only groups) and fill in the `authorized_operations` bit sets clients ask for.

The operations and error codes are those of Kafka's KafkaApis / AuthHelper:

| API | needs | denial |
| --- | --- | --- |
| Produce | WRITE topic (auto-creation: also CREATE); WRITE transactional id when set | TOPIC_ / TRANSACTIONAL_ID_AUTHORIZATION_FAILED |
| Fetch, OffsetCommit (topics) | READ topic | TOPIC_AUTHORIZATION_FAILED per partition |
| ListOffsets, OffsetForLeaderEpoch | DESCRIBE topic | TOPIC_AUTHORIZATION_FAILED per partition |
| Metadata | DESCRIBE topic (listing filtered); CREATE cluster or topic to auto-create | TOPIC_AUTHORIZATION_FAILED |
| CreateTopics | CREATE cluster or topic | TOPIC_AUTHORIZATION_FAILED per topic |
| DeleteTopics, DeleteRecords | DELETE topic | TOPIC_AUTHORIZATION_FAILED |
| CreatePartitions | ALTER topic | TOPIC_AUTHORIZATION_FAILED |
| DescribeConfigs / (Incremental)AlterConfigs | DESCRIBE_CONFIGS / ALTER_CONFIGS topic or cluster | TOPIC_ / CLUSTER_AUTHORIZATION_FAILED |
| JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit | READ group | GROUP_AUTHORIZATION_FAILED |
| OffsetFetch | DESCRIBE group, DESCRIBE topic | GROUP_ / TOPIC_AUTHORIZATION_FAILED |
| OffsetDelete | DELETE group, READ topic | GROUP_ / TOPIC_AUTHORIZATION_FAILED |
| TxnOffsetCommit | WRITE transactional id, READ group, READ topic | TRANSACTIONAL_ID_ / GROUP_ (every partition), TOPIC_AUTHORIZATION_FAILED per topic |
| DescribeGroups / DeleteGroups | DESCRIBE / DELETE group | GROUP_AUTHORIZATION_FAILED per group |
| ListGroups | DESCRIBE cluster, else only groups it may DESCRIBE | (filtered) |
| ConsumerGroupHeartbeat, ConsumerGroupDescribe | see `authorization_consumer_groups` | |
| FindCoordinator | DESCRIBE group / transactional id | GROUP_ / TRANSACTIONAL_ID_AUTHORIZATION_FAILED |
| InitProducerId | WRITE transactional id (v6 `enable_2pc`: also TWO_PHASE_COMMIT); else IDEMPOTENT_WRITE cluster or WRITE on some topic | TRANSACTIONAL_ID_ / CLUSTER_AUTHORIZATION_FAILED |
| AddPartitionsToTxn v0-3 | WRITE transactional id, WRITE each topic | TRANSACTIONAL_ID_ / TOPIC_AUTHORIZATION_FAILED (the rest OPERATION_NOT_ATTEMPTED) |
| AddPartitionsToTxn v4+ | CLUSTER_ACTION cluster | CLUSTER_AUTHORIZATION_FAILED |
| AddOffsetsToTxn | WRITE transactional id, READ group | TRANSACTIONAL_ID_ / GROUP_AUTHORIZATION_FAILED |
| EndTxn | WRITE transactional id | TRANSACTIONAL_ID_AUTHORIZATION_FAILED |
| DescribeLogDirs | DESCRIBE cluster | CLUSTER_AUTHORIZATION_FAILED (v3+), nothing listed |
| CreateAcls, DeleteAcls / DescribeAcls | ALTER / DESCRIBE cluster | CLUSTER_AUTHORIZATION_FAILED |
| DescribeCluster | nothing (its cluster `authorized_operations` become real: 0 without DESCRIBE cluster) | |
| DescribeTopicPartitions | DESCRIBE topic (an every-topic listing filtered) | TOPIC_AUTHORIZATION_FAILED per named topic |
| ElectLeaders, AlterPartitionReassignments | ALTER cluster | CLUSTER_AUTHORIZATION_FAILED (per partition too) |
| ListPartitionReassignments, DescribeQuorum | DESCRIBE cluster | CLUSTER_AUTHORIZATION_FAILED |
| ListConfigResources | DESCRIBE_CONFIGS cluster | CLUSTER_AUTHORIZATION_FAILED |
| DescribeClientQuotas / AlterClientQuotas | DESCRIBE_CONFIGS / ALTER_CONFIGS cluster | CLUSTER_AUTHORIZATION_FAILED |
| DescribeUserScramCredentials / AlterUserScramCredentials | DESCRIBE / ALTER cluster | CLUSTER_AUTHORIZATION_FAILED |
| DescribeTransactions | DESCRIBE transactional id | TRANSACTIONAL_ID_AUTHORIZATION_FAILED per id |
| ListTransactions | DESCRIBE transactional id | (filtered) |
| DescribeProducers | READ topic | TOPIC_AUTHORIZATION_FAILED per partition |
| WriteTxnMarkers | CLUSTER_ACTION cluster | CLUSTER_AUTHORIZATION_FAILED per partition |
| DescribeConfigs / IncrementalAlterConfigs of broker loggers and client metrics | DESCRIBE_CONFIGS / ALTER_CONFIGS cluster | CLUSTER_AUTHORIZATION_FAILED |
| GetTelemetrySubscriptions, PushTelemetry | nothing (a client's own metrics) | |
| ApiVersions, SaslHandshake, SaslAuthenticate | nothing | |
"""

from __future__ import annotations

import typing
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pybroker.broker.dispatch import HandlerSpec
from pybroker.broker.handlers.alter_replica_log_dirs import answer_all as _alter_replica_log_dirs_answer
from pybroker.broker.metrics.names import api_name
from pybroker.broker.security.acls import (
    CLUSTER_NAME,
    AclOperation,
)
from pybroker.broker.security.authorizer import host_of
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    RESPONSES,
    alter_configs,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_topic_partitions,
    elect_leaders,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    join_group,
    leave_group,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sync_group,
    txn_offset_commit,
)

if TYPE_CHECKING:
    from pybroker.broker.context import RequestContext

from pybroker.broker.security.authorization_check import (
    CLUSTER,
    CLUSTER_DENIED,
    CONFIG_BROKER,
    CONFIG_BROKER_LOGGER,
    CONFIG_CLIENT_METRICS,
    CONFIG_TOPIC,
    FIRST_TOPIC_ID_FETCH_VERSION,
    GROUP,
    GROUP_DENIED,
    TOPIC,
    TOPIC_DENIED,
    TXN,
    TXN_DENIED,
    UNSET_OPERATIONS,
    Check,
    Merge,
    Op,
    Outcome,
    appending,
    per_topic,
    split_by,
    then,
)
from pybroker.broker.security.authorization_consumer_groups import (
    consumer_group_describe_rule,
    consumer_group_heartbeat_rule,
)
from pybroker.broker.security.authorization_txn import (
    add_offsets_to_txn_rule,
    add_partitions_to_txn_rule,
    describe_producers_rule,
    describe_transactions_rule,
    end_txn_rule,
    init_producer_id_rule,
    list_transactions_rule,
    write_txn_markers_rule,
)


def call(spec: HandlerSpec, ctx: RequestContext, request: Any) -> Any:
    """Run `spec`'s handler for `request` as far as the authorizer allows (see the module docstring)."""
    authorizer = ctx.state.authorizer
    rule = RULES.get(ctx.api_key)
    if authorizer is None or rule is None:
        return spec.fn(ctx, request)
    check = Check(authorizer, ctx.principal, host_of(ctx.peer), ctx.api_version, ctx.state, api_name(ctx.api_key))
    outcome = rule(check, request)
    if outcome is None:
        return spec.fn(ctx, request)
    if not callable(outcome):
        return outcome
    return then(spec.fn(ctx, request), outcome)


def _produce(check: Check, r: produce.ProduceRequest) -> Outcome:
    def entry(t: Any, code: int = TOPIC_DENIED) -> Any:
        return produce.TopicProduceResponse(name=t.name, partition_responses=[
            produce.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1)
            for p in t.partition_data])

    if r.transactional_id is not None and not check.ok(Op.WRITE, TXN, r.transactional_id):
        if r.acks == 0:
            return None if not r.topic_data else _drop_all(r, "topic_data")
        return produce.ProduceResponse(responses=[entry(t, TXN_DENIED) for t in r.topic_data])
    uncreatable = _creation_refused(check, [t.name for t in r.topic_data])  # a Produce auto-creates too
    return per_topic(check, r, "topic_data", Op.WRITE, entry, "responses", refused=uncreatable)


def _creation_refused(check: Check, names: list[str | None]) -> set[str]:
    """The names auto-creation would create that the principal may not CREATE (on the cluster or topic)."""
    missing = check.state.topics.to_auto_create(names)
    if not missing or check.cluster(Op.CREATE, quiet=True):
        return set()
    return {name for name in missing if not check.ok(Op.CREATE, TOPIC, name)}


def _drop_all(request: Any, attr: str) -> Merge:
    setattr(request, attr, [])
    return lambda response: response


def _fetch(check: Check, r: fetch.FetchRequest) -> Outcome:
    by_id = check.version >= FIRST_TOPIC_ID_FETCH_VERSION
    follower = max(r.replica_id, r.replica_state.replica_id) >= 0
    if follower and check.cluster(Op.CLUSTER_ACTION):
        return None  # a replica's fetch needs CLUSTER_ACTION instead of READ on each topic

    def name_of(t: Any) -> str | None:
        if not by_id:
            return str(t.topic)
        info = check.state.logs.topic_by_id(t.topic_id)
        return None if info is None else str(info.name)  # an unknown id is the handler's UNKNOWN_TOPIC_ID

    def entry(t: Any) -> Any:
        return fetch.FetchableTopicResponse(topic=name_of(t) or "", topic_id=t.topic_id, partitions=[
            fetch.PartitionData(partition_index=p.partition, error_code=TOPIC_DENIED, high_watermark=-1,
                                last_stable_offset=-1, log_start_offset=-1, records=b"")
            for p in t.partitions])

    if follower:  # and not allowed to replicate: every partition refused
        refused = [entry(t) for t in r.topics]
        r.topics = []
        return appending("responses", refused)
    return per_topic(check, r, "topics", Op.READ, entry, "responses", name_of)


def _list_offsets(check: Check, r: list_offsets.ListOffsetsRequest) -> Outcome:
    def entry(t: Any) -> Any:
        return list_offsets.ListOffsetsTopicResponse(name=t.name, partitions=[
            list_offsets.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=TOPIC_DENIED)
            for p in t.partitions])
    return per_topic(check, r, "topics", Op.DESCRIBE, entry, "topics")


def _offset_for_leader_epoch(check: Check, r: offset_for_leader_epoch.OffsetForLeaderEpochRequest) -> Outcome:
    def entry(t: Any) -> Any:
        return offset_for_leader_epoch.OffsetForLeaderTopicResult(topic=t.topic, partitions=[
            offset_for_leader_epoch.EpochEndOffset(partition=p.partition, error_code=TOPIC_DENIED)
            for p in t.partitions])
    return per_topic(check, r, "topics", Op.DESCRIBE, entry, "topics", lambda t: t.topic)


def _delete_records(check: Check, r: delete_records.DeleteRecordsRequest) -> Outcome:
    def entry(t: Any) -> Any:
        return delete_records.DeleteRecordsTopicResult(name=t.name, partitions=[
            delete_records.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                                        error_code=TOPIC_DENIED)
            for p in t.partitions])
    return per_topic(check, r, "topics", Op.DELETE, entry, "topics")


def _create_partitions(check: Check, r: create_partitions.CreatePartitionsRequest) -> Outcome:
    def entry(t: Any) -> Any:
        return create_partitions.CreatePartitionsTopicResult(name=t.name, error_code=TOPIC_DENIED,
                                                             error_message="not authorized to alter the topic")
    return per_topic(check, r, "topics", Op.ALTER, entry, "results")


def _create_topics(check: Check, r: create_topics.CreateTopicsRequest) -> Outcome:
    def entry(t: Any) -> Any:
        return create_topics.CreatableTopicResult(name=t.name, error_code=TOPIC_DENIED,
                                                  error_message="not authorized to create the topic")

    denied = None if check.cluster(Op.CREATE, quiet=True) else per_topic(
        check, r, "topics", Op.CREATE, entry, "topics")

    def merge(response: Any) -> Any:
        # v5+ answers carry the new topic's configs: only to whom may DESCRIBE_CONFIGS it (Kafka's rule)
        for result in response.topics:
            if result.configs and not check.ok(Op.DESCRIBE_CONFIGS, TOPIC, result.name, quiet=True):
                result.topic_config_error_code, result.configs = TOPIC_DENIED, None
        return denied(response) if denied is not None else response
    return merge


def _delete_topics(check: Check, r: delete_topics.DeleteTopicsRequest) -> Outcome:
    if check.version < 6:
        kept, denied = split_by(r.topic_names, lambda n: check.ok(Op.DELETE, TOPIC, n))
        if not denied:
            return None
        r.topic_names = kept
        return appending("responses", [delete_topics.DeletableTopicResult(name=n, error_code=TOPIC_DENIED)
                                        for n in denied])

    def name_of(t: Any) -> str | None:
        if t.name is not None:
            return str(t.name)
        info = check.state.logs.topic_by_id(t.topic_id)
        return None if info is None else str(info.name)

    def entry(t: Any) -> Any:
        return delete_topics.DeletableTopicResult(name=t.name, topic_id=t.topic_id, error_code=TOPIC_DENIED)
    return per_topic(check, r, "topics", Op.DELETE, entry, "responses", name_of)


# -- configs: topics need the topic's permission, the broker the cluster's -----------------------
def _config_rule(op: AclOperation, result_cls: Any, resp_attr: str, req_attr: str = "resources") -> Any:
    def rule(check: Check, r: Any) -> Outcome:
        def allowed(res: Any) -> bool:
            if res.resource_type == CONFIG_TOPIC:
                return check.ok(op, TOPIC, res.resource_name)
            if res.resource_type in (CONFIG_BROKER, CONFIG_BROKER_LOGGER, CONFIG_CLIENT_METRICS):
                return check.cluster(op)
            return True  # the handler answers an unknown resource type

        kept, denied = split_by(getattr(r, req_attr), allowed)
        if not denied:
            return None
        setattr(r, req_attr, kept)
        return appending(resp_attr, [result_cls(
            error_code=TOPIC_DENIED if res.resource_type == CONFIG_TOPIC else CLUSTER_DENIED,
            error_message="not authorized", resource_type=res.resource_type, resource_name=res.resource_name)
            for res in denied])
    return rule


# -- groups ----------------------------------------------------------------------------------------
def _whole_group(op: AclOperation, response: Callable[[Any], Any]) -> Any:
    """A request about one group: refused whole when the group is denied."""
    def rule(check: Check, r: Any) -> Outcome:
        return None if check.ok(op, GROUP, r.group_id) else response(r)
    return rule


def _offset_commit(check: Check, r: offset_commit.OffsetCommitRequest) -> Outcome:
    def entry(t: Any, code: int = TOPIC_DENIED) -> Any:
        return offset_commit.OffsetCommitResponseTopic(name=t.name, partitions=[
            offset_commit.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions])

    if not check.ok(Op.READ, GROUP, r.group_id):
        return offset_commit.OffsetCommitResponse(topics=[entry(t, GROUP_DENIED) for t in r.topics])
    return per_topic(check, r, "topics", Op.READ, entry, "topics")


def _txn_offset_commit(check: Check, r: txn_offset_commit.TxnOffsetCommitRequest) -> Outcome:
    """Kafka's order: the transactional id, then the group, each refusing the whole request; then topics."""
    def entry(t: Any, code: int = TOPIC_DENIED) -> Any:
        return txn_offset_commit.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            txn_offset_commit.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions])

    if not check.ok(Op.WRITE, TXN, r.transactional_id):
        return txn_offset_commit.TxnOffsetCommitResponse(topics=[entry(t, TXN_DENIED) for t in r.topics])
    if not check.ok(Op.READ, GROUP, r.group_id):
        return txn_offset_commit.TxnOffsetCommitResponse(topics=[entry(t, GROUP_DENIED) for t in r.topics])
    return per_topic(check, r, "topics", Op.READ, entry, "topics")


def _offset_delete(check: Check, r: offset_delete.OffsetDeleteRequest) -> Outcome:
    if not check.ok(Op.DELETE, GROUP, r.group_id):
        return offset_delete.OffsetDeleteResponse(error_code=GROUP_DENIED)

    def entry(t: Any) -> Any:
        return offset_delete.OffsetDeleteResponseTopic(name=t.name, partitions=[
            offset_delete.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=TOPIC_DENIED)
            for p in t.partitions])
    return per_topic(check, r, "topics", Op.READ, entry, "topics")


def _offset_fetch(check: Check, r: offset_fetch.OffsetFetchRequest) -> Outcome:
    if check.version >= 8:
        return _offset_fetch_groups(check, r)
    if not check.ok(Op.DESCRIBE, GROUP, r.group_id):
        return offset_fetch.OffsetFetchResponse(error_code=GROUP_DENIED, topics=[
            offset_fetch.OffsetFetchResponseTopic(name=t.name, partitions=[
                offset_fetch.OffsetFetchResponsePartition(partition_index=i, committed_offset=-1, metadata="",
                                                          error_code=GROUP_DENIED)
                for i in t.partition_indexes]) for t in (r.topics or [])])
    if r.topics is None:  # every committed topic: list only those it may describe
        def visible(response: Any) -> Any:
            response.topics = [t for t in response.topics if check.ok(Op.DESCRIBE, TOPIC, t.name, quiet=True)]
            return response
        return visible

    def entry(t: Any) -> Any:
        return offset_fetch.OffsetFetchResponseTopic(name=t.name, partitions=[
            offset_fetch.OffsetFetchResponsePartition(partition_index=i, committed_offset=-1, metadata="",
                                                      error_code=TOPIC_DENIED) for i in t.partition_indexes])
    return per_topic(check, r, "topics", Op.DESCRIBE, entry, "topics")


def _offset_fetch_groups(check: Check, r: offset_fetch.OffsetFetchRequest) -> Outcome:
    kept, denied = split_by(r.groups, lambda g: check.ok(Op.DESCRIBE, GROUP, g.group_id))
    r.groups = kept
    extra: dict[str, list[Any]] = {}
    for group in kept:
        if group.topics is None:
            continue
        group.topics, gone = split_by(group.topics, lambda t: check.ok(Op.DESCRIBE, TOPIC, t.name))
        extra[group.group_id] = [offset_fetch.OffsetFetchResponseTopics(name=t.name, partitions=[
            offset_fetch.OffsetFetchResponsePartitions(partition_index=i, committed_offset=-1, metadata="",
                                                       error_code=TOPIC_DENIED) for i in t.partition_indexes])
            for t in gone]

    def merge(response: Any) -> Any:
        for group in response.groups:
            if group.group_id in extra:
                group.topics.extend(extra[group.group_id])
            else:  # all topics: only those it may describe
                group.topics = [t for t in group.topics if check.ok(Op.DESCRIBE, TOPIC, t.name, quiet=True)]
        response.groups.extend(offset_fetch.OffsetFetchResponseGroup(group_id=g.group_id, error_code=GROUP_DENIED)
                               for g in denied)
        return response
    return merge


def _describe_groups(check: Check, r: describe_groups.DescribeGroupsRequest) -> Outcome:
    kept, denied = split_by(r.groups, lambda g: check.ok(Op.DESCRIBE, GROUP, g))
    r.groups = kept
    include_ops = bool(r.include_authorized_operations)

    def merge(response: Any) -> Any:
        if include_ops:
            for group in response.groups:
                group.authorized_operations = check.operations(GROUP, group.group_id)
        response.groups.extend(describe_groups.DescribedGroup(error_code=GROUP_DENIED, group_id=g)
                               for g in denied)
        return response
    return merge


def _delete_groups(check: Check, r: delete_groups.DeleteGroupsRequest) -> Outcome:
    kept, denied = split_by(r.groups_names, lambda g: check.ok(Op.DELETE, GROUP, g))
    if not denied:
        return None
    r.groups_names = kept
    return appending("results", [delete_groups.DeletableGroupResult(group_id=g, error_code=GROUP_DENIED)
                                  for g in denied])


def _list_groups(check: Check, r: Any) -> Outcome:
    if check.cluster(Op.DESCRIBE, quiet=True):
        return None

    def visible(response: Any) -> Any:
        response.groups = [g for g in response.groups if check.ok(Op.DESCRIBE, GROUP, g.group_id, quiet=True)]
        return response
    return visible


def _find_coordinator(check: Check, r: find_coordinator.FindCoordinatorRequest) -> Outcome:
    resource, code = (TXN, TXN_DENIED) if r.key_type == 1 else (GROUP, GROUP_DENIED)
    if check.version < 4:
        if check.ok(Op.DESCRIBE, resource, r.key):
            return None
        return find_coordinator.FindCoordinatorResponse(error_code=code, error_message="not authorized",
                                                        node_id=-1, host="", port=-1)
    kept, denied = split_by(r.coordinator_keys, lambda k: check.ok(Op.DESCRIBE, resource, k))
    if not denied:
        return None
    r.coordinator_keys = kept
    return appending("coordinators", [find_coordinator.Coordinator(
        key=k, node_id=-1, host="", port=-1, error_code=code, error_message="not authorized") for k in denied])


# -- metadata: list what it may describe; auto-create only with CREATE -----------------------------
def _metadata(check: Check, r: Any) -> Outcome:
    named = r.topics is not None and not (check.version == 0 and not r.topics)
    auto_create = r.allow_auto_topic_creation or check.version < 4
    blocked: list[str] = []
    if named and auto_create:
        uncreatable = _creation_refused(check, [t.name for t in r.topics])
        blocked = list(dict.fromkeys(t.name for t in r.topics if t.name in uncreatable))
        r.topics = [t for t in r.topics if t.name not in uncreatable]
    # v0 reads an empty list as "every topic": when every named topic was refused, list none of them
    emptied_v0 = named and check.version == 0 and not r.topics
    asked_by_id = {t.topic_id for t in r.topics if t.name is None} if named else set()
    include_topic_ops = bool(r.include_topic_authorized_operations)
    include_cluster_ops = bool(getattr(r, "include_cluster_authorized_operations", False))

    def merge(response: Any) -> Any:
        topics = []
        for t in response.topics:
            if emptied_v0:
                continue
            if t.name is None or check.ok(Op.DESCRIBE, TOPIC, t.name, quiet=not named):
                if include_topic_ops and t.name is not None and not t.error_code:
                    t.topic_authorized_operations = check.operations(TOPIC, t.name)
                topics.append(t)
            elif named:  # refused without saying more than was asked: a name asked by id stays unsaid
                t.error_code, t.partitions = TOPIC_DENIED, []
                if t.topic_id in asked_by_id:
                    t.name = None
                else:
                    t.topic_id = uuid.UUID(int=0)
                t.topic_authorized_operations = UNSET_OPERATIONS
                topics.append(t)
        topics.extend(metadata.MetadataResponseTopic(error_code=TOPIC_DENIED, name=name, partitions=[])
                      for name in blocked)
        response.topics = topics
        if include_cluster_ops:
            response.cluster_authorized_operations = check.operations(CLUSTER, CLUSTER_NAME)
        return response
    return merge


def _describe_log_dirs(check: Check, r: Any) -> Outcome:
    if check.cluster(Op.DESCRIBE):
        return None
    return describe_log_dirs.DescribeLogDirsResponse(error_code=CLUSTER_DENIED, results=[])


def _cluster_only(op: AclOperation, refuse: Callable[[Any], Any]) -> Any:
    def rule(check: Check, r: Any) -> Outcome:
        return None if check.cluster(op) else refuse(r)
    return rule


# -- APIs other parts of issue 12 add (quotas, SCRAM users): their codecs may not exist in every build ----
DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51


def _element(cls: Any, attr: str) -> Any:
    """The dataclass of the list field `attr` of a generated message class."""
    return typing.get_args(typing.get_type_hints(cls)[attr])[0]


def _top_level_refusal(api_key: int) -> Callable[[Any], Any]:
    def build(r: Any) -> Any:
        response = RESPONSES[api_key]()
        response.error_code = CLUSTER_DENIED
        if hasattr(response, "error_message"):
            response.error_message = "not authorized"
        return response
    return build


def _alter_client_quotas_refusal(r: Any) -> Any:
    """Every entry refused, naming its entity, as Kafka answers without ALTER_CONFIGS on the cluster."""
    cls = RESPONSES[ALTER_CLIENT_QUOTAS]
    entry_cls = _element(cls, "entries")
    entity_cls = _element(entry_cls, "entity")
    return cls(entries=[entry_cls(error_code=CLUSTER_DENIED, error_message="not authorized", entity=[
        entity_cls(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry in r.entries])


def _alter_scram_refusal(r: Any) -> Any:
    """One refused result per user named, as Kafka answers without ALTER on the cluster."""
    cls = RESPONSES[ALTER_USER_SCRAM_CREDENTIALS]
    result_cls = _element(cls, "results")
    users = dict.fromkeys(u.name for u in (*r.deletions, *r.upsertions))
    return cls(results=[result_cls(user=u, error_code=CLUSTER_DENIED, error_message="not authorized")
                        for u in users])


def _describe_cluster(check: Check, r: Any) -> Outcome:
    if not r.include_cluster_authorized_operations:
        return None

    def merge(response: Any) -> Any:
        # Kafka: the bit set only for whom may DESCRIBE the cluster, else 0
        response.cluster_authorized_operations = check.operations(CLUSTER, CLUSTER_NAME) \
            if check.cluster(Op.DESCRIBE, quiet=True) else 0
        return response
    return merge


def _describe_topic_partitions(check: Check, r: describe_topic_partitions.DescribeTopicPartitionsRequest) -> Outcome:
    denied: list[str] = []
    if r.topics:  # named: a denied topic is answered as such, with no id
        names = list(dict.fromkeys(t.name for t in r.topics))
        kept, denied = split_by(names, lambda n: check.ok(Op.DESCRIBE, TOPIC, n))
        cursor = r.cursor
        if cursor is not None and cursor.topic_name in denied:
            # Kafka starts at the next topic it may describe, from its first partition
            following = sorted(n for n in kept if n > cursor.topic_name)
            kept = following
            r.cursor = None if not following else describe_topic_partitions.DescribeTopicPartitionsRequestCursor(
                topic_name=following[0], partition_index=0)
        r.topics = [describe_topic_partitions.TopicRequest(name=n) for n in kept]
        if not kept:  # nothing left to ask: an empty list would mean every topic ("" answers an error, dropped)
            r.topics = [describe_topic_partitions.TopicRequest(name="")]

    def merge(response: Any) -> Any:
        listed = []
        for t in response.topics:
            if t.error_code == 0 and not check.ok(Op.DESCRIBE, TOPIC, t.name, quiet=True):
                continue  # an every-topic listing shows only what the principal may describe
            if t.error_code == 0:
                t.topic_authorized_operations = check.operations(TOPIC, t.name)
            if t.name or t.error_code == 0:
                listed.append(t)
        listed.extend(describe_topic_partitions.DescribeTopicPartitionsResponseTopic(
            error_code=TOPIC_DENIED, name=n, partitions=[]) for n in denied)
        response.topics = listed
        return response
    return merge


def _elect_leaders_refusal(r: elect_leaders.ElectLeadersRequest) -> Any:
    return elect_leaders.ElectLeadersResponse(error_code=CLUSTER_DENIED, replica_election_results=[
        elect_leaders.ReplicaElectionResult(topic=t.topic, partition_result=[
            elect_leaders.PartitionResult(partition_id=p, error_code=CLUSTER_DENIED, error_message=None)
            for p in t.partitions]) for t in r.topic_partitions or []])


_DENIED_ACL = {"error_code": CLUSTER_DENIED, "error_message": "not authorized to alter ACLs"}

RULES: dict[int, Callable[[Check, Any], Outcome]] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.METADATA: _metadata,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _whole_group(Op.READ, lambda r: join_group.JoinGroupResponse(
        error_code=GROUP_DENIED, generation_id=-1, member_id="")),
    ApiKey.HEARTBEAT: _whole_group(Op.READ, lambda r: heartbeat.HeartbeatResponse(error_code=GROUP_DENIED)),
    ApiKey.LEAVE_GROUP: _whole_group(Op.READ, lambda r: leave_group.LeaveGroupResponse(error_code=GROUP_DENIED)),
    ApiKey.SYNC_GROUP: _whole_group(Op.READ, lambda r: sync_group.SyncGroupResponse(error_code=GROUP_DENIED)),
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_group_heartbeat_rule,
    ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_group_describe_rule,
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.DELETE_RECORDS: _delete_records,
    ApiKey.INIT_PRODUCER_ID: init_producer_id_rule,
    ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn_rule,
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn_rule,
    ApiKey.END_TXN: end_txn_rule,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.DESCRIBE_CONFIGS: _config_rule(Op.DESCRIBE_CONFIGS, describe_configs.DescribeConfigsResult, "results"),
    ApiKey.ALTER_CONFIGS: _config_rule(Op.ALTER_CONFIGS, alter_configs.AlterConfigsResourceResponse, "responses"),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _config_rule(Op.ALTER_CONFIGS, incremental_alter_configs.AlterConfigsResourceResponse, "responses"),
    ApiKey.DESCRIBE_LOG_DIRS: _describe_log_dirs,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.CREATE_ACLS: _cluster_only(Op.ALTER, lambda r: create_acls.CreateAclsResponse(results=[
        create_acls.AclCreationResult(**_DENIED_ACL) for _ in r.creations])),
    ApiKey.DESCRIBE_ACLS: _cluster_only(Op.DESCRIBE, lambda r: describe_acls.DescribeAclsResponse(
        error_code=CLUSTER_DENIED, error_message="not authorized to describe ACLs")),
    ApiKey.DELETE_ACLS: _cluster_only(Op.ALTER, lambda r: delete_acls.DeleteAclsResponse(filter_results=[
        delete_acls.DeleteAclsFilterResult(**_DENIED_ACL) for _ in r.filters])),
    ApiKey.DESCRIBE_CLUSTER: _describe_cluster,
    ApiKey.DESCRIBE_TRANSACTIONS: describe_transactions_rule,
    ApiKey.LIST_TRANSACTIONS: list_transactions_rule,
    ApiKey.DESCRIBE_PRODUCERS: describe_producers_rule,
    ApiKey.WRITE_TXN_MARKERS: write_txn_markers_rule,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _describe_topic_partitions,
    ApiKey.ELECT_LEADERS: _cluster_only(Op.ALTER, _elect_leaders_refusal),
    ApiKey.ALTER_REPLICA_LOG_DIRS: _cluster_only(Op.ALTER, lambda r: _alter_replica_log_dirs_answer(r, CLUSTER_DENIED)),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _cluster_only(Op.ALTER,
                                                        _top_level_refusal(ApiKey.ALTER_PARTITION_REASSIGNMENTS)),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _cluster_only(Op.DESCRIBE,
                                                       _top_level_refusal(ApiKey.LIST_PARTITION_REASSIGNMENTS)),
    ApiKey.DESCRIBE_QUORUM: _cluster_only(Op.DESCRIBE, _top_level_refusal(ApiKey.DESCRIBE_QUORUM)),
    ApiKey.LIST_CONFIG_RESOURCES: _cluster_only(Op.DESCRIBE_CONFIGS, _top_level_refusal(ApiKey.LIST_CONFIG_RESOURCES)),
    DESCRIBE_CLIENT_QUOTAS: _cluster_only(Op.DESCRIBE_CONFIGS, _top_level_refusal(DESCRIBE_CLIENT_QUOTAS)),
    ALTER_CLIENT_QUOTAS: _cluster_only(Op.ALTER_CONFIGS, _alter_client_quotas_refusal),
    DESCRIBE_USER_SCRAM_CREDENTIALS: _cluster_only(Op.DESCRIBE, _top_level_refusal(DESCRIBE_USER_SCRAM_CREDENTIALS)),
    ALTER_USER_SCRAM_CREDENTIALS: _cluster_only(Op.ALTER, _alter_scram_refusal),
}

#: APIs that need no permission at all: version discovery and authentication itself
UNCHECKED = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
                       ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY})
