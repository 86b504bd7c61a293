"""What every served API must be allowed: Kafka's request-handler checks, not `if`s in handlers.

Each handler module chooses its API's rule where it registers (`@handler(..., authorize=rule)`, see
`broker.dispatch`); the rules shared by several APIs live in `authorization_check` (the pieces),
`authorization_topics`, `authorization_groups`, `authorization_consumer_groups`, `authorization_txn` and
`authorization_cluster`. `rules()` is the table built from the handler registry, as ApiVersions is, so an
API cannot be served without the rule it declared; `unchecked()` lists the APIs declared `anyone`.

`call(spec, ctx, request)` runs a handler under the authorizer, on the event loop (a connection's request,
or the console's in-process client). Without an authorizer (`authorizer.class.name` unset) it calls the
handler unchanged. With one, the rule `spec.authorize` looks at the request and answers one of:

- None: everything the request touches is allowed; the handler runs as it is;
- a response: the whole request is refused (a group, the cluster or a transactional id it needs is
  denied); the handler never runs;
- a merge function: the rule removed the denied entries (topics, groups, resources) from the request, the
  handler serves the rest, and the merge adds the denied entries back to its answer, each with its own
  error code: a denied topic in a multi-topic Produce fails alone while the others succeed, as in Kafka.

Merges also filter what a listing may show (Metadata and OffsetFetch list only topics the principal may
DESCRIBE, ListGroups only groups) and fill in the `authorized_operations` bit sets clients ask for.

The operations and error codes are those of Kafka's KafkaApis / AuthHelper (docs/security.md has the
table for users):

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

from typing import TYPE_CHECKING, Any

from pybroker.broker.dispatch import REGISTRY, HandlerSpec, Rule
from pybroker.broker.metrics.names import api_name
from pybroker.broker.security.authorization_check import Check, anyone, then
from pybroker.broker.security.authorizer import host_of

if TYPE_CHECKING:
    from pybroker.broker.context import RequestContext


def call(spec: HandlerSpec, ctx: RequestContext, request: Any) -> Any:
    """Run `spec`'s handler for `request` as far as the authorizer allows (see the module docstring)."""
    authorizer = ctx.state.authorizer
    rule = spec.authorize
    if authorizer is None or rule is None or rule is anyone:
        return spec.fn(ctx, request)
    check = Check(authorizer, ctx.principal, host_of(ctx.peer), ctx.api_version, ctx.state, api_name(ctx.api_key))
    outcome = rule(check, request)
    if outcome is None:
        return spec.fn(ctx, request)
    if not callable(outcome):
        return outcome
    return then(spec.fn(ctx, request), outcome)


def rules() -> dict[int, Rule]:
    """Every registered API's rule, by API key (the APIs declared `anyone` excluded): the authorization table."""
    return {key: spec.authorize for key, spec in sorted(REGISTRY.items())
            if spec.authorize is not None and spec.authorize is not anyone}


def unchecked() -> frozenset[int]:
    """The registered APIs that need no permission at all (declared `anyone`): version discovery,
    authentication itself, and a client's own telemetry."""
    return frozenset(key for key, spec in REGISTRY.items() if spec.authorize is anyone)
