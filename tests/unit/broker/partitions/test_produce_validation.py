"""The produce handler walks every record: refused batches store nothing, compressed ones are validated off
the loop (the handler answers with work in progress), and appends to a partition keep their arrival order."""

from __future__ import annotations

import asyncio
import gzip
import struct
import time

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import Waiting
from pybroker.broker.handlers.produce import handle_produce
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from pybroker.protocol.records import batch as layout
from pybroker.protocol.records.batch import crc_ok, iter_batches, parse_header, rewrite_crc
from pybroker.protocol.records.codecs import GZIP, ZSTD
from pybroker.protocol.records.record import Record, build_batch, decode_records
from tests.unit.broker.conftest import RawClient
from tests.unit.broker.handlers.test_handlers import _fetch, _partition, _produce


def _now() -> int:
    return int(time.time() * 1000)


def _batch(n: int, *, codec: int = 0, claimed: int | None = None, ts: int | None = None,
           deltas: list[int] | None = None) -> bytearray:
    base = _now() if ts is None else ts
    raw = bytearray(build_batch([Record(i, i if deltas is None else deltas[i], b"k%d" % i, b"v" * 50)
                                 for i in range(n)], base_timestamp=base, compression=codec))
    if claimed is not None:
        struct.pack_into(">i", raw, layout.RECORDS_COUNT_OFFSET, claimed)
        struct.pack_into(">i", raw, layout.LAST_OFFSET_DELTA_OFFSET, claimed - 1)
        rewrite_crc(raw, 0)
    return raw


async def _stored(client: RawClient, topic: str) -> bytes:
    fetched = await client.call(_fetch(topic), 12)
    records = fetched.responses[0].partitions[0].records
    return b"" if records is None else bytes(records)


async def test_a_lying_batch_is_refused_and_nothing_of_it_is_stored(client: RawClient) -> None:
    await client.call(_produce("lies", _batch(1)), 9)  # creates the topic; offset 0
    for raw in (_batch(3, claimed=1), _batch(1, claimed=5), _batch(3, codec=GZIP, claimed=1)):
        answer = _partition(await client.call(_produce("lies", raw), 9))
        assert answer.error_code == ErrorCode.INVALID_RECORD  # type: ignore[attr-defined]
        assert "records_count" in answer.error_message  # type: ignore[attr-defined]
    stored = await _stored(client, "lies")
    assert [h.records_count for _, h in iter_batches(stored)] == [1]


#: 80 MiB of zeros (Kafka refuses it for its first record, of length 0, as it reads it), and the same
#: behind a first record that says it is 1 GiB long (only the cap refuses that one, with its size)
GZIP_BOMBS = [(b"", ErrorCode.INVALID_RECORD, "record 0 length 0"),
              (b"\x80\x80\x80\x80\x08", ErrorCode.CORRUPT_MESSAGE, "decompress to more than 67108864 bytes")]


@pytest.mark.parametrize(("opening", "code", "message"), GZIP_BOMBS, ids=["zeros", "a-1GiB-record"])
async def test_a_gzip_bomb_is_refused_and_not_stored(client: RawClient, opening: bytes, code: ErrorCode,
                                                     message: str) -> None:
    topic = f"bomb-{code.name}"
    await client.call(_produce(topic, _batch(1)), 9)
    payload = gzip.compress(opening + bytes(80 << 20), compresslevel=1)
    bomb = bytearray(_batch(1))[: layout.HEADER_SIZE] + payload
    struct.pack_into(">h", bomb, layout.ATTRIBUTES_OFFSET, GZIP)
    struct.pack_into(">i", bomb, layout.BATCH_LENGTH_OFFSET, len(bomb) - layout.LOG_OVERHEAD)
    rewrite_crc(bomb, 0)
    answer = _partition(await client.call(_produce(topic, bomb), 9))
    assert answer.error_code == code, answer  # type: ignore[attr-defined]
    assert message in answer.error_message  # type: ignore[attr-defined]
    assert len(list(iter_batches(await _stored(client, topic)))) == 1


