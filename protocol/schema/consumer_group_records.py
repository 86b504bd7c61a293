"""The consumer-protocol group's records in `__consumer_offsets` (KIP-848), from Kafka's group-coordinator
record specs. As for the classic records (`coordinator_records`), the key's int16 version says what the
record is: 3 the group's epoch, 4 the topics its assignment was computed from, 5 a member's subscription,
6 the target assignment's epoch, 7 a member's target assignment, 8 a member's current assignment (its
epoch, state, and partitions pending revocation). Values are at version 0, flexible; a null value deletes
the key. Kafka writes them in that order of dependence and deletes them in reverse.
"""

from pybroker.protocol.schema.dsl import F, M

_TOPIC_PARTITIONS = [
    F("topic_id", "uuid"),
    F("partitions", "[]int32"),
]
#: a member's current partitions, each with the epoch at which the member got it (KIP-1251, Kafka 4.3): aligned
#: with `partitions`; absent (or of another length) in a record Kafka reads as "at the member's epoch"
_CURRENT_TOPIC_PARTITIONS = [
    *_TOPIC_PARTITIONS,
    F("assignment_epochs", "[]int32", nullable="0+", default=None, tag=0),
]

CONSUMER_GROUP_METADATA_KEY = M("ConsumerGroupMetadataKey", None, "data", "3", "none", [
    F("group_id", "string", "3"),
])

CONSUMER_GROUP_METADATA_VALUE = M("ConsumerGroupMetadataValue", None, "data", "0", "0+", [
    F("epoch", "int32"),
])

CONSUMER_GROUP_PARTITION_METADATA_KEY = M("ConsumerGroupPartitionMetadataKey", None, "data", "4", "none", [
    F("group_id", "string", "4"),
])

CONSUMER_GROUP_PARTITION_METADATA_VALUE = M("ConsumerGroupPartitionMetadataValue", None, "data", "0", "0+", [
    F("topics", "[]TopicMetadata", fields=[
        F("topic_id", "uuid"),
        F("topic_name", "string"),
        F("num_partitions", "int32"),
        F("partition_metadata", "[]PartitionMetadata", fields=[
            F("partition", "int32"),
            F("racks", "[]string"),
        ]),
    ]),
])

CONSUMER_GROUP_MEMBER_METADATA_KEY = M("ConsumerGroupMemberMetadataKey", None, "data", "5", "none", [
    F("group_id", "string", "5"),
    F("member_id", "string", "5"),
])

CONSUMER_GROUP_MEMBER_METADATA_VALUE = M("ConsumerGroupMemberMetadataValue", None, "data", "0", "0+", [
    F("instance_id", "string", nullable="0+", default=None),
    F("rack_id", "string", nullable="0+", default=None),
    F("client_id", "string"),
    F("client_host", "string"),
    F("subscribed_topic_names", "[]string"),
    F("subscribed_topic_regex", "string", nullable="0+", default=None),
    F("rebalance_timeout_ms", "int32", default=-1),
    F("server_assignor", "string", nullable="0+", default=None),
    F("classic_member_metadata", "ClassicMemberMetadata", nullable="0+", default=None, tag=0, fields=[
        F("session_timeout_ms", "int32"),
        F("supported_protocols", "[]ClassicProtocol", fields=[
            F("name", "string"),
            F("metadata", "bytes"),
        ]),
    ]),
])

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = M(
    "ConsumerGroupTargetAssignmentMetadataKey", None, "data", "6", "none", [
        F("group_id", "string", "6"),
    ])

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = M(
    "ConsumerGroupTargetAssignmentMetadataValue", None, "data", "0", "0+", [
        F("assignment_epoch", "int32"),
    ])

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = M("ConsumerGroupTargetAssignmentMemberKey", None, "data", "7", "none", [
    F("group_id", "string", "7"),
    F("member_id", "string", "7"),
])

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = M(
    "ConsumerGroupTargetAssignmentMemberValue", None, "data", "0", "0+", [
        F("topic_partitions", "[]TargetTopicPartition", fields=_TOPIC_PARTITIONS),
    ])

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = M(
    "ConsumerGroupCurrentMemberAssignmentKey", None, "data", "8", "none", [
        F("group_id", "string", "8"),
        F("member_id", "string", "8"),
    ])

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = M(
    "ConsumerGroupCurrentMemberAssignmentValue", None, "data", "0", "0+", [
        F("member_epoch", "int32"),
        F("previous_member_epoch", "int32"),
        F("state", "int8"),
        F("assigned_partitions", "[]CurrentTopicPartitions", fields=_CURRENT_TOPIC_PARTITIONS),
        F("partitions_pending_revocation", "[]CurrentTopicPartitions", fields=_CURRENT_TOPIC_PARTITIONS),
    ])

EXTRA = (
    CONSUMER_GROUP_METADATA_KEY, CONSUMER_GROUP_METADATA_VALUE,
    CONSUMER_GROUP_PARTITION_METADATA_KEY, CONSUMER_GROUP_PARTITION_METADATA_VALUE,
    CONSUMER_GROUP_MEMBER_METADATA_KEY, CONSUMER_GROUP_MEMBER_METADATA_VALUE,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
)
