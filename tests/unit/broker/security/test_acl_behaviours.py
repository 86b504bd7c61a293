"""ACL behaviours beyond the matrix of allowed/denied per API: partial answers (one denied topic of two),
listings filtered to what a principal may describe, auto-creation needing CREATE, operations bit sets,
refusals of the APIs other parts add, and the ACL APIs themselves."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.broker.security.acls import (
    CLUSTER_NAME,
)
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import (
    create_acls,
    create_topics,
    delete_acls,
    describe_acls,
    describe_groups,
    describe_topic_partitions,
    fetch,
    init_producer_id,
    join_group,
    list_groups,
    metadata,
    produce,
)
from tests.unit.broker.conftest import RawClient
from tests.unit.broker.security.acl_kit import (
    ADMIN,
    ALICE,
    GROUP,
    PT,
    RT,
    TOPIC,
    Op,
    acl,
    connect_as,
    grant,
    one_record,
)


async def test_produce_to_two_topics_fails_only_the_denied_one(secured: BrokerApp) -> None:
    secured.state.topics.create("allowed-t", 1, 1, {})
    secured.state.topics.create("denied-t", 1, 1, {})
    grant(secured, acl(RT.TOPIC, "allowed-t", Op.WRITE))
    client = await connect_as(secured, ALICE)
    try:
        response = await client.call(produce.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
            produce.TopicProduceData(name=name, partition_data=[produce.PartitionProduceData(index=0,
                                                                                             records=one_record())])
            for name in ("denied-t", "allowed-t")]), 9)
    finally:
        client.close()
    codes = {t.name: t.partition_responses[0].error_code for t in response.responses}
    assert codes == {"allowed-t": 0, "denied-t": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    log = secured.state.logs.get_log("allowed-t", 0)
    assert log is not None and log.log_end_offset == 1


async def test_metadata_lists_only_describable_topics_and_auto_create_needs_create(secured: BrokerApp) -> None:
    for name in ("orders", "payments", "ord-eu"):
        secured.state.topics.create(name, 1, 1, {})
    grant(secured, acl(RT.TOPIC, "ord", Op.READ, pattern=PT.PREFIXED))
    client = await connect_as(secured, ALICE)
    try:
        every = await client.call(metadata.MetadataRequest(topics=None, include_cluster_authorized_operations=True,
                                                           include_topic_authorized_operations=True), 10)
        assert sorted(t.name for t in every.topics) == ["ord-eu", "orders"]
        read_describe = (1 << Op.READ) | (1 << Op.DESCRIBE)
        assert {t.topic_authorized_operations for t in every.topics} == {read_describe}
        assert every.cluster_authorized_operations == 0
        # v0: an empty list means every topic
        v0 = await client.call(metadata.MetadataRequest(topics=[]), 0)
        assert sorted(t.name for t in v0.topics) == ["ord-eu", "orders"]
        # a named, existing but undescribable topic; an unknown one it may not create
        named = await client.call(metadata.MetadataRequest(topics=[
            metadata.MetadataRequestTopic(name="payments"), metadata.MetadataRequestTopic(name="ord-new")],
            allow_auto_topic_creation=True), 9)
        assert {t.name: t.error_code for t in named.topics} == {
            "payments": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "ord-new": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        assert secured.state.topics.get("ord-new") is None
        # at v0 too (always auto-creating), with nothing left to ask for
        await client.call(metadata.MetadataRequest(topics=[metadata.MetadataRequestTopic(name="ord-new")]), 0)
        assert secured.state.topics.get("ord-new") is None
        # with CREATE on the topic prefix, auto-creation goes ahead
        grant(secured, acl(RT.TOPIC, "ord", Op.READ, pattern=PT.PREFIXED),
              acl(RT.TOPIC, "ord", Op.CREATE, pattern=PT.PREFIXED))
        created = await client.call(metadata.MetadataRequest(topics=[metadata.MetadataRequestTopic(name="ord-new")],
                                                             allow_auto_topic_creation=True), 9)
        assert created.topics[0].error_code == 0 and created.topics[0].partitions
    finally:
        client.close()


async def test_list_groups_and_describe_groups_operations(secured: BrokerApp) -> None:
    grant(secured, acl(RT.GROUP, GROUP, Op.READ), acl(RT.GROUP, "other", Op.READ, principal="User:bob"))
    for principal, group in ((ALICE, GROUP), ("User:bob", "other")):
        client = await connect_as(secured, principal)
        try:
            joined = await client.call(join_group.JoinGroupRequest(
                group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                protocol_type="consumer", protocols=[join_group.JoinGroupRequestProtocol(name="range", metadata=b"")]),
                3)
            assert joined.error_code == 0
        finally:
            client.close()
    client = await connect_as(secured, ALICE)
    try:
        listed = await client.call(list_groups.ListGroupsRequest(), 3)
        assert [g.group_id for g in listed.groups] == [GROUP]
        described = await client.call(describe_groups.DescribeGroupsRequest(
            groups=[GROUP, "other"], include_authorized_operations=True), 5)
        by_id = {g.group_id: g for g in described.groups}
        assert by_id[GROUP].authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
        assert by_id["other"].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    finally:
        client.close()
    admin = await connect_as(secured, ADMIN)
    try:
        listed = await admin.call(list_groups.ListGroupsRequest(), 3)
        assert sorted(g.group_id for g in listed.groups) == sorted([GROUP, "other"])
    finally:
        admin.close()


async def test_acl_apis_over_the_wire(secured: BrokerApp) -> None:
    admin = await connect_as(secured, ADMIN)
    try:
        created = await admin.call(create_acls.CreateAclsRequest(creations=[
            create_acls.AclCreation(resource_type=2, resource_name="orders", resource_pattern_type=4,
                                    principal=ALICE, host="*", operation=4, permission_type=3),
            create_acls.AclCreation(resource_type=2, resource_name="", resource_pattern_type=3,
                                    principal=ALICE, host="*", operation=4, permission_type=3)]), 3)
        assert [r.error_code for r in created.results] == [0, ErrorCode.INVALID_REQUEST]
        described = await admin.call(describe_acls.DescribeAclsRequest(
            resource_type_filter=2, resource_name_filter="orders-eu", pattern_type_filter=2, principal_filter=None,
            host_filter=None, operation=1, permission_type=1), 2)
        assert [(r.resource_name, r.pattern_type, [a.principal for a in r.acls]) for r in described.resources] == [
            ("orders", 4, [ALICE])]
        bad = await admin.call(describe_acls.DescribeAclsRequest(
            resource_type_filter=0, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1), 2)
        assert bad.error_code == ErrorCode.INVALID_REQUEST
        deleted = await admin.call(delete_acls.DeleteAclsRequest(filters=[delete_acls.DeleteAclsFilter(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=ALICE,
            host_filter=None, operation=1, permission_type=1)]), 3)
        assert [a.resource_name for a in deleted.filter_results[0].matching_acls] == ["orders"]
        assert secured.state.authorizer is not None and secured.state.authorizer.count() == 0
    finally:
        admin.close()


async def test_without_an_authorizer_acl_apis_answer_security_disabled(client: RawClient) -> None:
    described = await client.call(describe_acls.DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1), 1)
    assert described.error_code == ErrorCode.SECURITY_DISABLED
    created = await client.call(create_acls.CreateAclsRequest(creations=[create_acls.AclCreation(
        resource_type=2, resource_name="t", principal=ALICE, host="*", operation=3, permission_type=3)]), 0)
    assert created.results[0].error_code == ErrorCode.SECURITY_DISABLED
    deleted = await client.call(delete_acls.DeleteAclsRequest(filters=[delete_acls.DeleteAclsFilter(
        resource_type_filter=1, operation=1, permission_type=1, resource_name_filter=None)]), 2)
    assert deleted.filter_results[0].error_code == ErrorCode.SECURITY_DISABLED



async def test_create_topics_hides_configs_without_describe_configs(secured: BrokerApp) -> None:
    grant(secured, acl(RT.TOPIC, "new-", Op.CREATE, pattern=PT.PREFIXED),
          acl(RT.TOPIC, "new-open", Op.DESCRIBE_CONFIGS))
    client = await connect_as(secured, ALICE)
    try:
        response = await client.call(create_topics.CreateTopicsRequest(topics=[
            create_topics.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
            for name in ("new-open", "new-closed")], timeout_ms=5000), 5)
    finally:
        client.close()
    by_name = {t.name: t for t in response.topics}
    assert by_name["new-open"].error_code == 0 and by_name["new-open"].configs
    assert by_name["new-closed"].error_code == 0 and by_name["new-closed"].configs is None
    assert by_name["new-closed"].topic_config_error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


async def test_a_follower_fetch_needs_cluster_action(secured: BrokerApp) -> None:
    secured.state.topics.create(TOPIC, 1, 1, {})
    grant(secured, acl(RT.TOPIC, TOPIC, Op.READ))
    request = fetch.FetchRequest(replica_id=2, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[
        fetch.FetchTopic(topic=TOPIC, partitions=[fetch.FetchPartition(partition=0, fetch_offset=0,
                                                                        partition_max_bytes=1 << 20)])])
    client = await connect_as(secured, ALICE)
    try:
        response = await client.call(request, 12)
    finally:
        client.close()
    assert response.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _refusing_check(tmp_path: Path) -> Any:
    from pybroker.broker.security.authorization_check import Check
    from pybroker.broker.security.authorizer import Authorizer

    authorizer = Authorizer(tmp_path, None, allow_if_no_acl=False)
    authorizer.load()
    return Check(authorizer, ALICE, "127.0.0.1", 0, None)


@pytest.mark.parametrize("api_key", [48, 49, 50, 51])
def test_quota_and_scram_apis_are_refused_without_cluster_permission(tmp_path: Path, api_key: int) -> None:
    """The rules for APIs other parts of issue 12 add; they run once those codecs are in the build."""
    from pybroker.broker.dispatch import load_handlers
    from pybroker.broker.security.authorization import rules
    from pybroker.broker.security.authorization_cluster import element_type as _element
    from pybroker.protocol.messages import REQUESTS

    if api_key not in REQUESTS:
        pytest.skip(f"api {api_key} has no codec in this build")
    request_cls = REQUESTS[api_key]
    request = request_cls()
    if api_key == 49:
        entry_cls = _element(request_cls, "entries")
        entity_cls = _element(entry_cls, "entity")
        request.entries = [entry_cls(entity=[entity_cls(entity_type="user", entity_name="alice")])]
    if api_key == 51:
        request.deletions = [_element(request_cls, "deletions")(name="alice")]
        request.upsertions = [_element(request_cls, "upsertions")(name="alice")]
    load_handlers()
    response = rules()[api_key](_refusing_check(tmp_path), request)
    if api_key in (48, 50):
        assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    elif api_key == 49:
        assert [(e.error_code, e.entity[0].entity_name) for e in response.entries] == [
            (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "alice")]
    else:
        assert [(r.user, r.error_code) for r in response.results] == [
            ("alice", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
    for version in range(type(response).MIN_VERSION, type(response).MAX_VERSION + 1):
        response.encode(version)


def test_describe_cluster_reports_the_principals_cluster_operations(tmp_path: Path) -> None:
    from pybroker.broker.dispatch import load_handlers
    from pybroker.broker.security.authorization import rules
    from pybroker.protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse

    load_handlers()
    table = rules()

    check = _refusing_check(tmp_path)
    check.authorizer.create([acl(RT.CLUSTER, CLUSTER_NAME, Op.ALTER)])
    assert table[ApiKey.DESCRIBE_CLUSTER](check, DescribeClusterRequest()) is None
    merge = table[ApiKey.DESCRIBE_CLUSTER](check, DescribeClusterRequest(include_cluster_authorized_operations=True))
    answered = merge(DescribeClusterResponse())
    assert answered.cluster_authorized_operations == (1 << Op.ALTER) | (1 << Op.DESCRIBE)


async def test_metadata_by_topic_id_answers_only_describable_topics(secured: BrokerApp) -> None:
    seen = secured.state.topics.create("seen", 1, 1, {})
    hidden = secured.state.topics.create("hidden", 1, 1, {})
    assert seen is not None and hidden is not None
    grant(secured, acl(RT.TOPIC, "seen", Op.DESCRIBE))
    client = await connect_as(secured, ALICE)
    try:
        response = await client.call(metadata.MetadataRequest(topics=[
            metadata.MetadataRequestTopic(topic_id=seen.topic_id, name=None),
            metadata.MetadataRequestTopic(topic_id=hidden.topic_id, name=None)], allow_auto_topic_creation=False), 12)
    finally:
        client.close()
    by_id = {t.topic_id: t for t in response.topics}
    assert by_id[seen.topic_id].error_code == 0 and by_id[seen.topic_id].name == "seen"
    refused = by_id[hidden.topic_id]
    assert (refused.error_code, refused.name, refused.partitions) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, [])


async def test_produce_auto_creates_only_with_create(secured: BrokerApp) -> None:
    grant(secured, acl(RT.TOPIC, "auto-", Op.WRITE, pattern=PT.PREFIXED))

    def request(name: str) -> Any:
        return produce.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[produce.TopicProduceData(
            name=name, partition_data=[produce.PartitionProduceData(index=0, records=one_record())])])

    client = await connect_as(secured, ALICE)
    try:
        refused = await client.call(request("auto-one"), 9)
        assert refused.responses[0].partition_responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert secured.state.topics.get("auto-one") is None
        grant(secured, acl(RT.TOPIC, "auto-", Op.WRITE, pattern=PT.PREFIXED),
              acl(RT.TOPIC, "auto-", Op.CREATE, pattern=PT.PREFIXED))
        created = await client.call(request("auto-one"), 9)
        assert created.responses[0].partition_responses[0].error_code == 0
        assert secured.state.topics.get("auto-one") is not None
    finally:
        client.close()


async def test_list_transactions_lists_only_describable_ids(secured: BrokerApp) -> None:
    from pybroker.protocol.messages import list_transactions

    secured.state.topics.create(TOPIC, 1, 1, {})
    for txn_id in ("tx-a", "tx-b", "other"):
        grant(secured, acl(RT.TRANSACTIONAL_ID, txn_id, Op.WRITE))
        client = await connect_as(secured, ALICE)
        try:
            for _ in range(100):  # the transaction state topic is created and loaded on first use
                init = await client.call(init_producer_id.InitProducerIdRequest(
                    transactional_id=txn_id, transaction_timeout_ms=60000), 2)
                if init.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    break
                await asyncio.sleep(0.05)
            assert init.error_code == 0, ErrorCode(init.error_code).name
        finally:
            client.close()
    grant(secured, acl(RT.TRANSACTIONAL_ID, "tx-", Op.DESCRIBE, pattern=PT.PREFIXED))
    client = await connect_as(secured, ALICE)
    try:
        listed = await client.call(list_transactions.ListTransactionsRequest(), 1)
        assert sorted(t.transactional_id for t in listed.transaction_states) == ["tx-a", "tx-b"]
    finally:
        client.close()
    admin = await connect_as(secured, ADMIN)
    try:
        listed = await admin.call(list_transactions.ListTransactionsRequest(), 1)
        assert sorted(t.transactional_id for t in listed.transaction_states) == ["other", "tx-a", "tx-b"]
    finally:
        admin.close()
def test_describe_cluster_operations_are_zero_without_describe_on_the_cluster(tmp_path: Path) -> None:
    from pybroker.broker.dispatch import load_handlers
    from pybroker.broker.security.authorization import rules
    from pybroker.protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse

    load_handlers()
    table = rules()

    check = _refusing_check(tmp_path)
    check.authorizer.create([acl(RT.CLUSTER, CLUSTER_NAME, Op.CREATE)])
    merge = table[ApiKey.DESCRIBE_CLUSTER](check, DescribeClusterRequest(include_cluster_authorized_operations=True))
    assert merge(DescribeClusterResponse()).cluster_authorized_operations == 0


async def test_describe_topic_partitions_lists_only_describable_topics(secured: BrokerApp) -> None:
    secured.state.topics.create("dtp-seen", 2, 1, {})
    secured.state.topics.create("dtp-hidden", 1, 1, {})
    grant(secured, acl(RT.TOPIC, "dtp-seen", Op.DESCRIBE))
    client = await connect_as(secured, ALICE)
    try:
        every = await client.call(describe_topic_partitions.DescribeTopicPartitionsRequest(topics=[]), 0)
        named = await client.call(describe_topic_partitions.DescribeTopicPartitionsRequest(topics=[
            describe_topic_partitions.TopicRequest(name="dtp-hidden")]), 0)
        # a cursor on a denied topic: the next describable topic, from its first partition
        resumed = await client.call(describe_topic_partitions.DescribeTopicPartitionsRequest(
            topics=[describe_topic_partitions.TopicRequest(name=n) for n in ("dtp-hidden", "dtp-seen")],
            cursor=describe_topic_partitions.DescribeTopicPartitionsRequestCursor(topic_name="dtp-hidden",
                                                                                 partition_index=1)), 0)
    finally:
        client.close()
    assert [(t.name, len(t.partitions)) for t in every.topics] == [("dtp-seen", 2)]
    assert every.topics[0].topic_authorized_operations == 1 << Op.DESCRIBE
    assert [(t.name, t.error_code, t.topic_id.int) for t in named.topics] == [
        ("dtp-hidden", ErrorCode.TOPIC_AUTHORIZATION_FAILED, 0)]
    assert [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in resumed.topics] == [
        ("dtp-seen", 0, [0, 1]), ("dtp-hidden", ErrorCode.TOPIC_AUTHORIZATION_FAILED, [])]
