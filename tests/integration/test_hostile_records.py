"""Reproducers for the hostile record batches of issue 11 (items 2, 6, 8 and the snappy part of 11).

Each batch is built by hand with a valid CRC-32C, so only its contents lie, and sent with Produce v9 or
v11 on a raw connection, against a real `pybroker start` process. Each test proves: the partition's
answer is Kafka's error code, nothing of the batch is readable (the log end offset did not move, stock
consumers see exactly the good records around it, before and after a restart, and `check-log` finds
nothing wrong), another client (the canary) was served all along, and the broker still runs.

Codes, from Kafka's own reading of a batch (DefaultRecordBatch's record iterators, LogValidator):
- records that do not fill the batch as its count says (a count that lies either way, a premature
  end): INVALID_RECORD;
- a payload that does not decompress, or decompresses past the broker's cap: Kafka answers
  UNKNOWN_SERVER_ERROR for a codec failure and has no cap at all; issue 11 asks for CORRUPT_MESSAGE
  or INVALID_RECORD, so either is accepted there.

Item 8 (malformed records already on disk must not stop compaction) writes its batch into a stopped
broker's segment: once produce refuses such batches, that is the only way left to get one stored.
"""

from __future__ import annotations

import functools
import json
import re
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import cramjam
import pytest
from kafka import TopicPartition
from kafka.admin import NewTopic

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from pybroker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from pybroker.protocol.messages.produce import (
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    TopicProduceData,
)
from pybroker.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    RECORDS_OFFSET,
    RecordsError,
    iter_batches,
    parse_header,
    rewrite_crc,
)
from pybroker.protocol.records.codecs import GZIP, SNAPPY, XERIAL_MAGIC
from pybroker.protocol.records.record import MAX_DECOMPRESSED, Record, build_batch, decode_records
from pybroker.storage.checkpoints import read_checkpoint
from tests.integration.brokers import REPO_ROOT, BrokerProcess
from tests.integration.clients import ck_read, kp_admin, kp_consumer, kp_producer, kp_wait_for_topic
from tests.integration.hostile import Canary, RawClient
from tests.integration.metrics_broker import MetricsBrokerProcess

INVALID_RECORD = int(ErrorCode.INVALID_RECORD)
CORRUPT_MESSAGE = int(ErrorCode.CORRUPT_MESSAGE)
REFUSED_PAYLOAD = {CORRUPT_MESSAGE, INVALID_RECORD}
#: what a bystander may see while an attack runs (ApiVersions round trips, median)
CANARY_MEDIAN_MS = 20.0
#: room for the biggest hand-built batch (a 1 MB gzip bomb), so max.message.bytes never answers first
BIG_BATCH_CONFIG = {"max.message.bytes": str(4 << 20)}
GIB = 1 << 30
TOPIC_RESOURCE = 2
SET = 0


# -- batches ---------------------------------------------------------------------------------------------
def _now_ms() -> int:
    return int(time.time() * 1000)


def good_batch(values: list[bytes], keys: list[bytes] | None = None) -> bytes:
    keys = keys if keys is not None else [b"k-" + v for v in values]
    return build_batch([Record(i, 0, k, v) for i, (k, v) in enumerate(zip(keys, values, strict=True))],
                       base_timestamp=_now_ms())


def _with_crc(batch: bytearray) -> bytes:
    """Fix the length field and CRC after an edit: the batch is well framed, only its contents lie."""
    struct.pack_into(">i", batch, BATCH_LENGTH_OFFSET, len(batch) - LOG_OVERHEAD)
    rewrite_crc(batch, 0)
    return bytes(batch)


def lying_count(count: int, records: int) -> bytes:
    """A batch holding `records` records whose header says `count` (last offset delta to match)."""
    batch = bytearray(good_batch([b"bad-%d" % i for i in range(records)]))
    struct.pack_into(">i", batch, RECORDS_COUNT_OFFSET, count)
    struct.pack_into(">i", batch, LAST_OFFSET_DELTA_OFFSET, count - 1)
    return _with_crc(batch)


