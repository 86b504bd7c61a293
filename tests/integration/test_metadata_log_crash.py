"""The live metadata log survives a crash (issue 30): kill -9 right after an answered CreateTopics, CreateAcls,
AlterUserScramCredentials, IncrementalAlterConfigs and DeleteTopics, and the restarted broker serves each change.
The JSON stores are then put back as they were before the changes (as if the crash had come between the log's
append and their rewrite): the metadata log alone decides, so nothing answered is lost. One broker process,
killed twice. Then the same changes on the lazy file system of `tests/powerloss/` and a power cut right after
the last answer (kill -9, then everything not fsynced dropped), the JSON stores removed from what survived: the
restarted broker serves each change from the metadata log."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from pybroker.storage.kraft_metadata import read_kraft_metadata
from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, close_clients
from tests.powerloss.mount import LazyMount, fuse_unavailable

pytestmark = [pytest.mark.hang_limit(300)]

SECURITY = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS"}
STORES = ("pybroker-topics.json", "pybroker-acls.json", "scram-credentials.json", "pybroker-dynamic-configs.json")
EXPECTED = ({"kept": 3}, ["User:bob:kept"], ["SCRAM_SHA_256"], "123456")
ACL = AclBinding(ResourceType.TOPIC, "kept", ResourcePatternType.LITERAL, "User:bob", "*", AclOperation.READ,
                 AclPermissionType.ALLOW)


def _changes(bootstrap: str) -> None:
    admin = ck_admin(bootstrap)
    for future in admin.create_topics([NewTopic("kept", 3, 1), NewTopic("gone", 1, 1)]).values():
        future.result(30)
    for future in admin.create_acls([ACL]).values():
        future.result(30)
    upsert = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw-1")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "kept", incremental_configs=[
        ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    admin.delete_topics(["gone"])["gone"].result(30)


def _served(bootstrap: str) -> tuple[dict[str, int], list[str], list[str], str]:
    admin = ck_admin(bootstrap)
    topics = {name: len(t.partitions) for name, t in admin.list_topics(timeout=30).topics.items()
              if not name.startswith("__")}
    acls = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                                AclOperation.ANY, AclPermissionType.ANY)).result(30)
    users = admin.describe_user_scram_credentials(["bob"])
    mechanisms = [i.mechanism.name for i in users["bob"].result(30).scram_credential_infos]
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "kept")])
    retention = next(iter(described.values())).result(30)["retention.ms"].value
    return topics, sorted(f"{a.principal}:{a.name}" for a in acls), mechanisms, retention


def test_answered_metadata_changes_survive_kill_9_and_stale_stores(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(tmp_path / "broker", dict(SECURITY), log_dirs=[data]).start()
    try:
        before = tmp_path / "stores-before"
        before.mkdir()
        for name in STORES:
            if (data / name).exists():
                shutil.copy2(data / name, before / name)
        _changes(broker.bootstrap)
        close_clients()
        broker.kill9()
        broker.start()
        expected = EXPECTED
        assert _served(broker.bootstrap) == expected
        close_clients()
        broker.kill9()
        for name in STORES:  # the stores as they were before the changes: the log has what was answered
            (data / name).unlink(missing_ok=True)
            if (before / name).exists():
                shutil.copy2(before / name, data / name)
        broker.start()
        assert _served(broker.bootstrap) == expected
    finally:
        close_clients()
        broker.close()
    image = read_kraft_metadata(data)
    assert set(image.topics()) >= {"kept"} and "gone" not in image.topics()


@pytest.mark.skipif(fuse_unavailable() is not None, reason=fuse_unavailable() or "")
def test_answered_metadata_changes_survive_a_power_cut(tmp_path: Path) -> None:
    mount = LazyMount(tmp_path / "backing", tmp_path / "mnt").mount()
    try:
        broker = BrokerProcess(tmp_path / "broker", dict(SECURITY), log_dirs=[mount.mountpoint]).start()
        try:
            _changes(broker.bootstrap)
            close_clients()
            broker.kill9()
            mount.cut()
            assert (tmp_path / "backing" / "pybroker-topics.json").exists()
            for name in STORES:  # what survived of the metadata is the log's alone
                (tmp_path / "backing" / name).unlink(missing_ok=True)
            mount.mount()
            broker.start()
            assert _served(broker.bootstrap) == EXPECTED
        finally:
            close_clients()
            broker.close()
    finally:
        mount.unmount()
