"""A produced batch's header is parsed once on its way from the socket to the segment file: the header checks
parse it, and every later step (the transaction check, the record walk, timestamp stamping, offset
assignment, the producer state, the segment's indexes) works from that parse or from a header built from it."""

from __future__ import annotations

import struct
import sys
import time
from typing import Any

import pytest

from pybroker.protocol.messages.api_versions import ApiVersionsRequest
from pybroker.protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from pybroker.protocol.records import batch as layout
from pybroker.protocol.records.batch import crc_ok, iter_batches, rewrite_crc
from pybroker.protocol.records.codecs import GZIP
from pybroker.protocol.records.record import Record, build_batch
from tests.unit.broker.conftest import RawClient
from tests.unit.broker.handlers.test_handlers import _fetch, _partition, _produce


class _CountingStruct:
    """The header's Struct, counting the unpacks: every parse of a batch header goes through one."""

    def __init__(self, inner: struct.Struct) -> None:
        self.inner = inner
        self.parses = 0

    def unpack_from(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        self.parses += 1
        return self.inner.unpack_from(*args, **kwargs)

    def unpack(self, *args: Any) -> tuple[Any, ...]:
        self.parses += 1
        return self.inner.unpack(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch) -> _CountingStruct:
    """The counting Struct in place of `HEADER` in every module that holds it."""
    counting = _CountingStruct(layout.HEADER)
    for module in list(sys.modules.values()):
        if module is not None and module.__name__.startswith("pybroker.") \
                and getattr(module, "HEADER", None) is layout.HEADER:
            monkeypatch.setattr(module, "HEADER", counting)
    return counting


def _batch(n: int, *, codec: int = 0, producer: tuple[int, int, int] | None = None,
           max_timestamp: int | None = None) -> bytearray:
    now = int(time.time() * 1000)
    pid, epoch, sequence = producer or (-1, -1, -1)
    raw = bytearray(build_batch([Record(i, i, b"k%d" % i, b"v" * 30) for i in range(n)], base_timestamp=now,
                                compression=codec, producer_id=pid, producer_epoch=epoch, base_sequence=sequence))
    if max_timestamp is not None:  # a header that says otherwise than its records: the broker restamps it
        struct.pack_into(">q", raw, layout.MAX_TIMESTAMP_OFFSET, max_timestamp)
        rewrite_crc(raw, 0)
    return raw


async def _create(client: RawClient, name: str, configs: dict[str, str]) -> None:
    request = CreateTopicsRequest(topics=[CreatableTopic(
        name=name, num_partitions=1, replication_factor=1,
        configs=[CreatableTopicConfig(name=key, value=value) for key, value in configs.items()])])
    assert (await client.call(request, 7)).topics[0].error_code == 0


@pytest.mark.parametrize(("case", "configs", "acks"), [
    ("plain", {}, 1),
    ("plain", {}, -1),
    ("plain", {}, 0),
    ("gzip", {}, 1),
    ("wrong max timestamp", {}, 1),
    ("log append time", {"message.timestamp.type": "LogAppendTime"}, 1),
    ("idempotent", {}, -1),
    ("compacted", {"cleanup.policy": "compact"}, 1),
])
async def test_one_header_parse_per_batch_from_the_socket_to_the_segment_file(
        client: RawClient, counter: _CountingStruct, case: str, configs: dict[str, str],
        acks: int) -> None:
    await _create(client, "once", configs)
    batches = {
        "plain": lambda i: _batch(3),
        "gzip": lambda i: _batch(3, codec=GZIP),
        "wrong max timestamp": lambda i: _batch(3, max_timestamp=1),
        "log append time": lambda i: _batch(3),
        "idempotent": lambda i: _batch(3, producer=(7, 0, 3 * i)),
        "compacted": lambda i: _batch(3),
    }
    for i in range(3):
        raw = batches[case](i)
        counter.parses = 0
        if acks == 0:  # no answer: the next request of the connection starts once the append is done
            await client.send(_produce("once", raw, acks=0), 9)
            await client.call(ApiVersionsRequest(), 0)
        else:
            answer = _partition(await client.call(_produce("once", raw, acks=acks), 9))
            assert (answer.error_code, answer.base_offset) == (0, 3 * i)  # type: ignore[attr-defined]
        assert counter.parses == 1, case
    fetched = _partition_records(await client.call(_fetch("once"), 12))
    headers = list(iter_batches(fetched))
    assert [h.base_offset for _, h in headers] == [0, 3, 6]
    assert all(crc_ok(fetched, pos, h) for pos, h in headers)


def _partition_records(response: Any) -> bytes:
    return bytes(response.responses[0].partitions[0].records)
