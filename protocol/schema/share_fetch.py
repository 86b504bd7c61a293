"""ShareFetch (key 78), versions 1-2; flexible (KIP-932).

A share consumer's fetch: it names its group and member, its share session epoch (0 opens a session,
-1 closes it, otherwise the next epoch), and per partition the acknowledgements of records it was given
earlier (ranges of offsets, with one acknowledge type for the range or one per offset: 0 gap, 1 accept,
2 release, 3 reject, 4 renew). The answer carries, per partition, the records read and the offset ranges
it acquired for this member, each with its delivery count, and the acquisition lock's duration.

Version 0 was Kafka 4.0's early access, removed in 4.1 (with it the per-partition max bytes).
Version 2 (KIP-1206, KIP-1222) adds the acquire mode (0 batch-optimized: whole batches, `max_records`
a soft limit; 1 record-limit: never more than `max_records` records) and renew acknowledgements
(`is_renew_ack`: the request only renews locks and fetches nothing).
"""

from pybroker.protocol.schema.dsl import F, M

_ACKNOWLEDGEMENT_BATCH = [
    F("first_offset", "int64"),
    F("last_offset", "int64"),
    F("acknowledge_types", "[]int8"),
]

REQUEST = M("ShareFetchRequest", 78, "request", "1-2", "0+", [
    F("group_id", "string", nullable="0+", default=None),
    F("member_id", "string", nullable="0+"),
    F("share_session_epoch", "int32"),
    F("max_wait_ms", "int32"),
    F("min_bytes", "int32"),
    F("max_bytes", "int32", default=0x7FFFFFFF),
    F("max_records", "int32", "1+"),
    F("batch_size", "int32", "1+"),
    F("share_acquire_mode", "int8", "2+", default=0),
    F("is_renew_ack", "bool", "2+", default=False),
    F("topics", "[]ShareFetchTopic", fields=[
        F("topic_id", "uuid"),
        F("partitions", "[]ShareFetchPartition", fields=[
            F("partition_index", "int32"),
            F("acknowledgement_batches", "[]ShareFetchAcknowledgementBatch", fields=_ACKNOWLEDGEMENT_BATCH),
        ]),
    ]),
    F("forgotten_topics_data", "[]ShareForgottenTopic", fields=[
        F("topic_id", "uuid"),
        F("partitions", "[]int32"),
    ]),
])

_LEADER = [
    F("leader_id", "int32"),
    F("leader_epoch", "int32"),
]

_NODE_ENDPOINT = [
    F("node_id", "int32"),
    F("host", "string"),
    F("port", "int32"),
    F("rack", "string", nullable="0+", default=None),
]

RESPONSE = M("ShareFetchResponse", 78, "response", "1-2", "0+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("acquisition_lock_timeout_ms", "int32"),
    F("responses", "[]ShareFetchableTopicResponse", fields=[
        F("topic_id", "uuid"),
        F("partitions", "[]ShareFetchPartitionData", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
            F("acknowledge_error_code", "int16"),
            F("acknowledge_error_message", "string", nullable="0+", default=None),
            F("current_leader", "ShareFetchLeaderIdAndEpoch", fields=_LEADER),
            F("records", "records", default=b""),
            F("acquired_records", "[]ShareAcquiredRecords", fields=[
                F("first_offset", "int64"),
                F("last_offset", "int64"),
                F("delivery_count", "int16"),
            ]),
        ]),
    ]),
    F("node_endpoints", "[]ShareFetchNodeEndpoint", fields=_NODE_ENDPOINT),
])
