"""The records of `__share_group_state` (KIP-932's share coordinator), from Kafka's share-coordinator
record specs. As in `__consumer_offsets`, the key's int16 version says what the record is: 0 a snapshot
of one share-partition's whole state, 1 an update (the batches that changed since). Both keys name the
group, the topic id and the partition. Values are at version 0, flexible; a null value deletes the key.

A share-partition's state is its start offset (below it every record is done) and the state batches
above it: offset ranges with a delivery state (0 available, 2 acknowledged, 4 archived; Kafka never
persists acquired) and a delivery count. `delivery_complete_count` (tag 0) is the number of records
at or above the start offset already acknowledged or archived, -1 when unknown.
"""

from pybroker.protocol.schema.dsl import F, M

_KEY = [
    F("group_id", "string"),
    F("topic_id", "uuid"),
    F("partition", "int32"),
]

_STATE_BATCH = [
    F("first_offset", "int64"),
    F("last_offset", "int64"),
    F("delivery_state", "int8"),
    F("delivery_count", "int16"),
]

SHARE_SNAPSHOT_KEY = M("ShareSnapshotKey", None, "data", "0", "none", _KEY)

SHARE_SNAPSHOT_VALUE = M("ShareSnapshotValue", None, "data", "0", "0+", [
    F("snapshot_epoch", "int32"),
    F("state_epoch", "int32"),
    F("leader_epoch", "int32"),
    F("start_offset", "int64"),
    F("delivery_complete_count", "int32", tag=0, default=-1),
    F("create_timestamp", "int64"),
    F("write_timestamp", "int64"),
    F("state_batches", "[]SnapshotStateBatch", fields=_STATE_BATCH),
])

SHARE_UPDATE_KEY = M("ShareUpdateKey", None, "data", "1", "none", _KEY)

SHARE_UPDATE_VALUE = M("ShareUpdateValue", None, "data", "0", "0+", [
    F("snapshot_epoch", "int32"),
    F("leader_epoch", "int32"),
    F("start_offset", "int64"),
    F("delivery_complete_count", "int32", tag=0, default=-1),
    F("state_batches", "[]UpdateStateBatch", fields=_STATE_BATCH),
])

EXTRA = (SHARE_SNAPSHOT_KEY, SHARE_SNAPSHOT_VALUE, SHARE_UPDATE_KEY, SHARE_UPDATE_VALUE)
