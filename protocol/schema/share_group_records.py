"""The share group's records in `__consumer_offsets` (KIP-932), from Kafka's group-coordinator record specs
(Kafka 4.4). As for the consumer and streams protocols' records, the key's int16 version says what the
record is: 10 a member's metadata (rack, client, subscription), 11 the group's epoch (and the hash of the
topics its assignment was computed from), 12 the target assignment's epoch, 13 a member's target
partitions, 14 a member's current assignment (its epoch, the one before, its state), 15 which topics'
share-partitions are initialized (or being deleted). (9, once the subscribed topics' metadata, is no
longer written.) Values are at version 0, flexible; a null value deletes the key.
"""

from pybroker.protocol.schema.dsl import F, M

_TOPIC_PARTITIONS = [F("topic_id", "uuid"), F("partitions", "[]int32")]

SHARE_GROUP_MEMBER_METADATA_KEY = M("ShareGroupMemberMetadataKey", None, "data", "10", "none", [
    F("group_id", "string", "10"),
    F("member_id", "string", "10"),
])

SHARE_GROUP_MEMBER_METADATA_VALUE = M("ShareGroupMemberMetadataValue", None, "data", "0", "0+", [
    F("rack_id", "string", nullable="0+", default=None),
    F("client_id", "string"),
    F("client_host", "string"),
    F("subscribed_topic_names", "[]string"),
])

SHARE_GROUP_METADATA_KEY = M("ShareGroupMetadataKey", None, "data", "11", "none", [
    F("group_id", "string", "11"),
])

SHARE_GROUP_METADATA_VALUE = M("ShareGroupMetadataValue", None, "data", "0", "0+", [
    F("epoch", "int32"),
    F("metadata_hash", "int64"),
])

SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = M(
    "ShareGroupTargetAssignmentMetadataKey", None, "data", "12", "none", [
        F("group_id", "string", "12"),
    ])

SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = M(
    "ShareGroupTargetAssignmentMetadataValue", None, "data", "0", "0+", [
        F("assignment_epoch", "int32"),
        F("assignment_timestamp", "int64", default=0, tag=0),
    ])

SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = M("ShareGroupTargetAssignmentMemberKey", None, "data", "13", "none", [
    F("group_id", "string", "13"),
    F("member_id", "string", "13"),
])

SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = M(
    "ShareGroupTargetAssignmentMemberValue", None, "data", "0", "0+", [
        F("topic_partitions", "[]TopicPartition", fields=_TOPIC_PARTITIONS),
    ])

SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = M(
    "ShareGroupCurrentMemberAssignmentKey", None, "data", "14", "none", [
        F("group_id", "string", "14"),
        F("member_id", "string", "14"),
    ])

SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = M(
    "ShareGroupCurrentMemberAssignmentValue", None, "data", "0", "0+", [
        F("member_epoch", "int32"),
        F("previous_member_epoch", "int32"),
        F("state", "int8"),
        F("assigned_partitions", "[]TopicPartitions", fields=_TOPIC_PARTITIONS),
    ])

SHARE_GROUP_STATE_PARTITION_METADATA_KEY = M(
    "ShareGroupStatePartitionMetadataKey", None, "data", "15", "none", [
        F("group_id", "string", "15"),
    ])

_TOPIC_PARTITIONS_INFO = [F("topic_id", "uuid"), F("topic_name", "string"), F("partitions", "[]int32")]

SHARE_GROUP_STATE_PARTITION_METADATA_VALUE = M(
    "ShareGroupStatePartitionMetadataValue", None, "data", "0", "0+", [
        F("initializing_topics", "[]TopicPartitionsInfo", fields=_TOPIC_PARTITIONS_INFO),
        F("initialized_topics", "[]TopicPartitionsInfo", fields=_TOPIC_PARTITIONS_INFO),
        F("deleting_topics", "[]TopicInfo", fields=[F("topic_id", "uuid"), F("topic_name", "string")]),
    ])

EXTRA = (
    SHARE_GROUP_MEMBER_METADATA_KEY, SHARE_GROUP_MEMBER_METADATA_VALUE,
    SHARE_GROUP_METADATA_KEY, SHARE_GROUP_METADATA_VALUE,
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
    SHARE_GROUP_STATE_PARTITION_METADATA_KEY, SHARE_GROUP_STATE_PARTITION_METADATA_VALUE,
)
