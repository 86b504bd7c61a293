"""One reproducer per distinct fuzzer finding, each stating the behaviour Kafka has.

A finding in an area another part of issue 11 owns is `xfail(strict=True)` with the owner in the reason:
when its fix lands the test passes, the strict xfail fails the suite, and whoever merges removes the
mark here and the matching entry in `tests/fuzz/known.py` (which lets the campaign go past it meanwhile).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from pybroker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pybroker.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from pybroker.protocol.messages.delete_topics import DeleteTopicsRequest
from pybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pybroker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from pybroker.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage.flusher import Flusher
from tests.fuzz.inprocess import InProcessBroker
from tests.fuzz.known import KNOWN_FINDINGS, RULES
from tests.fuzz.mutate import FuzzInput
from tests.fuzz.target import FuzzTarget


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[InProcessBroker]:
    b = await InProcessBroker(tmp_path / "data").start()
    try:
        yield b
    finally:
        await b.stop()


def _records(n: int) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([Record(i, 0, b"k", b"v%d" % i) for i in range(n)], base_timestamp=now)


def _produce(topic: str, n: int, acks: int = -1) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=_records(n))])])


def _create(*names: str, partitions: int = 1) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[CreatableTopic(name=n, num_partitions=partitions, replication_factor=1)
                                       for n in names], timeout_ms=5000)


def test_every_known_entry_has_a_reproducer_here() -> None:
    """The lists in known.py shrink as fixes land; each entry is tied to a test below by its item."""
    source = Path(__file__).read_text()
    for name in [*RULES, *KNOWN_FINDINGS]:
        item = name.split(":")[0]
        assert f"known: {item}" in source, f"no reproducer marked 'known: {item}' for {name!r}"


# known: item 1
async def test_delete_records_survives_a_restart_next_to_a_topic_named_with_a_newline(
        broker: InProcessBroker) -> None:
    """Found as: the restart oracle saw log start offsets go back to 0 (and a '\\n' topic lose its record)."""
    created = await broker.call(_create("plain", "evil\n"), 5)
    newline_refused = created.topics[1].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert (await broker.call(_produce("plain", 5), 7)).responses[0].partition_responses[0].error_code == 0
    deleted = await broker.call(DeleteRecordsRequest(topics=[DeleteRecordsTopic(
        name="plain", partitions=[DeleteRecordsPartition(partition_index=0, offset=3)])], timeout_ms=5000), 1)
    assert deleted.topics[0].partitions[0].low_watermark == 3
    await broker.restart()
    assert broker.app is not None
    log = broker.app.state.logs.get_log("plain", 0)
    assert log is not None and (log.log_start_offset, log.log_end_offset) == (3, 5)
    assert newline_refused


# known: item 7
async def test_a_deleted_249_character_topic_lets_the_broker_start_again(broker: InProcessBroker) -> None:
    """Found as: the restart oracle's broker did not start (OSError 36). The delete fails (the
    `-delete` rename is too long), the directory stays, and at the next start setting it aside as a
    stray (`<dir>.<uuid>-stray`) is too long a name too: startup raises and the broker never serves."""
    name = "x" * 249
    assert (await broker.call(_create(name), 5)).topics[0].error_code == 0
    answer = await broker.call(DeleteTopicsRequest(topic_names=[name], timeout_ms=5000), 5)
    await broker.restart()  # raises OSError(36) today
    assert answer.responses[0].error_code == 0
    assert broker.app is not None and name not in broker.app.state.logs.topics()


async def test_delete_records_naming_one_partition_many_times_trims_it_once(
        broker: InProcessBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found as: a `hang` (work unfinished after 5 s): a DeleteRecords of 80,000 entries, all the same
    partition, wrote the checkpoints 80,000 times. Kafka keys the request by partition (last offset wins)."""
    assert broker.app is not None
    assert (await broker.call(_create("repeated"), 5)).topics[0].error_code == 0
    assert (await broker.call(_produce("repeated", 10), 7)).responses[0].partition_responses[0].error_code == 0
    writes = []
    checkpoint = type(broker.app.state.logs).checkpoint
    monkeypatch.setattr(type(broker.app.state.logs), "checkpoint", lambda self: (writes.append(1), checkpoint(self)))
    entries = [DeleteRecordsPartition(partition_index=0, offset=2)] * 5000 + \
        [DeleteRecordsPartition(partition_index=0, offset=4)]
    answer = await broker.call(DeleteRecordsRequest(topics=[DeleteRecordsTopic(name="repeated", partitions=entries)],
                                                    timeout_ms=5000), 2)
    assert [(p.partition_index, p.low_watermark, p.error_code) for p in answer.topics[0].partitions] == [(0, 4, 0)]
    assert len(writes) == 1


