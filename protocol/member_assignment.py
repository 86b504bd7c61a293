"""The consumer protocol's member assignment (the bytes SyncGroup hands each member), decoded.

Layout (Kafka's ConsumerProtocolAssignment): int16 version, then an array of (string topic, array of
int32 partitions), then nullable bytes of user data. Anything that does not parse (another protocol
type, such as Connect's) is reported as not decodable instead of failing the command.
"""

from __future__ import annotations

import struct


def decode_assignment(data: bytes) -> list[tuple[str, int]] | None:
    """(topic, partition) pairs, or None when the bytes are not a consumer assignment."""
    if not data:
        return []
    try:
        pos = 2  # version
        (topics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        pairs: list[tuple[str, int]] = []
        for _ in range(max(topics, 0)):
            (length,) = struct.unpack_from(">h", data, pos)
            pos += 2
            topic = data[pos:pos + length].decode()
            pos += length
            (count,) = struct.unpack_from(">i", data, pos)
            pos += 4
            for partition in struct.unpack_from(f">{max(count, 0)}i", data, pos):
                pairs.append((topic, partition))
            pos += 4 * max(count, 0)
        return sorted(pairs)
    except (struct.error, UnicodeDecodeError):
        return None
