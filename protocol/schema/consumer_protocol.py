"""The consumer protocol's subscription and assignment: the opaque bytes members trade via the coordinator.

The coordinator never needs them to run a group (they are the members' business), but it reads the
subscription's topics to refuse OffsetDelete on a topic a live group consumes
(GROUP_SUBSCRIBED_TO_TOPIC), and tools read assignments to show who owns which partition. Facts
from Kafka's ConsumerProtocolSubscription/Assignment specs; neither is ever flexible. Subscription
v1 adds owned partitions, v2 the generation, v3 the rack; assignment versions 1-3 add nothing on the
wire. Clients may append bytes a newer version defines, so decode them with ``strict=False``.
"""

from pybroker.protocol.schema.dsl import F, M

SUBSCRIPTION = M("ConsumerProtocolSubscription", None, "data", "0-3", "none", [
    F("topics", "[]string"),
    F("user_data", "bytes", nullable="0+", default=None),
    F("owned_partitions", "[]OwnedTopicPartition", "1+", fields=[
        F("topic", "string", "1+"),
        F("partitions", "[]int32", "1+"),
    ]),
    F("generation_id", "int32", "2+", default=-1),
    F("rack_id", "string", "3+", nullable="3+", default=None),
])

ASSIGNMENT = M("ConsumerProtocolAssignment", None, "data", "0-3", "none", [
    F("assigned_partitions", "[]AssignedTopicPartition", fields=[
        F("topic", "string"),
        F("partitions", "[]int32"),
    ]),
    F("user_data", "bytes", nullable="0+", default=None),
])

EXTRA = (SUBSCRIPTION, ASSIGNMENT)