async def test_an_offset_commit_retention_past_the_int64_range_is_stored(broker: InProcessBroker) -> None:
    """Found as: `handler failed` (OffsetCommit v4, retention_time_ms 2^63-1): now + retention overflowed the
    int64 expire timestamp of the offsets-topic record, the encoder raised, and the connection was closed."""
    assert (await broker.call(_create("committed"), 5)).topics[0].error_code == 0
    request = OffsetCommitRequest(group_id="forever", generation_id_or_member_epoch=-1, member_id="",
                                  retention_time_ms=2**63 - 1, topics=[OffsetCommitRequestTopic(
                                      name="committed", partitions=[OffsetCommitRequestPartition(
                                          partition_index=0, committed_offset=7, committed_metadata="")])])
    answer = await broker.call(request, 4)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.NONE
    fetched = await broker.call(OffsetFetchRequest(group_id="forever", topics=[
        OffsetFetchRequestTopic(name="committed", partition_indexes=[0])]), 4)
    assert fetched.topics[0].partitions[0].committed_offset == 7


@pytest.mark.parametrize("version", [10, 11])
async def test_metadata_by_topic_id_before_v12_is_refused_with_an_answer_that_decodes(
        broker: InProcessBroker, version: int) -> None:
    """Found as: `bad-answer` (Metadata v11, one topic with a null name and an unknown id): the answer
    echoed the null name, which v10-11 cannot carry, so clients could not decode it. Kafka serves topic
    ids from v12 only; the topic is refused with INVALID_REQUEST under an empty name."""
    request = MetadataRequest(topics=[MetadataRequestTopic(topic_id=uuid.uuid4(), name=None)],
                              allow_auto_topic_creation=False)
    answer = await broker.call(request, version)  # decodes, or raises here
    assert [(t.name, t.error_code) for t in answer.topics] == [("", ErrorCode.INVALID_REQUEST)]


# known: item 7
async def test_recreating_a_249_character_topic_keeps_the_log_dir_online(broker: InProcessBroker) -> None:
    """Found as: `log dir offline ... OSError(36, 'File name too long')` on a Produce (auto-create) or a
    CreateTopics. The failed delete left `<name>-0` behind; the new partition sets it aside as
    `<name>-0.<uuid>-stray`, too long a name, and that OSError takes the only log dir offline (a broker
    with one dir then exits with status 3)."""
    name = "x" * 249
    assert (await broker.call(_create(name), 5)).topics[0].error_code == 0
    await broker.call(DeleteTopicsRequest(topic_names=[name], timeout_ms=5000), 5)
    await broker.call(_create(name), 5)
    assert broker.app is not None
    assert not broker.app.state.logs.offline_dirs


