"""ACLs through a real `pybroker start` with Kafka's authorizer: stock admin clients manage them, a producer
without WRITE is refused with TOPIC_AUTHORIZATION_FAILED, and the ACLs survive a restart.

On a PLAINTEXT listener every client is User:ANONYMOUS, so the test first lets ANONYMOUS in as a super
user to write its ACLs, then restarts without `super.users`: from then on only the ACLs decide.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka.admin import AclBinding, AclBindingFilter
from confluent_kafka.admin import AclOperation as CkOp
from confluent_kafka.admin import AclPermissionType as CkPerm
from confluent_kafka.admin import ResourcePatternType as CkPattern
from confluent_kafka.admin import ResourceType as CkType
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import SecurityDisabledError, TopicAuthorizationFailedError

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import ck_admin, ck_flush, ck_producer, kp_admin, kp_producer
from tests.integration.test_admin_cli import pybroker, wire

ANON = "User:ANONYMOUS"
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "false"}


def _acl(rtype: ResourceType, name: str, op: ACLOperation, perm: ACLPermissionType = ACLPermissionType.ALLOW,
         pattern: ACLResourcePatternType = ACLResourcePatternType.LITERAL) -> ACL:
    return ACL(ANON, "*", op, perm, ResourcePattern(rtype, name, pattern))


def _everything() -> ACLFilter:
    return ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                     ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))


def _ck_described(bootstrap: str) -> set[tuple[str, str, str, str]]:
    admin = ck_admin(bootstrap)
    every = AclBindingFilter(CkType.ANY, None, CkPattern.ANY, None, None, CkOp.ANY, CkPerm.ANY)
    found = admin.describe_acls(every, request_timeout=10).result(timeout=15)
    # confluent-kafka names resource type 4 BROKER; Kafka calls it CLUSTER
    return {(b.restype.name.replace("BROKER", "CLUSTER"), b.name, b.operation.name, b.permission_type.name)
            for b in found}


def test_admin_clients_manage_acls_that_refuse_a_producer_and_survive_a_restart(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory({**AUTHORIZER, "super.users": ANON}, needs_restart=True)
    # kafka-python writes the ACLs while ANONYMOUS is a super user
    with kp_admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic("open-data", 1, 1), NewTopic("open-locked", 1, 1)])
        created = admin.create_acls([
            _acl(ResourceType.CLUSTER, "kafka-cluster", ACLOperation.ALTER),  # manage ACLs (implies DESCRIBE)
            _acl(ResourceType.TOPIC, "open-", ACLOperation.ALL, pattern=ACLResourcePatternType.PREFIXED),
            _acl(ResourceType.TOPIC, "open-locked", ACLOperation.WRITE, ACLPermissionType.DENY),
        ])
        assert not created["failed"] and len(created["succeeded"]) == 3
    # confluent-kafka adds one more
    admin = ck_admin(broker.bootstrap)
    binding = AclBinding(CkType.GROUP, "open-", CkPattern.PREFIXED, ANON, "*", CkOp.READ, CkPerm.ALLOW)
    for future in admin.create_acls([binding], request_timeout=10).values():
        assert future.result(timeout=15) is None
    expected = {("CLUSTER", "kafka-cluster", "ALTER", "ALLOW"), ("TOPIC", "open-", "ALL", "ALLOW"),
                ("TOPIC", "open-locked", "WRITE", "DENY"), ("GROUP", "open-", "READ", "ALLOW")}
    assert _ck_described(broker.bootstrap) == expected

    # from now on ANONYMOUS is only what its ACLs say
    broker.overrides.pop("super.users")
    broker.restart()
    assert _ck_described(broker.bootstrap) == expected
    with kp_admin(broker.bootstrap) as admin:
        acls, error = admin.describe_acls(_everything())
        assert error.errno == 0 and len(acls) == 4

    with kp_producer(broker.bootstrap) as producer:
        assert producer.send("open-data", b"allowed").get(timeout=15).offset == 0
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("open-locked", b"refused").get(timeout=15)
    producer = ck_producer(broker.bootstrap)
    reports: list[object] = []
    producer.produce("open-locked", b"refused", on_delivery=lambda err, msg: reports.append(err))
    ck_flush(producer)
    assert reports and reports[0] is not None and reports[0].name() == "TOPIC_AUTHORIZATION_FAILED"  # type: ignore[attr-defined]
    denials = [line for line in broker.log_path.read_text().splitlines() if "authorization denied" in line]
    assert denials and all('"operation": "WRITE"' in line and '"resource_name": "open-locked"' in line
                           and '"principal": "User:ANONYMOUS"' in line and '"api": "Produce"' in line and '"host": "127.0.0.1"' in line
                           for line in denials), denials

    # deletion by filter: confluent-kafka one binding, kafka-python the rest of the topic ones
    admin = ck_admin(broker.bootstrap)
    deleted = admin.delete_acls([AclBindingFilter(
        CkType.GROUP, "open-", CkPattern.PREFIXED, None, None, CkOp.ANY, CkPerm.ANY)], request_timeout=10)
    for future in deleted.values():
        assert [b.name for b in future.result(timeout=15)] == ["open-"]
    with kp_admin(broker.bootstrap) as admin:
        results = admin.delete_acls([ACLFilter(ANON, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                               ResourcePatternFilter(ResourceType.TOPIC, None,
                                                                     ACLResourcePatternType.ANY))])
        (_, gone, error), = results
        assert error.errno == 0 and len(gone) == 2
    # the cluster ACL is still there: this principal may still describe, but no longer produce anywhere
    assert _ck_described(broker.bootstrap) == {("CLUSTER", "kafka-cluster", "ALTER", "ALLOW")}


def test_acl_apis_answer_security_disabled_without_an_authorizer(broker: BrokerProcess) -> None:
    with kp_admin(broker.bootstrap) as admin, pytest.raises(SecurityDisabledError):
        admin.describe_acls(_everything())


@pytest.mark.slow  # eight CLI processes
def test_acls_command_line(broker_factory: Callable[..., BrokerProcess], broker: BrokerProcess) -> None:
    secured = broker_factory({**AUTHORIZER, "super.users": "User:ANONYMOUS"})
    added = wire(secured, "acls", "add", "--topic", "orders-", "--resource-pattern-type", "prefixed",
                 "--allow-principal", "User:alice", "--operation", "read", "--operation", "DESCRIBE")
    assert [(r["resource_name"], r["pattern_type"], r["operation"]) for r in added] == [
        ("orders-", "PREFIXED", "READ"), ("orders-", "PREFIXED", "DESCRIBE")]
    wire(secured, "acls", "add", "--cluster", "--deny-principal", "User:mallory", "--host", "10.0.0.9",
         "--operation", "alter")
    listed = wire(secured, "acls", "list")
    assert len(listed) == 3
    matching = wire(secured, "acls", "list", "--topic", "orders-eu", "--resource-pattern-type", "match")
    assert {r["operation"] for r in matching} == {"READ", "DESCRIBE"}
    assert wire(secured, "acls", "list", "--principal", "User:mallory")[0] == {
        "resource_type": "CLUSTER", "resource_name": "kafka-cluster", "pattern_type": "LITERAL",
        "principal": "User:mallory", "host": "10.0.0.9", "operation": "ALTER", "permission": "DENY"}
    refused = pybroker("acls", "remove", "--bootstrap-server", secured.bootstrap)
    assert refused.returncode != 0 and "--all" in refused.stderr
    removed = wire(secured, "acls", "remove", "--principal", "User:alice")
    assert len(removed) == 2
    assert [r["principal"] for r in wire(secured, "acls", "list")] == ["User:mallory"]
    # a broker without an authorizer: one clear line
    plain = pybroker("acls", "list", "--bootstrap-server", broker.bootstrap)
    assert plain.returncode == 1 and plain.stderr.strip().startswith("pybroker: error: DescribeAcls: SECURITY_DISABLED")
