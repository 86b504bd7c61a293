"""The records of `__consumer_offsets`: keys and values, each preceded on disk by an int16 version.

Facts from Kafka's group-coordinator record specs. The key's version says what the record is: 0 and 1
are an offset commit (group, topic, partition), 2 is a group's metadata (group). A value is preceded
by its own version; a null value is a tombstone that deletes the key's earlier records.

OffsetCommitValue: v1 alone carries an expire timestamp, v3 adds the leader epoch, v4 is flexible.
GroupMetadataValue: v1 adds each member's rebalance timeout, v2 the state timestamp, v3 static
membership's instance id, v4 is flexible.
"""

from pybroker.protocol.schema.dsl import F, M

OFFSET_COMMIT_KEY = M("OffsetCommitKey", None, "data", "0-1", "none", [
    F("group", "string"),
    F("topic", "string"),
    F("partition", "int32"),
])

GROUP_METADATA_KEY = M("GroupMetadataKey", None, "data", "2", "none", [
    F("group", "string"),
])

OFFSET_COMMIT_VALUE = M("OffsetCommitValue", None, "data", "0-4", "4+", [
    F("offset", "int64"),
    F("leader_epoch", "int32", "3+", default=-1),
    F("metadata", "string"),
    F("commit_timestamp", "int64"),
    F("expire_timestamp", "int64", "1", default=-1),
])

GROUP_METADATA_VALUE = M("GroupMetadataValue", None, "data", "0-4", "4+", [
    F("protocol_type", "string"),
    F("generation", "int32"),
    F("protocol", "string", nullable="0+"),
    F("leader", "string", nullable="0+"),
    F("current_state_timestamp", "int64", "2+", default=-1),
    F("members", "[]MemberMetadata", fields=[
        F("member_id", "string"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("client_id", "string"),
        F("client_host", "string"),
        F("rebalance_timeout", "int32", "1+", default=-1),
        F("session_timeout", "int32"),
        F("subscription", "bytes"),
        F("assignment", "bytes"),
    ]),
])

EXTRA = (OFFSET_COMMIT_KEY, GROUP_METADATA_KEY, OFFSET_COMMIT_VALUE, GROUP_METADATA_VALUE)
