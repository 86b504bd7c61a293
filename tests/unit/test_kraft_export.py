"""The KRaft snapshot export (protocol/kraft_snapshot.py, storage/kraft_export.py, broker/kraft_export.py): the
snapshot's layout, a round trip through the takeover's own reader of Kafka's metadata (storage/kraft_metadata.py),
and the clear refusals. Kafka itself reading the snapshot is tests/integration/test_kraft_export.py."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pybroker.broker.kraft_export import export_kraft
from pybroker.broker.security.acl_store import AclStore
from pybroker.broker.security.acls import AclBinding
from pybroker.broker.security.quota_store import FILE_NAME as QUOTA_FILE
from pybroker.broker.security.quota_store import save as save_quotas
from pybroker.broker.security.scram import ScramCredential
from pybroker.broker.security.scram_store import FILE_NAME as SCRAM_FILE
from pybroker.broker.security.scram_store import ScramStore
from pybroker.protocol.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType
from pybroker.protocol.kraft_metadata_records import RECORD_TYPES, decode_record
from pybroker.protocol.kraft_snapshot import (
    LAYOUTS,
    RECORDS_PER_BATCH,
    SNAPSHOT_FOOTER,
    SNAPSHOT_HEADER,
    encode_metadata_record,
    snapshot_bytes,
)
from pybroker.protocol.records.batch import iter_batches
from pybroker.protocol.records.record import decode_records
from pybroker.storage.dynamic_config_store import DynamicConfigStore
from pybroker.storage.errors import LogDirLockedError
from pybroker.storage.kraft_export import (
    EXPORT_MARK,
    ExportError,
    export_kraft_snapshot,
    forget_export,
    kafka_ran_since_export,
)
from pybroker.storage.kraft_metadata import BROKER_RESOURCE, METADATA_DIR, read_kraft_metadata
from pybroker.storage.log_dir import ensure_meta_properties, lock_dir, read_meta_properties, unlock_dir
from pybroker.storage.topic_store import TopicInfo, TopicStore, parse_kafka_uuid

NOW = 1_700_000_000_000


@given(st.text(max_size=30), st.uuids(), st.lists(st.integers(0, 2**31 - 1), max_size=5))
def test_records_both_tables_know_decode_to_what_was_written(name: str, topic_id: uuid.UUID,
                                                            replicas: list[int]) -> None:
    assert decode_record(encode_metadata_record("TopicRecord", {"name": name, "topic_id": topic_id})) == (
        "TopicRecord", 0, {"name": name, "topic_id": topic_id})
    value = encode_metadata_record("PartitionRecord", {
        "partition_id": 3, "topic_id": topic_id, "replicas": replicas, "isr": replicas, "removing_replicas": [],
        "adding_replicas": [], "leader": 1, "leader_epoch": 0, "partition_epoch": 0, "directories": [topic_id]})
    assert decode_record(value) == ("PartitionRecord", 1, {"partition_id": 3, "topic_id": topic_id,
                                                           "replicas": replicas})


def test_every_layout_the_reader_shares_has_the_same_type_id_and_leading_fields() -> None:
    for name, (type_id, _, layout) in LAYOUTS.items():
        if type_id in RECORD_TYPES:
            read_name, read_layout = RECORD_TYPES[type_id]
            assert read_name == name
            assert layout[:len(read_layout)] == read_layout, name


def test_snapshot_layout_header_records_footer() -> None:
    values = [encode_metadata_record("FeatureLevelRecord", {"name": f"f{i}", "feature_level": i})
              for i in range(RECORDS_PER_BATCH + 3)]
    data = snapshot_bytes(values, 1, NOW)
    batches = list(iter_batches(data))
    assert len(batches) == 4  # header, two data batches, footer
    offsets = []
    for pos, header in batches:
        assert header.partition_leader_epoch == 1
        records = decode_records(data, pos, header)
        offsets += [header.base_offset + r.offset_delta for r in records]
        if header.is_control:
            assert len(records) == 1
    assert offsets == list(range(len(values) + 2))
    first = decode_records(data, batches[0][0], batches[0][1])[0]
    last = decode_records(data, batches[-1][0], batches[-1][1])[0]
    assert first.key == struct.pack(">hh", 0, SNAPSHOT_HEADER) and first.value == struct.pack(">hq", 0, NOW) + b"\0"
    assert last.key == struct.pack(">hh", 0, SNAPSHOT_FOOTER) and last.value == b"\0\0\0"


def _pybroker_dirs(tmp_path: Path, count: int = 2) -> list[Path]:
    dirs = [tmp_path / f"d{i}" for i in range(count)]
    for directory in dirs:
        directory.mkdir()
    ensure_meta_properties(dirs, 1)
    return dirs


def test_export_round_trips_through_the_takeover_reader(tmp_path: Path) -> None:
    dirs = _pybroker_dirs(tmp_path)
    topics = {"a": TopicInfo("a", uuid.uuid4(), 2, {"retention.ms": "5"}), "b": TopicInfo("b", uuid.uuid4(), 1)}
    TopicStore(dirs).save(topics)
    (dirs[1] / "b-0").mkdir()
    (dirs[0] / "producer-id-block").write_text("3000\n")
    stale = dirs[0] / METADATA_DIR
    stale.mkdir()
    (stale / "00000000000000000000.log").write_bytes(b"old")
    result = export_kraft_snapshot(dirs, 1, [], NOW)
    assert sorted(p.name for p in stale.iterdir()) == [result.snapshot.name]  # the old log is gone
    assert (result.topics, result.partitions) == (2, 3)
    image = read_kraft_metadata(dirs[0])
    assert image.problems == []
    assert image.topics() == topics
    assert image.next_producer_id == 3000


def test_partitions_name_the_directory_id_of_the_dir_holding_them(tmp_path: Path) -> None:
    dirs = _pybroker_dirs(tmp_path)
    TopicStore(dirs).save({"b": TopicInfo("b", uuid.uuid4(), 1)})
    (dirs[1] / "b-0").mkdir()
    result = export_kraft_snapshot(dirs, 1, [], NOW)
    raw = result.snapshot.read_bytes()
    props = read_meta_properties(dirs[1])
    assert props is not None
    assert parse_kafka_uuid(props["directory.id"]).bytes in raw


def test_security_stores_join_the_image(tmp_path: Path) -> None:
    dirs = _pybroker_dirs(tmp_path, 1)
    binding = AclBinding(ResourceType.TOPIC, "t", PatternType.PREFIXED, "User:alice", "*", AclOperation.READ,
                         AclPermissionType.ALLOW)
    AclStore(dirs[0]).save({binding})
    ScramStore(dirs[0] / SCRAM_FILE).apply([("alice", "SCRAM-SHA-256", ScramCredential(b"s", b"k", b"v", 4096))], [])
    save_quotas(dirs[0] / QUOTA_FILE, {(("user", "alice"),): {"producer_byte_rate": 1024.0}})
    DynamicConfigStore(dirs[0]).save({"log.retention.ms": "7"}, {"log.cleaner.threads": "2"})
    result, counts = export_kraft(dirs, None)
    assert counts == {"acls": 1, "scram_credentials": 1, "client_quotas": 1, "broker_configs": 2,
                      "group_configs": 0, "client_metrics": 0}
    image = read_kraft_metadata(dirs[0])
    assert [(f["resource_name"], f["principal"], f["operation"]) for f in image.acls.values()] == [
        ("t", "User:alice", AclOperation.READ.value)]
    scram = image.scram["alice", 1]
    assert (scram["salt"], scram["stored_key"], scram["server_key"], scram["iterations"]) == (b"s", b"k", b"v", 4096)
    assert image.configs[BROKER_RESOURCE, "1"] == {"log.retention.ms": "7"}
    assert image.configs[BROKER_RESOURCE, ""] == {"log.cleaner.threads": "2"}
    assert b"producer_byte_rate" in result.snapshot.read_bytes()


def test_a_controller_only_metadata_dir_gets_its_own_meta_properties(tmp_path: Path) -> None:
    dirs = _pybroker_dirs(tmp_path, 1)
    meta = tmp_path / "controller"
    result = export_kraft_snapshot(dirs, 1, [], NOW, meta, 3000)
    assert result.snapshot.parent == meta / METADATA_DIR
    props = read_meta_properties(meta)
    assert props is not None and props["node.id"] == "3000" and props["version"] == "1"
    assert props["cluster.id"] == result.cluster_id and props["directory.id"]
    assert not (dirs[0] / METADATA_DIR).exists()


def test_refusals_are_clear(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    with pytest.raises(ExportError, match=r"meta\.properties"):
        export_kraft_snapshot([bare], 1, [], NOW)
    dirs = _pybroker_dirs(tmp_path, 1)
    with pytest.raises(ExportError, match=r"node\.id=1, not 2"):
        export_kraft(dirs, 2)
    fd = lock_dir(dirs[0])
    try:
        with pytest.raises(LogDirLockedError):
            export_kraft(dirs, None)
    finally:
        unlock_dir(fd)
    with pytest.raises(ExportError, match="not a directory"):
        export_kraft([tmp_path / "missing"], None)


def test_the_next_start_tells_whether_kafka_ran_since_the_export(tmp_path: Path) -> None:
    dirs = _pybroker_dirs(tmp_path, 1)
    assert kafka_ran_since_export(dirs[0]) is None  # never exported
    result = export_kraft_snapshot(dirs, 1, [], NOW)
    assert dirs[0] / (dirs[0] / EXPORT_MARK).read_text().strip() == result.snapshot
    assert kafka_ran_since_export(dirs[0]) is None  # Kafka never ran: pybroker's stores stand
    (result.snapshot.parent / "quorum-state").write_text("{}")
    assert kafka_ran_since_export(dirs[0]) == result.snapshot.parent
    forget_export(dirs[0])
    assert not (dirs[0] / EXPORT_MARK).exists() and kafka_ran_since_export(dirs[0]) is None