def _flagged(batch: bytearray, codec: int) -> bytearray:
    (attributes,) = struct.unpack_from(">h", batch, ATTRIBUTES_OFFSET)
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, attributes | codec)
    return batch


def gzip_flag_on_plain_records() -> bytes:
    """Three ordinary records under a header that says gzip."""
    return _with_crc(_flagged(bytearray(good_batch([b"bad-0", b"bad-1", b"bad-2"])), GZIP))


def _compressed_payload_batch(payload: bytes, codec: int) -> bytes:
    """One record's header fields around `payload` as the (compressed) records of a batch."""
    batch = bytearray(good_batch([b"bad"]))
    del batch[RECORDS_OFFSET:]
    batch += payload
    return _with_crc(_flagged(batch, codec))


@functools.cache
def gzip_bomb() -> bytes:
    """A batch whose gzip payload (about 1 MB) inflates to 1 GiB of zeros, compressed chunk by chunk so
    the test never holds the gigabyte."""
    deflater = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip member
    chunk = bytes(1 << 20)
    payload = b"".join(deflater.compress(chunk) for _ in range(GIB // len(chunk))) + deflater.flush()
    return _compressed_payload_batch(payload, GZIP)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def snappy_bomb(real_blocks: int = 16, huge_blocks: int = 8) -> bytes:
    """Xerial-framed snappy: `real_blocks` honest 32 KiB blocks, then blocks that declare 4 GiB - 1 of
    output each (a one-byte literal behind the length preamble). The honest blocks open with a record
    that says it is 1 GiB long, so its first records cannot refuse the batch: only the cap can."""
    out = bytearray(XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    opening = _uvarint(2 * GIB)  # zigzag: a record length of 1 GiB
    first = bytes(cramjam.snappy.compress_raw(opening + bytes((32 << 10) - len(opening))))
    honest = bytes(cramjam.snappy.compress_raw(bytes(32 << 10)))
    for i in range(real_blocks):
        block = first if i == 0 else honest
        out += struct.pack(">i", len(block)) + block
    huge = _uvarint(2**32 - 1) + b"\x00x"  # tag 0x00: a literal of one byte
    for _ in range(huge_blocks):
        out += struct.pack(">i", len(huge)) + huge
    return _compressed_payload_batch(bytes(out), SNAPPY)


# -- wire helpers ----------------------------------------------------------------------------------------
def produce(client: RawClient, topic: str, batch: bytes, version: int) -> PartitionProduceResponse:
    answer = client.call(ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])]), version)
    assert answer is not None, "the broker closed the producing connection instead of answering"
    partition: PartitionProduceResponse = answer.responses[0].partition_responses[0]
    return partition


def latest_offset(client: RawClient, topic: str) -> int:
    answer = client.call(ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 7)
    assert answer is not None
    partition = answer.topics[0].partitions[0]
    assert partition.error_code == 0, partition
    return int(partition.offset)


def alter_topic(client: RawClient, topic: str, configs: dict[str, str]) -> None:
    answer = client.call(IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=topic,
        configs=[AlterableConfig(name=k, config_operation=SET, value=v) for k, v in configs.items()])]), 1)
    assert answer is not None and answer.responses[0].error_code == 0, answer


def create_topic(broker: BrokerProcess, topic: str, **configs: str) -> None:
    with kp_admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs=configs)])
    kp_wait_for_topic(broker.bootstrap, topic)


def kp_seen(bootstrap: str, topic: str, end: int, timeout: float = 20.0) -> list[tuple[int, bytes]]:
    """(offset, value) of every record kafka-python's consumer returns from offset 0 until its position
    reaches `end` (every record twice would show, as would a consumer that never gets there)."""
    seen: list[tuple[int, bytes]] = []
    tp = TopicPartition(topic, 0)
    with kp_consumer(bootstrap) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + timeout
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=300).values():
                seen += [(r.offset, r.value) for r in records]
    return seen


def ck_seen(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    """(offset, value) of every message librdkafka's consumer returns from offset 0 to the end."""
    return [(int(m.offset() or 0), bytes(m.value() or b"")) for m in ck_read(bootstrap, topic, 1)[0]]


def pybroker_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker.broker.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT, check=False)


