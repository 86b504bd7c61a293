"""DescribeLogDirs (key 35), versions 0-4: each log dir with its partitions' sizes (and, v4, its space).

A null topic list means every partition. A partition moving to another dir (AlterReplicaLogDirs) is also
listed under its target dir as a future replica (`is_future_key`), with the size copied so far and its
offset lag (the current log's end minus the copy's), as Kafka lists its future logs; a current replica's
lag is 0.
"""

from __future__ import annotations

import os
from pathlib import Path

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_cluster import describe_log_dirs_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)


def _space(directory: Path) -> tuple[int, int]:
    try:
        stats = os.statvfs(directory)
    except OSError:
        return -1, -1
    return stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize


@handler(ApiKey.DESCRIBE_LOG_DIRS, versions=(0, 4), authorize=describe_log_dirs_rule)
def handle_describe_log_dirs(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    logs = ctx.state.logs
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    offline = logs.offline_dirs
    futures = logs.moves.futures()
    results = []
    for directory in logs.dirs:
        by_topic: dict[str, list[DescribeLogDirsPartition]] = {}
        if directory not in offline:
            for log in logs.logs():
                key = (log.topic, log.partition)
                if logs.dir_of(*key) != directory or (wanted is not None and key not in wanted):
                    continue
                by_topic.setdefault(log.topic, []).append(DescribeLogDirsPartition(
                    partition_index=log.partition, partition_size=log.size_bytes, offset_lag=0,
                    is_future_key=False))
            for future in futures:
                key = (future.topic, future.partition)
                if future.log_dir == directory and (wanted is None or key in wanted):
                    by_topic.setdefault(future.topic, []).append(DescribeLogDirsPartition(
                        partition_index=future.partition, partition_size=future.size,
                        offset_lag=future.offset_lag, is_future_key=True))
        total, usable = _space(directory)
        results.append(DescribeLogDirsResult(
            error_code=ErrorCode.KAFKA_STORAGE_ERROR if directory in offline else ErrorCode.NONE,
            log_dir=str(directory), total_bytes=total, usable_bytes=usable,
            topics=[DescribeLogDirsTopic(name=name, partitions=sorted(parts, key=lambda p: (p.partition_index, p.is_future_key)))
                    for name, parts in sorted(by_topic.items())]))
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)
