"""A null broker: answers librdkafka's produce and fetch at once and stores nothing. The client-only ceiling.

Why: on a 2-core machine the client processes and the broker share the cores, so a figure near what the
clients alone can do says nothing about the broker. The ceiling is measured the same way as a broker's
figure (the same client processes, settings, records and partitions) against a broker whose per-byte
work is as close to nothing as a broker's can be: a produce is answered from the batch header alone (no
validation, no copy to disk, no fsync), a fetch is answered with one ready-made batch of the topic's
record size whose base offset is patched to the offset asked for, up to the offsets the produce phase
counted (so a consumer reads exactly what it would from a broker, with nothing stored). Its own cost
is one Python decode and encode per request (requests carry up to ~1 MB), so what it measures is the
clients: librdkafka batching, the sockets, the Python loop that hands records over or takes them.

Topics need not be created: a topic named `...-s<S>-p<N>-...` has N partitions (else 1) and its fetches
return records of S value bytes (else 100).
Only what the benchmark's clients send is served: ApiVersions, Metadata, Produce, Fetch, FindCoordinator.

    .venv/bin/python -m bench.null_broker --port 19092
"""

from __future__ import annotations

import argparse
import asyncio
import re
import struct
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from pybroker.protocol.frames import decode_request, encode_response  # noqa: E402
from pybroker.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse  # noqa: E402
from pybroker.protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData  # noqa: E402
from pybroker.protocol.messages.find_coordinator import FindCoordinatorResponse  # noqa: E402
from pybroker.protocol.messages.metadata import (  # noqa: E402
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from pybroker.protocol.messages.produce import (  # noqa: E402
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from pybroker.protocol.records.batch import patch_base_offset  # noqa: E402
from pybroker.protocol.records.record import Record, build_batch  # noqa: E402

#: (key, min, max): versions that need no topic ids (Metadata < 10, Fetch < 13) and no batched coordinators
SERVED = ((18, 0, 3), (3, 1, 9), (0, 3, 9), (1, 4, 12), (10, 0, 3))
_PARTITIONS_IN_NAME = re.compile(r"-p(\d+)-")
_SIZE_IN_NAME = re.compile(r"-s(\d+)-")
_LAST_OFFSET_DELTA = struct.Struct(">i")
LAST_OFFSET_DELTA_AT = 23  # base offset 8, length 4, leader epoch 4, magic 1, crc 4, attributes 2
BATCH_BYTES = 1 << 20  # what a librdkafka producer with batch.size=1 MB sends at most


def partitions_of(topic: str) -> int:
    match = _PARTITIONS_IN_NAME.search(topic)
    return max(1, int(match.group(1))) if match else 1


def size_of(topic: str) -> int:
    match = _SIZE_IN_NAME.search(topic)
    return min(1 << 20, int(match.group(1))) if match else 100


def batch_records(size: int, max_bytes: int = BATCH_BYTES) -> int:
    """Records of `size` value bytes in one fetched batch: as many as a 1 MB producer batch holds."""
    return max(1, min(10_000, max_bytes // (size + 16)))


class NullBroker:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.batches: dict[tuple[int, int], bytes] = {}
        self.next_offset: dict[tuple[str, int], int] = defaultdict(int)

    def answer(self, api_key: int, version: int, request: Any) -> Any:
        if api_key == 18:
            return ApiVersionsResponse(api_keys=[ApiVersion(k, lo, hi) for k, lo, hi in SERVED])
        if api_key == 3:
            names = [t.name for t in request.topics or []]
            return MetadataResponse(
                brokers=[MetadataResponseBroker(0, self.host, self.port)], cluster_id="null", controller_id=0,
                topics=[MetadataResponseTopic(name=name, partitions=[
                    MetadataResponsePartition(partition_index=p, replica_nodes=[0], isr_nodes=[0])
                    for p in range(partitions_of(name))]) for name in names])
        if api_key == 0:
            return self.produced(request)
        if api_key == 10:
            return FindCoordinatorResponse(node_id=0, host=self.host, port=self.port)
        raise ValueError(f"api key {api_key} is not served")

    def produced(self, request: Any) -> Any:
        responses = []
        for topic in request.topic_data:
            parts = []
            for data in topic.partition_data:
                key = (topic.name, data.index)
                base = self.next_offset[key]
                records = data.records or b""
                pos = 0
                while pos + 61 <= len(records):  # every batch of the request (librdkafka sends one)
                    (delta,) = _LAST_OFFSET_DELTA.unpack_from(records, pos + LAST_OFFSET_DELTA_AT)
                    self.next_offset[key] += delta + 1
                    pos += 12 + int.from_bytes(records[pos + 8:pos + 12], "big", signed=True)
                parts.append(PartitionProduceResponse(index=data.index, base_offset=base))
            responses.append(TopicProduceResponse(name=topic.name, partition_responses=parts))
        return None if request.acks == 0 else ProduceResponse(responses=responses)

    def batch(self, size: int, count: int) -> bytes:
        """A ready-made batch of `count` records of `size` bytes (made once per shape)."""
        key = (size, count)
        made = self.batches.get(key)
        if made is None:
            made = self.batches[key] = build_batch((Record(i, 0, None, bytes(size)) for i in range(count)),
                                                   base_timestamp=1)
        return made

    def fetched(self, request: Any) -> tuple[Any, bool]:
        """The answer, and whether it is empty (then it waits `max_wait_ms`, as a broker's long poll does)."""
        topics = []
        empty = True
        for topic in request.topics:
            size = size_of(topic.topic)
            most = batch_records(size)
            parts = []
            for p in topic.partitions:
                end = self.next_offset[(topic.topic, p.partition)]
                count = min(most, end - p.fetch_offset)
                records: bytes | bytearray = b""
                if count > 0:
                    records = bytearray(self.batch(size, count))
                    patch_base_offset(records, 0, p.fetch_offset)
                    empty = False
                parts.append(PartitionData(partition_index=p.partition, high_watermark=end, last_stable_offset=end,
                                           log_start_offset=0, records=records))
            topics.append(FetchableTopicResponse(topic=topic.topic, partitions=parts))
        return FetchResponse(responses=topics), empty

    async def serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
                frame = bytearray(await reader.readexactly(size))
                header, request = decode_request(frame)
                if header.api_key == 1:
                    response, empty = self.fetched(request)
                    if empty:
                        await asyncio.sleep(min(request.max_wait_ms, 1000) / 1000)
                else:
                    response = self.answer(header.api_key, header.api_version, request)
                if response is not None:
                    writer.writelines(encode_response(header.correlation_id, header.api_key,
                                                      header.api_version, response))
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def serve(self) -> None:
        server = await asyncio.start_server(self.serve_connection, self.host, self.port, limit=1 << 22)
        print(f"null broker on {self.host}:{self.port}", flush=True)
        async with server:
            await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(NullBroker(args.host, args.port).serve())  # until SIGTERM
    return 0


if __name__ == "__main__":
    sys.exit(main())
