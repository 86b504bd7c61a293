"""What a consumer-protocol member's subscription bytes say: the topics it consumes.

Subscriptions are opaque to the group protocol; the coordinator peeks into them only where Kafka does
(OffsetDelete refuses topics a live consumer group is subscribed to; offsets of topics nobody subscribes
to expire). Undecodable bytes answer None: the caller then assumes nothing.
"""

from __future__ import annotations

from pybroker.protocol.messages.consumer_protocol import ConsumerProtocolSubscription
from pybroker.protocol.primitives import DecodeError

_VERSION_BYTES = 2
_NEWEST = ConsumerProtocolSubscription.MAX_VERSION


def topics_of_subscription(data: bytes) -> set[str] | None:
    if len(data) < _VERSION_BYTES:
        return None
    version = min(int.from_bytes(data[:_VERSION_BYTES], "big", signed=True), _NEWEST)
    if version < 0:
        return None
    try:
        subscription = ConsumerProtocolSubscription.decode(data, version, _VERSION_BYTES, strict=False)
    except DecodeError:
        return None
    return set(subscription.topics)