def assert_canary_served(canary: Canary) -> None:
    assert canary.latencies and canary.failures == 0, canary.summary()
    assert canary.median_ms < canary.allowed_ms(CANARY_MEDIAN_MS), canary.summary()


@pytest.fixture
def pybroker_only(broker_target: str) -> None:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own limits and files")


# -- item 2: lying and undecodable batches are refused, and nothing of them is ever readable ---------------
#: (id, the hostile batch, the codes Kafka's reading allows, Produce version)
LIES: list[tuple[str, Callable[[], bytes], set[int], int]] = [
    ("count-1-holds-3", lambda: lying_count(1, 3), {INVALID_RECORD}, 9),
    ("count-5-holds-1", lambda: lying_count(5, 1), {INVALID_RECORD}, 11),
    ("count-2^31-1", lambda: lying_count(2**31 - 1, 1), {INVALID_RECORD}, 9),
    ("gzip-flag-not-gzip", gzip_flag_on_plain_records, REFUSED_PAYLOAD, 11),
    ("gzip-bomb-1GiB", gzip_bomb, REFUSED_PAYLOAD, 9),
]


@pytest.mark.slow
@pytest.mark.parametrize(("make", "codes", "version"), [lie[1:] for lie in LIES], ids=[lie[0] for lie in LIES])
def test_a_lying_batch_is_refused_and_never_readable(
        pybroker_only: None, broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str],
        make: Callable[[], bytes], codes: set[int], version: int) -> None:
    hostile = make()
    with pytest.raises(RecordsError):  # the test's own premise: the batch does not decode
        decode_records(hostile, 0, parse_header(hostile))
    broker = broker_factory(needs_restart=True)
    topic = new_topic("delete")
    create_topic(broker, topic, **{"cleanup.policy": "delete", **BIG_BATCH_CONFIG})
    with Canary(broker.host, broker.port) as canary, RawClient(broker.host, broker.port, timeout=60) as client:
        first = produce(client, topic, good_batch([b"good-0", b"good-1"]), version)
        assert (first.error_code, first.base_offset) == (0, 0)
        before = latest_offset(client, topic)
        refused = produce(client, topic, hostile, version)
        print(f"refused with {refused.error_code}: {refused.error_message}")
        assert refused.error_code in codes, refused
        assert latest_offset(client, topic) == before == 2
        after = produce(client, topic, good_batch([b"good-2", b"good-3"]), version)
        assert (after.error_code, after.base_offset) == (0, 2)
        assert latest_offset(client, topic) == 4
    assert_canary_served(canary)

    expected = [(0, b"good-0"), (1, b"good-1"), (2, b"good-2"), (3, b"good-3")]
    assert kp_seen(broker.bootstrap, topic, 4) == expected
    assert ck_seen(broker.bootstrap, topic) == expected
    broker.restart()
    with Canary(broker.host, broker.port) as canary:
        with RawClient(broker.host, broker.port) as client:
            assert latest_offset(client, topic) == 4
        assert kp_seen(broker.bootstrap, topic, 4) == expected
        assert ck_seen(broker.bootstrap, topic) == expected
    assert canary.latencies and canary.failures == 0, canary.summary()
    assert broker.is_running()
    broker.stop()
    checked = pybroker_cli("check-log", str(broker.log_dirs[0]), "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = json.loads(checked.stdout)
    assert report["problems"] == [] and report["partitions"] >= 1 and report["batches"] >= 2, report


# -- item 6: decompression bombs cost the event loop nothing others can see --------------------------------
BOMBS = 20


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["compact", "delete"])
def test_twenty_gzip_bombs_leave_other_clients_served(pybroker_only: None, broker: BrokerProcess,
                                                      new_topic: Callable[..., str], policy: str) -> None:
    bomb = gzip_bomb()
    assert 900_000 < len(bomb) < 1_200_000  # about 1 MB compressed, 1 GiB inflated
    topic = new_topic(policy)
    create_topic(broker, topic, **{"cleanup.policy": policy, **BIG_BATCH_CONFIG})
    codes = []
    with RawClient(broker.host, broker.port, timeout=60) as client:
        with Canary(broker.host, broker.port) as canary:
            started = time.monotonic()
            for i in range(BOMBS):
                codes.append(produce(client, topic, bomb, 9 if i % 2 else 11).error_code)
            took = time.monotonic() - started
            for _ in range(3):  # acks=0: no answer, and still nothing stored ahead of the next batch
                client.send(ProduceRequest(acks=0, timeout_ms=10_000, topic_data=[TopicProduceData(
                    name=topic, partition_data=[PartitionProduceData(index=0, records=bomb)])]), 9)
            good = produce(client, topic, good_batch([b"good"]), 9)
        assert (good.error_code, good.base_offset) == (0, 0)
        assert latest_offset(client, topic) == 1
    print(f"{BOMBS} bombs ({policy}) answered {sorted(set(codes))} in {took:.2f} s; canary: {canary.summary()}")
    assert all(code in REFUSED_PAYLOAD for code in codes), codes
    assert_canary_served(canary)
    assert len(canary.latencies) >= 5, f"{canary.summary()} in {took:.2f} s"
    assert broker.is_running()


