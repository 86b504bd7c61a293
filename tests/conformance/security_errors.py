"""ACL denials and SASL failures, both brokers configured alike (tests/conformance/settings.py, `secured`):
a SASL_PLAINTEXT listener with PLAIN users, the ACL authorizer, `admin` a super user, `alice` a user no ACL
names. A denial scenario sets the scene as `admin` (a second connection, answers not compared) and then asks
as `alice`; a SASL scenario speaks the handshake itself.
"""

from __future__ import annotations

from pybroker.protocol.messages.create_acls import CreateAclsRequest
from pybroker.protocol.messages.delete_topics import DeleteTopicsRequest
from pybroker.protocol.messages.describe_acls import DescribeAclsRequest
from pybroker.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from pybroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest
from pybroker.protocol.messages.list_groups import ListGroupsRequest
from pybroker.protocol.messages.metadata import MetadataRequest
from pybroker.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from pybroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from pybroker.protocol.messages.sasl_handshake import SaslHandshakeRequest
from tests.conformance import scenarios as s
from tests.conformance.group_errors import join_request
from tests.conformance.registry import scenario
from tests.conformance.settings import USERS
from tests.conformance.side import Side

FAMILY = "security_errors"
TOPIC, BROKER = 2, 4
ANY = 1


async def made_by_admin(side: Side, records: bool = False) -> str:
    """The scenario's topic, created (with three records) by the super user on a connection of its own."""
    admin = Side(side.port, "", login=("admin", USERS["admin"]))
    admin.prefix = side.prefix
    try:
        name = side.name()
        await admin.raw(s.create(s.topic(name)), 7)
        await admin.created(name)
        if records:
            await admin.raw(s.produce(name), 9)
        return name
    finally:
        admin.close()


def denied(id: str, title: str) -> object:
    return scenario(f"security/{id}", FAMILY, title, setting="secured", login="alice")


@denied("metadata", "Metadata v12, as a user without ACLs, of an existing topic, an unknown one, and of all topics")
async def _metadata(side: Side) -> None:
    name = await made_by_admin(side)
    await side.call(s.metadata(name, side.name("unknown")), 12)
    await side.call(MetadataRequest(topics=None), 12)


@denied("produce-fetch-list-offsets", "Produce, Fetch and ListOffsets of an existing topic, as a user without ACLs")
async def _data(side: Side) -> None:
    name = await made_by_admin(side, records=True)
    await side.call(s.produce(name), 9)
    await side.call(s.fetch(name, 0), 12)
    await side.call(s.list_offsets(name, -1), 7)


@denied("create-and-delete-topics", "CreateTopics and DeleteTopics, as a user without ACLs")
async def _topics(side: Side) -> None:
    name = await made_by_admin(side)
    await side.call(s.create(s.topic(side.name("new"))), 7)
    await side.call(DeleteTopicsRequest(topic_names=[name], timeout_ms=5000), 6)


@denied("describe-configs", "DescribeConfigs of a topic and of the broker, as a user without ACLs")
async def _configs(side: Side) -> None:
    name = await made_by_admin(side)
    await side.call(DescribeConfigsRequest(resources=[
        DescribeConfigsResource(resource_type=TOPIC, resource_name=name, configuration_keys=["cleanup.policy"]),
        DescribeConfigsResource(resource_type=BROKER, resource_name="1", configuration_keys=["num.partitions"])]), 4)


@denied("groups", "FindCoordinator, JoinGroup, OffsetFetch and ListGroups, as a user without ACLs")
async def _groups(side: Side) -> None:
    name = await made_by_admin(side)
    await side.call(FindCoordinatorRequest(key=side.name("g"), key_type=0), 3)
    await side.call(join_request(side), 5)
    await side.call(OffsetFetchRequest(group_id=side.name("g"), topics=[
        OffsetFetchRequestTopic(name=name, partition_indexes=[0])]), 7)
    await side.call(ListGroupsRequest(), 4)


@denied("producer-ids", "InitProducerId with a transactional id and without one, as a user without ACLs")
async def _producer_ids(side: Side) -> None:
    await side.call(InitProducerIdRequest(transactional_id=side.name("tx"), transaction_timeout_ms=60_000), 4)
    await side.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), 4)


@denied("acls", "DescribeAcls and CreateAcls, as a user without ACLs")
async def _acls(side: Side) -> None:
    await side.call(DescribeAclsRequest(resource_type_filter=ANY, resource_name_filter=None, pattern_type_filter=ANY,
                                        principal_filter=None, host_filter=None, operation=ANY,
                                        permission_type=ANY), 3)
    await side.call(CreateAclsRequest(creations=[]), 3)


@scenario("security/super-user-describes-acls", FAMILY, "DescribeAcls as the super user: none yet",
          setting="secured", login="admin")
async def _admin_acls(side: Side) -> None:
    await side.call(DescribeAclsRequest(resource_type_filter=ANY, resource_name_filter=None, pattern_type_filter=ANY,
                                        principal_filter=None, host_filter=None, operation=ANY,
                                        permission_type=ANY), 3)


def sasl(id: str, title: str) -> object:
    """A SASL scenario: its error messages are compared as texts (clients show them as the failure's reason)."""
    return scenario(f"sasl/{id}", FAMILY, title, setting="secured", messages=True)


@sasl("wrong-password", "SaslHandshake v1 PLAIN, SaslAuthenticate v2 with a wrong password, then a request")
async def _wrong_password(side: Side) -> None:
    await side.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    await side.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0not-her-password"), 2)
    await side.call(s.metadata(), 12)


@sasl("unknown-user", "SaslAuthenticate v2 of a user nobody made")
async def _unknown_user(side: Side) -> None:
    await side.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    await side.call(SaslAuthenticateRequest(auth_bytes=b"\0mallory\0secret"), 2)


@sasl("unsupported-mechanism", "SaslHandshake v1 of a mechanism the listener does not enable")
async def _unsupported(side: Side) -> None:
    await side.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)


@sasl("request-before-authentication", "Metadata v12 on a SASL listener before any handshake")
async def _before(side: Side) -> None:
    await side.call(s.metadata(), 12)


@sasl("malformed-plain-token", "SaslAuthenticate v2 with a PLAIN token that has no separators")
async def _malformed(side: Side) -> None:
    await side.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    await side.call(SaslAuthenticateRequest(auth_bytes=b"alice"), 2)
