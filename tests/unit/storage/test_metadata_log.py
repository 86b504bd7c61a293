"""The live metadata log (storage/metadata_log.py): the diff writes the records Kafka's controller would, a log
replays to what was appended, a torn or corrupt tail is cut, snapshots compact the log, and hostile bytes in a
segment end the replay cleanly. Kafka reading the log is tests/integration/test_kraft_export.py."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.protocol.kraft_metadata_records import decode_record
from pybroker.protocol.kraft_snapshot import encode_metadata_record, log_batches
from pybroker.storage.kraft_metadata import TOPIC_RESOURCE, read_kraft_metadata
from pybroker.storage.metadata_log import METADATA_DIR, MetadataImage, MetadataLog

NOW = 1_700_000_000_000
T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def _topic(name: str, topic_id: uuid.UUID, partitions: int = 1) -> list[bytes]:
    out = [encode_metadata_record("TopicRecord", {"name": name, "topic_id": topic_id})]
    out += [encode_metadata_record("PartitionRecord", {
        "partition_id": p, "topic_id": topic_id, "replicas": [1], "isr": [1], "removing_replicas": [],
        "adding_replicas": [], "leader": 1, "leader_epoch": 0, "partition_epoch": 0, "directories": [T1]})
        for p in range(partitions)]
    return out


def _config(name: str, key: str, value: str | None, resource: int = TOPIC_RESOURCE) -> bytes:
    return encode_metadata_record("ConfigRecord", {"resource_type": resource, "resource_name": name, "name": key,
                                                   "value": value})


def _acl(principal: str) -> bytes:
    return encode_metadata_record("AccessControlEntryRecord", {
        "id": uuid.UUID(int=7), "resource_type": 2, "resource_name": "t", "pattern_type": 3, "principal": principal,
        "host": "*", "operation": 3, "permission_type": 3})


def _scram(user: str) -> bytes:
    return encode_metadata_record("UserScramCredentialRecord", {"name": user, "mechanism": 1, "salt": b"s",
                                                                "stored_key": b"k", "server_key": b"v",
                                                                "iterations": 4096})


def _quota(rate: float) -> bytes:
    return encode_metadata_record("ClientQuotaRecord", {"entity": [("user", "u")], "key": "producer_byte_rate",
                                                        "value": rate, "remove": False})


FEATURE = encode_metadata_record("FeatureLevelRecord", {"name": "metadata.version", "feature_level": 33})


def _names(values: list[bytes]) -> list[str]:
    out = []
    for value in values:
        decoded = decode_record(value)
        assert decoded is not None
        out.append(decoded[0])
    return out


def test_the_diff_is_what_kafkas_controller_writes() -> None:
    before = [FEATURE, *_topic("a", T1, 2), _config("a", "retention.ms", "1"), _acl("User:x"), _scram("u"),
              _quota(1.0)]
    after = [FEATURE, *_topic("b", T2, 1), _acl("User:y"), _quota(2.0)]
    old, new = MetadataImage.of(before), MetadataImage.of(after)
    diff = old.diff(new)
    # removals first: the topic (its partitions and configs go with it), the ACL by its id, the user
    assert _names(diff) == ["RemoveTopicRecord", "RemoveAccessControlEntryRecord", "RemoveUserScramCredentialRecord",
                            "TopicRecord", "PartitionRecord", "AccessControlEntryRecord", "ClientQuotaRecord"]
    old_image = MetadataImage.of(before)
    for value in diff:
        old_image.apply(value)
    assert old_image.diff(new) == []  # applying the diff reaches the new image
    assert MetadataImage.of(before).diff(MetadataImage.of(before)) == []


def test_a_deleted_config_and_a_removed_quota() -> None:
    old = MetadataImage.of([*_topic("a", T1), _config("a", "retention.ms", "1"), _quota(1.0)])
    diff = old.diff(MetadataImage.of(_topic("a", T1)))
    fields = [decode_record(v) for v in diff]
    assert fields[0] is not None and fields[0][0] == "ConfigRecord" and fields[0][2]["value"] is None
    assert fields[1] is not None and fields[1][0] == "ClientQuotaRecord" and fields[1][2]["remove"] is True


def test_a_topic_recreated_under_its_name_gets_its_configs_again() -> None:
    old = MetadataImage.of([*_topic("a", T1), _config("a", "retention.ms", "1")])
    diff = old.diff(MetadataImage.of([*_topic("a", T2), _config("a", "retention.ms", "1")]))
    assert _names(diff) == ["RemoveTopicRecord", "TopicRecord", "PartitionRecord", "ConfigRecord"]


def test_feature_levels_are_only_added_and_the_producer_id_mark_only_rises() -> None:
    mark = encode_metadata_record("ProducerIdsRecord", {"broker_id": 1, "broker_epoch": -1, "next_producer_id": 5})
    lower = encode_metadata_record("ProducerIdsRecord", {"broker_id": 1, "broker_epoch": -1, "next_producer_id": 2})
    older = encode_metadata_record("FeatureLevelRecord", {"name": "metadata.version", "feature_level": 20})
    assert MetadataImage.of([older, mark]).diff(MetadataImage.of([FEATURE, lower])) == []
    assert MetadataImage.of([]).diff(MetadataImage.of([FEATURE])) == [FEATURE]


def test_appends_replay_after_a_restart_and_the_takeover_reader_agrees(tmp_path: Path) -> None:
    directory = tmp_path / METADATA_DIR
    log = MetadataLog.create(directory, [FEATURE, *_topic("a", T1, 2)], NOW)
    assert log.end_offset == 6  # header, four records, footer
    log.append([*_topic("b", T2), _config("b", "cleanup.policy", "compact")], NOW)
    log.append([encode_metadata_record("RemoveTopicRecord", {"topic_id": T1})], NOW)
    log.close()
    again = MetadataLog.open(directory)
    assert again.end_offset == 6 + 3 + 1
    assert again.image.diff(MetadataImage.of([FEATURE, *_topic("b", T2),
                                              _config("b", "cleanup.policy", "compact")])) == []
    again.close()
    image = read_kraft_metadata(tmp_path)
    assert {t.name: (t.topic_id, t.configs) for t in image.topics().values()} == {
        "b": (T2, {"cleanup.policy": "compact"})}


def test_a_torn_tail_is_cut_and_the_log_goes_on(tmp_path: Path) -> None:
    directory = tmp_path / METADATA_DIR
    log = MetadataLog.create(directory, [FEATURE], NOW)
    log.append(_topic("a", T1), NOW)
    segment = log._segment
    log.close()
    assert segment is not None
    whole = segment.stat().st_size
    with segment.open("ab") as file:
        file.write(b"\x00" * 7 + b"\x01" * 40)  # half a batch header and body
    again = MetadataLog.open(directory)
    assert segment.stat().st_size == whole
    again.append(_topic("b", T2), NOW)
    again.close()
    assert set(read_kraft_metadata(tmp_path).topics()) == {"a", "b"}


def test_a_batch_failing_its_crc_ends_the_log_there(tmp_path: Path) -> None:
    directory = tmp_path / METADATA_DIR
    log = MetadataLog.create(directory, [FEATURE], NOW)
    log.append(_topic("a", T1), NOW)
    log.append(_topic("b", T2), NOW)
    segment = log._segment
    log.close()
    assert segment is not None
    data = bytearray(segment.read_bytes())
    data[-3] ^= 0xFF  # inside the last batch's records
    segment.write_bytes(bytes(data))
    again = MetadataLog.open(directory)
    assert again.problems and "CRC" in again.problems[0]
    assert ("topic", T1) in again.image.entries and ("topic", T2) not in again.image.entries
    again.close()


def test_a_snapshot_compacts_the_log(tmp_path: Path) -> None:
    directory = tmp_path / METADATA_DIR
    log = MetadataLog.create(directory, [FEATURE], NOW)
    for i in range(20):
        log.append(_topic(f"t{i}", uuid.UUID(int=100 + i)), NOW)
        log.append([encode_metadata_record("RemoveTopicRecord", {"topic_id": uuid.UUID(int=100 + i)})], NOW)
    log.append(_topic("kept", T1), NOW)
    snapshot = log.maybe_snapshot(NOW, bound=1)
    assert snapshot is not None and snapshot.name == f"{log.end_offset:020d}-{log.epoch:010d}.checkpoint"
    names = sorted(p.name for p in directory.iterdir())
    assert names == [snapshot.name, f"{log.end_offset:020d}.log"]
    log.append(_topic("after", T2), NOW)
    log.close()
    assert set(read_kraft_metadata(tmp_path).topics()) == {"kept", "after"}
    assert MetadataLog.open(directory).image.diff(MetadataImage.of([FEATURE, *_topic("kept", T1),
                                                                    *_topic("after", T2)])) == []


@settings(max_examples=60)
@given(st.binary(max_size=300), st.integers(0, 400))
def test_hostile_bytes_in_a_segment_end_the_replay_cleanly(tmp_path_factory: object, junk: bytes, cut: int) -> None:
    """The parser of a metadata segment never raises on what it reads: it replays what is whole and valid and cuts
    the rest (the fuzz target of this parser)."""
    import tempfile
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name) / METADATA_DIR
        log = MetadataLog.create(directory, [FEATURE], NOW)
        log.append(_topic("a", T1), NOW)
        segment = log._segment
        log.close()
        assert segment is not None
        data = segment.read_bytes()
        segment.write_bytes(data[:cut] + junk)
        again = MetadataLog.open(directory)
        assert os.path.getsize(segment) <= cut + len(junk)
        again.append(_topic("b", T2), NOW)
        again.close()
        assert "b" in read_kraft_metadata(Path(name)).topics()


@settings(max_examples=60)
@given(st.lists(st.binary(max_size=60), min_size=1, max_size=5))
def test_whole_batches_of_unreadable_records_are_skipped_not_cut(values: list[bytes]) -> None:
    """Record values pybroker cannot decode (hostile, or a newer Kafka's) in batches whose CRC holds: each is
    skipped with a problem named, the batch stays in the file, and the log goes on after it."""
    import tempfile
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name) / METADATA_DIR
        log = MetadataLog.create(directory, [FEATURE], NOW)
        segment = log._segment
        log.close()
        assert segment is not None
        segment.write_bytes(log_batches(values, log.end_offset, 1, NOW))
        size = segment.stat().st_size
        again = MetadataLog.open(directory)
        assert segment.stat().st_size == size and again.end_offset == 3 + len(values)
        again.append(_topic("b", T2), NOW)
        again.close()
        assert "b" in read_kraft_metadata(Path(name)).topics()
