"""DescribeQuorum (key 55), versions 0-2: the KRaft quorum a single node is, with itself as its only voter.

Kafka answers this for its `__cluster_metadata` partition 0, and so do we: the node is a one-voter
quorum, its only voter and leader, no observers, at the live metadata log's leader epoch
(`broker/live_metadata.py`: 1 for a log pybroker began, Kafka's last for one it went on from). The high
watermark and the voter's log end offset are both the log's end offset, as a caught-up single voter's
are (0 and epoch 1 before the log is open). v1 adds the voter's timestamps (the leader's
last fetch is -1 and its last caught-up time is now, as Kafka reports its leader); v2 the voter's
directory id (the first log dir's `directory.id`) and the voter's listeners (every listener we serve,
with its advertised address).

Anything but exactly one topic `__cluster_metadata` with exactly partition 0 is answered with a
top-level UNKNOWN_TOPIC_OR_PARTITION, as Kafka's raft client does.

Authorizes: DESCRIBE on the cluster; refused with a top-level CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_check import Op
from pybroker.broker.security.authorization_cluster import cluster_only, top_level_refusal
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.describe_quorum import (
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeQuorumResponsePartitionData,
    DescribeQuorumResponseTopicData,
    Listener,
    Node,
    ReplicaState,
)
from pybroker.storage.log_dir import read_meta_properties

METADATA_TOPIC = "__cluster_metadata"
LEADER_EPOCH = 1
_directory_ids: dict[Path, uuid.UUID] = {}


def _directory_id(directory: Path) -> uuid.UUID:
    """The dir's `directory.id` (Kafka's base64 text) as a uuid, read once; the zero uuid if unreadable."""
    known = _directory_ids.get(directory)
    if known is None:
        try:
            text = (read_meta_properties(directory) or {}).get("directory.id", "")
            known = uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        except (OSError, ValueError):
            known = uuid.UUID(int=0)
        _directory_ids[directory] = known
    return known


def _asks_for_the_metadata_partition(request: DescribeQuorumRequest) -> bool:
    return (len(request.topics) == 1 and request.topics[0].topic_name == METADATA_TOPIC
            and len(request.topics[0].partitions) == 1 and request.topics[0].partitions[0].partition_index == 0)


@handler(ApiKey.DESCRIBE_QUORUM, versions=(0, 2),
         authorize=cluster_only(Op.DESCRIBE, top_level_refusal(ApiKey.DESCRIBE_QUORUM)))
def handle_describe_quorum(ctx: RequestContext, request: DescribeQuorumRequest) -> DescribeQuorumResponse:
    state = ctx.state
    if not request.topics:  # nothing asked, nothing answered: Kafka's raft client answers so too
        return DescribeQuorumResponse(error_code=ErrorCode.NONE, error_message=None, topics=[])
    if not _asks_for_the_metadata_partition(request):
        return DescribeQuorumResponse(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      error_message="The request names no partition of this quorum.", topics=[])
    node = state.node_id
    metadata_log = getattr(getattr(state, "metadata", None), "log", None)
    end_offset = 0 if metadata_log is None else metadata_log.end_offset
    epoch = LEADER_EPOCH if metadata_log is None else metadata_log.epoch
    voter = ReplicaState(replica_id=node, replica_directory_id=_directory_id(Path(state.config.log_dirs[0])),
                         log_end_offset=end_offset, last_fetch_timestamp=-1, last_caught_up_timestamp=state.clock_ms())
    return DescribeQuorumResponse(error_code=ErrorCode.NONE, error_message=None, topics=[
        DescribeQuorumResponseTopicData(topic_name=METADATA_TOPIC, partitions=[DescribeQuorumResponsePartitionData(
            partition_index=0, error_code=ErrorCode.NONE, error_message=None, leader_id=node,
            leader_epoch=epoch, high_watermark=end_offset, current_voters=[voter], observers=[])])],
        nodes=[Node(node_id=node, listeners=[Listener(name=name, host=host or "127.0.0.1", port=port)
                                             for name, (host, port) in state.advertised.items()])])