# -- item 11: a snappy bomb names the real cap ---------------------------------------------------------
@pytest.mark.parametrize("policy", ["compact", "delete"])
def test_a_snappy_bomb_is_refused_naming_the_real_cap(pybroker_only: None, broker: BrokerProcess,
                                                      new_topic: Callable[..., str], policy: str) -> None:
    topic = new_topic(policy)
    create_topic(broker, topic, **{"cleanup.policy": policy, **BIG_BATCH_CONFIG})
    with Canary(broker.host, broker.port) as canary, RawClient(broker.host, broker.port) as client:
        refused = produce(client, topic, snappy_bomb(), 11)
        assert latest_offset(client, topic) == 0
    assert refused.error_code in REFUSED_PAYLOAD, refused
    message = refused.error_message or ""
    caps = [int(n) for n in re.findall(r"more than (\d+) bytes", message)]
    assert caps == [MAX_DECOMPRESSED], f"the message should state the cap ({MAX_DECOMPRESSED}): {message!r}"
    assert canary.latencies and canary.failures == 0, canary.summary()
    assert broker.is_running()


# -- item 8: malformed records already stored do not stop compaction ---------------------------------------
KEYS = [b"key-%d" % i for i in range(10)]
CLEAN_TIMEOUT_S = 60.0


@pytest.fixture
def metrics_broker(tmp_path: Path, pybroker_only: None) -> Iterator[MetricsBrokerProcess]:
    proc = MetricsBrokerProcess(tmp_path / "broker", {"log.cleaner.backoff.ms": "100"})
    try:
        yield proc
    finally:
        proc.close()


def _append_to_active_segment(partition_dir: Path, batch: bytearray) -> tuple[int, bytes]:
    """Write `batch` at the log end of a stopped broker's partition; its offset and its stored bytes."""
    active = max(partition_dir.glob("*.log"))
    data = active.read_bytes()
    next_offset = int(active.stem)
    for _, header in iter_batches(data):
        next_offset = header.next_offset
    struct.pack_into(">q", batch, 0, next_offset)  # base offset: outside the CRC
    stored = bytes(batch)
    with active.open("ab") as file:
        file.write(stored)
    return next_offset, stored


def _stored_batches(partition_dir: Path) -> Iterator[tuple[int, bytes]]:
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        for pos, header in iter_batches(data):
            yield header.base_offset, data[pos : pos + header.size]


def _metric(page: str, family: str) -> list[float]:
    return [float(line.rsplit(" ", 1)[1]) for line in page.splitlines()
            if line.startswith(family) and not line.startswith("#")]


