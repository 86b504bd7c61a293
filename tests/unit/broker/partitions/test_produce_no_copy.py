"""A produced batch reaches the segment file without a copy in Python: the request's frame is received
into its own buffer, the records field decodes to a view of it, the record walk reads it in place, the
offsets and timestamps are patched in it, and `Segment.append` writes that view with one write. The only
copy is the kernel's, into the page cache. (A copy anywhere on the way would hand the write a buffer of
the batch's own length; the view's underlying buffer is the whole request frame.)"""

from __future__ import annotations

import time
from typing import Any

import pytest

from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.codecs import GZIP
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage import segment
from tests.unit.broker.conftest import RawClient
from tests.unit.broker.partitions.test_produce_header_parses import _create


def _batch(n: int, codec: int = 0) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([Record(i, i, b"k%d" % i, b"v" * 100) for i in range(n)], base_timestamp=now,
                       compression=codec)


@pytest.mark.parametrize(("codec", "config"), [
    (0, {}), (GZIP, {}), (0, {"message.timestamp.type": "LogAppendTime"}), (0, {"cleanup.policy": "compact"})])
async def test_every_partitions_batch_is_written_from_the_request_frame(
        client: RawClient, monkeypatch: pytest.MonkeyPatch, codec: int, config: dict[str, str]) -> None:
    written: list[Any] = []
    real = segment.write_fully

    def recording(fd: int, data: Any) -> None:
        written.append(data)
        real(fd, data)

    monkeypatch.setattr(segment, "write_fully", recording)
    partitions = 4
    await _create(client, "nocopy", config)
    for extra in range(1, partitions):  # more partitions, one request names them all
        await _create(client, f"nocopy{extra}", config)
    batches = [_batch(5 + i, codec) for i in range(partitions)]
    request = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name="nocopy" if i == 0 else f"nocopy{i}",
                         partition_data=[PartitionProduceData(index=0, records=batches[i])])
        for i in range(partitions)])
    written.clear()
    answer = await client.call(request, 9)
    assert all(p.error_code == 0 for t in answer.responses for p in t.partition_responses)
    assert len(written) == partitions  # one write per partition
    frames = {id(view.obj) for view in written if isinstance(view, memoryview)}
    assert len(frames) == 1, [type(view) for view in written]  # every view is of the same buffer: the frame
    frame = written[0].obj
    assert isinstance(frame, bytearray) and len(frame) > sum(len(b) for b in batches)
    assert sorted(len(view) for view in written) == sorted(len(b) for b in batches)