# known: produce
async def test_produce_waiting_for_fsync_when_its_topic_is_deleted_is_not_a_storage_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found as: an `error-logged` finding (Produce acks=-1 then DeleteTopics, pipelined). Kafka answers a
    produce whose partition went away with NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION; no disk
    failed, so neither KAFKA_STORAGE_ERROR nor an error line is right. The flusher thread is held back a
    moment so the delete always wins the race the fuzzer won now and then."""
    sync = Flusher._sync

    def late(log: Any, up_to: int) -> int:
        time.sleep(0.2)
        return sync(log, up_to)

    monkeypatch.setattr(Flusher, "_sync", staticmethod(late))
    async with FuzzTarget(tmp_path) as target:
        broker = InProcessBroker(tmp_path / "unused")
        broker.app = target.app
        assert (await broker.call(_create("doomed"), 5)).topics[0].error_code == 0
        produced, deleted = await broker.pipeline(
            (_produce("doomed", 3), 7), (DeleteTopicsRequest(topic_names=["doomed"], timeout_ms=5000), 5))
        errors = [event for level, event, _ in target.events if level == "error"]
    assert deleted.responses[0].error_code == ErrorCode.NONE
    assert produced.responses[0].partition_responses[0].error_code != ErrorCode.KAFKA_STORAGE_ERROR
    assert not errors, errors


# known: item 3
async def test_delete_records_racing_other_requests_never_takes_the_log_dir_offline(broker: InProcessBroker) -> None:
    """Found as: `log dir offline ... FileNotFoundError` after DeleteRecords and CreateTopics pipelined on one
    connection. Each DeleteRecords writes the checkpoints from a worker thread through the same temp file;
    the loser's rename finds no file, which is taken for a disk failure, and the only log dir goes offline."""
    assert (await broker.call(_create("trimmed", partitions=2), 5)).topics[0].error_code == 0
    for partition in (0, 1):
        request = _produce("trimmed", 50)
        request.topic_data[0].partition_data[0].index = partition
        assert (await broker.call(request, 7)).responses[0].partition_responses[0].error_code == 0

    def trim(partition: int, offset: int) -> tuple[DeleteRecordsRequest, int]:
        return DeleteRecordsRequest(topics=[DeleteRecordsTopic(name="trimmed", partitions=[
            DeleteRecordsPartition(partition_index=partition, offset=offset)])], timeout_ms=5000), 1

    for offset in range(1, 40):
        await asyncio.gather(broker.pipeline(trim(0, offset), (_create(f"t{offset}"), 5)),
                             broker.pipeline(trim(1, offset)))
        assert broker.app is not None
        assert not broker.app.state.logs.offline_dirs, f"log dir offline after {offset} rounds"


# known: item 4
async def test_a_huge_partition_count_is_refused_at_once(tmp_path: Path) -> None:
    """Found as: a `hang` (the synchronous part of one input over 10 s) on CreatePartitions count=32767."""
    import tests.fuzz.target as target_module

    request = CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="wide", count=2**31 - 1, assignments=None)],
                                      timeout_ms=5000)
    frame = _frame(request, 1)
    bound = target_module.SYNC_BOUND_S
    target_module.SYNC_BOUND_S = 3.0
    try:
        async with FuzzTarget(tmp_path) as target:
            broker = InProcessBroker(tmp_path / "unused")
            broker.app = target.app
            assert (await broker.call(_create("wide"), 5)).topics[0].error_code == 0
            finding = await target.run(FuzzInput(0, 0, frame, (1,), ("k37v01",)))
    finally:
        target_module.SYNC_BOUND_S = bound
    assert finding is None, finding.detail


def _frame(request: object, version: int) -> bytes:
    from pybroker.protocol.frame_codec import encode_request

    return encode_request(request, version, 1)


async def test_write_txn_markers_refused_for_many_markers_is_one_warning(
        broker: InProcessBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found as: `noisy-log` (3 warnings for one connection): a WriteTxnMarkers naming several markers with an
    epoch below the producer's logged one warning per marker. Each is answered INVALID_PRODUCER_EPOCH; the
    request is worth one (rate-limited) line."""
    from pybroker.protocol.messages.write_txn_markers import (
        WritableTxnMarker,
        WritableTxnMarkerTopic,
        WriteTxnMarkersRequest,
    )

    assert broker.app is not None
    assert (await broker.call(_create("markers", partitions=2), 5)).topics[0].error_code == 0

    def marker(epoch: int) -> WritableTxnMarker:
        return WritableTxnMarker(producer_id=4242, producer_epoch=epoch, transaction_result=False,
                                 coordinator_epoch=0,
                                 topics=[WritableTxnMarkerTopic(name="markers", partition_indexes=[0, 1])])

    first = await broker.call(WriteTxnMarkersRequest(markers=[marker(5)]), 1)
    assert [p.error_code for p in first.markers[0].topics[0].partitions] == [0, 0]
    warned: list[str] = []
    monkeypatch.setattr(broker.app.state.guard.warnings, "warning", lambda kind, event, **_: warned.append(kind))
    late = await broker.call(WriteTxnMarkersRequest(markers=[marker(1), marker(2), marker(3)]), 1)
    codes = [p.error_code for m in late.markers for t in m.topics for p in t.partitions]
    assert codes == [ErrorCode.INVALID_PRODUCER_EPOCH] * 6
    assert warned == ["transaction marker refused"]
