"""AlterReplicaLogDirs (key 34), versions 1-2: move partitions between this broker's log dirs.

v1 is v0 again (Kafka 4 dropped v0), v2 is flexible. Each partition named under a dir path starts moving
there (`storage.log_mover`: a future replica is copied while the partition keeps serving produce and
fetch, then swapped in crash-safely); the answer comes at once, as Kafka's does, and DescribeLogDirs
lists the future replica (`is_future_key`) until the swap. Per partition, Kafka's codes: NONE (moving,
or already in that dir: nothing to do), LOG_DIR_NOT_FOUND (the path is not exactly one of this broker's
configured log dirs: no other path is ever touched), KAFKA_STORAGE_ERROR (that dir, or the partition's,
is offline), UNKNOWN_TOPIC_OR_PARTITION. A partition named under two dirs moves to the last one, as the
map Kafka builds from the request keeps the last.

Hostile input: the partitions named in all are capped by `max.partitions.per.request` (past it every
one is answered POLICY_VIOLATION and nothing moves); one move per partition (a new target replaces a
running copy, Kafka's rule); copies run one at a time on one thread, throttled by
`replica.alter.log.dirs.io.max.bytes.per.second`.

Authorizes: ALTER on the cluster; without it every partition is CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_check import CLUSTER_DENIED, Op
from pybroker.broker.security.authorization_cluster import cluster_only
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)
from pybroker.storage.errors import LogDirNotFoundError, LogDirOfflineError, StorageError, UnknownTopicError

#: why a partition did not start moving
_CODES: dict[type[StorageError], ErrorCode] = {
    LogDirNotFoundError: ErrorCode.LOG_DIR_NOT_FOUND,
    LogDirOfflineError: ErrorCode.KAFKA_STORAGE_ERROR,
    UnknownTopicError: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
}


def answer_all(request: AlterReplicaLogDirsRequest, code: int) -> AlterReplicaLogDirsResponse:
    """Every partition named answered `code` (a refusal of the whole request)."""
    return _response({(t.name, p): code for d in request.dirs for t in d.topics for p in t.partitions})


def _response(codes: dict[tuple[str, int], int]) -> AlterReplicaLogDirsResponse:
    by_topic: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
    for (topic, partition), code in codes.items():
        by_topic.setdefault(topic, []).append(
            AlterReplicaLogDirPartitionResult(partition_index=partition, error_code=code))
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
        AlterReplicaLogDirTopicResult(topic_name=name, partitions=parts) for name, parts in by_topic.items()])


@handler(ApiKey.ALTER_REPLICA_LOG_DIRS, versions=(1, 2),
         authorize=cluster_only(Op.ALTER, lambda r: answer_all(r, CLUSTER_DENIED)))
def handle_alter_replica_log_dirs(ctx: RequestContext,
                                  request: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
    state = ctx.state
    if state.topics.excessive(sum(len(t.partitions) for d in request.dirs for t in d.topics)):
        return answer_all(request, ErrorCode.POLICY_VIOLATION)
    wanted = {(t.name, p): d.path for d in request.dirs for t in d.topics for p in t.partitions}
    codes: dict[tuple[str, int], int] = {}
    for (topic, partition), path in wanted.items():
        try:
            state.logs.moves.move(topic, partition, path)
        except StorageError as exc:
            codes[(topic, partition)] = _CODES.get(type(exc), ErrorCode.KAFKA_STORAGE_ERROR)
        else:
            codes[(topic, partition)] = ErrorCode.NONE
    return _response(codes)