async def test_compressed_batches_are_validated_off_the_loop_and_appended_in_arrival_order(app: BrokerApp) -> None:
    def ctx() -> RequestContext:
        return RequestContext(app.state, 0, 9, 1, "test", "in-process")

    creating = handle_produce(ctx(), _produce("order", _batch(1), acks=1))
    assert asyncio.iscoroutine(creating)  # auto-creation is work on a worker thread
    assert _partition(await creating).error_code == 0
    compressed = handle_produce(ctx(), _produce("order", _batch(3, codec=ZSTD), acks=1))
    assert asyncio.iscoroutine(compressed) and not isinstance(compressed, Waiting)  # work still in progress
    plain = handle_produce(ctx(), _produce("order", _batch(2), acks=1))  # arrives while the first is validated
    assert asyncio.iscoroutine(plain)  # it waits for its turn behind the compressed batch
    later, first = await asyncio.gather(plain, compressed)
    assert (_partition(first).base_offset, _partition(later).base_offset) == (1, 4)  # type: ignore[attr-defined]


async def test_max_timestamp_is_recomputed_and_the_crc_rewritten(client: RawClient) -> None:
    now = _now()
    raw = _batch(3, ts=now, deltas=[5, 9, 1])
    struct.pack_into(">q", raw, layout.MAX_TIMESTAMP_OFFSET, now + 100_000)  # a lie inside the CRC...
    rewrite_crc(raw, 0)  # ...that the CRC covers
    assert _partition(await client.call(_produce("maxts", raw), 9)).error_code == 0  # type: ignore[attr-defined]
    stored = await _stored(client, "maxts")
    header = parse_header(stored)
    assert header.max_timestamp == now + 9 and crc_ok(stored, 0, header)
    assert len(decode_records(stored, 0, header)) == 3


async def test_every_record_timestamp_is_checked(client: RawClient) -> None:
    create = CreateTopicsRequest(topics=[CreatableTopic(
        name="times", num_partitions=1, replication_factor=1,
        configs=[CreatableTopicConfig(name="message.timestamp.after.max.ms", value="60000")])])
    assert (await client.call(create, 7)).topics[0].error_code == 0
    late = _batch(3, deltas=[0, 10 * 60_000, 0])  # the second record is ten minutes ahead
    answer = _partition(await client.call(_produce("times", late), 9))
    assert answer.error_code == ErrorCode.INVALID_TIMESTAMP  # type: ignore[attr-defined]
    assert await _stored(client, "times") == b""


async def test_acks_0_compressed_then_acks_1_plain_keep_their_order(client: RawClient) -> None:
    await client.call(_produce("zero", _batch(1)), 9)
    await client.send(_produce("zero", _batch(3, codec=GZIP), acks=0), 9)  # validated off the loop, no answer
    answer = _partition(await client.call(_produce("zero", _batch(2), acks=1), 9))
    assert answer.base_offset == 4  # type: ignore[attr-defined]
    stored = await _stored(client, "zero")
    assert [(h.base_offset, h.records_count, h.compression) for _, h in iter_batches(stored)] == [
        (0, 1, 0), (1, 3, GZIP), (4, 2, 0)]


async def test_record_errors_name_the_refused_records_over_the_wire(client: RawClient) -> None:
    create = CreateTopicsRequest(topics=[CreatableTopic(
        name="keyed", num_partitions=1, replication_factor=1,
        configs=[CreatableTopicConfig(name="cleanup.policy", value="compact")])])
    assert (await client.call(create, 7)).topics[0].error_code == 0
    records = [Record(i, i, None if i % 10 == 0 else b"k%d" % i, b"v") for i in range(30)]
    for codec in (0, GZIP):
        raw = build_batch(records, base_timestamp=_now(), compression=codec)
        answer = _partition(await client.call(_produce("keyed", raw), 9))
        assert answer.error_code == ErrorCode.INVALID_RECORD  # type: ignore[attr-defined]
        assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [  # type: ignore[attr-defined]
            (i, "Compacted topic cannot accept message without key in topic partition keyed-0") for i in (0, 10, 20)]
        assert answer.error_message.startswith(  # type: ignore[attr-defined]
            "One or more records have been rejected due to 3 record errors in total")
        # before v8 the field does not exist: the same refusal, without the list
        old = _partition(await client.call(_produce("keyed", raw), 7))
        assert old.error_code == ErrorCode.INVALID_RECORD and old.record_errors == []  # type: ignore[attr-defined]
    assert await _stored(client, "keyed") == b""