@pytest.mark.slow
def test_malformed_records_on_disk_do_not_stop_compaction(metrics_broker: MetricsBrokerProcess,
                                                          new_topic: Callable[..., str]) -> None:
    broker = metrics_broker
    broker.start()
    topic = new_topic("was-delete")
    create_topic(broker, topic, **{"cleanup.policy": "delete"})
    with kp_producer(broker.bootstrap) as producer:
        for key in KEYS:
            producer.send(topic, key=key, value=b"old", partition=0)
        producer.flush(timeout=10)
    broker.stop()

    partition_dir = broker.log_dirs[0] / f"{topic}-0"
    hostile = bytearray(lying_count(1, 3))  # as the broker stored such batches before it validated them
    bad_offset, bad_bytes = _append_to_active_segment(partition_dir, hostile)
    assert bad_offset == len(KEYS)

    broker.start()
    with Canary(broker.host, broker.port) as canary:
        with RawClient(broker.host, broker.port) as client:
            assert latest_offset(client, topic) == bad_offset + 1
            alter_topic(client, topic, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                                        "segment.ms": "1000"})
        with kp_producer(broker.bootstrap) as producer:
            for key in KEYS:
                producer.send(topic, key=key, value=b"new", partition=0)
            producer.flush(timeout=10)
            time.sleep(1.5)  # past segment.ms: the next append rolls, leaving everything before it cleanable
            sentinel = producer.send(topic, key=b"sentinel", value=b"last", partition=0).get(timeout=10).offset
        checkpoint = broker.log_dirs[0] / "cleaner-offset-checkpoint"
        deadline = time.monotonic() + CLEAN_TIMEOUT_S
        while read_checkpoint(checkpoint).get((topic, 0), 0) < sentinel and time.monotonic() < deadline:
            time.sleep(0.2)
        assert read_checkpoint(checkpoint).get((topic, 0), 0) == sentinel, broker.log_tail(80)
    assert canary.latencies and canary.failures == 0, canary.summary()

    batches = dict(_stored_batches(partition_dir))
    assert batches[bad_offset] == bad_bytes, "the malformed batch must be kept byte for byte"
    kept: dict[bytes, list[bytes]] = {}
    for raw in batches.values():
        try:
            records = decode_records(raw, 0, parse_header(raw))
        except RecordsError:
            continue
        for record in records:
            assert record.key is not None and record.value is not None
            kept.setdefault(record.key, []).append(record.value)
    assert kept == {**{key: [b"new"] for key in KEYS}, b"sentinel": [b"last"]}

    status, page = broker.http_get("/metrics")
    assert status == 200
    assert set(_metric(page, "pybroker_cleaner_uncleanable_partitions")) <= {0.0}, page
    assert _metric(page, "pybroker_cleaner_malformed_batches_total") == [1.0]
    output = broker.log_path.read_text()
    assert "Traceback" not in output and "clean failed" not in output
    warnings = [line for line in output.splitlines() if "cannot be decoded" in line]
    assert len(warnings) == 1 and topic in warnings[0] and str(bad_offset) in warnings[0], warnings
    assert broker.is_running()
    broker.stop()
    checked = pybroker_cli("check-log", str(broker.log_dirs[0]), "--json")  # it still finds the batch
    assert checked.returncode == 1, checked.stdout + checked.stderr
    problems = json.loads(checked.stdout)["problems"]
    assert len(problems) == 1 and problems[0]["file"].startswith(str(partition_dir)), problems


@pytest.mark.slow
def test_acknowledged_records_after_a_stored_malformed_batch_survive_a_crash(
        pybroker_only: None, broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str]) -> None:
    broker = broker_factory(needs_restart=True)
    topic = new_topic("legacy")
    create_topic(broker, topic, **{"cleanup.policy": "delete"})
    with RawClient(broker.host, broker.port) as client:
        assert produce(client, topic, good_batch([b"before"]), 9).error_code == 0
    broker.stop()
    bad_offset, _ = _append_to_active_segment(broker.log_dirs[0] / f"{topic}-0", bytearray(lying_count(1, 3)))
    broker.start()
    with RawClient(broker.host, broker.port) as client:
        after = produce(client, topic, good_batch([b"after-0", b"after-1"]), 11)  # acks=-1: fsynced
        assert (after.error_code, after.base_offset) == (0, bad_offset + 1)
    broker.restart(kill=True)
    with Canary(broker.host, broker.port) as canary, RawClient(broker.host, broker.port) as client:
        assert latest_offset(client, topic) == bad_offset + 3, broker.log_tail(5)
    assert canary.latencies and canary.failures == 0, canary.summary()
    assert broker.is_running()
