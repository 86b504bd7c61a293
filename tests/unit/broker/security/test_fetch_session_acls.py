"""Fetch sessions under the ACL authorizer: a session answers only its principal, and a topic whose READ was
revoked after it joined a session is answered TOPIC_AUTHORIZATION_FAILED, not read (Kafka re-authorizes
every cached partition on each incremental fetch)."""

from __future__ import annotations

from pybroker.broker.app import BrokerApp
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import fetch, produce
from tests.unit.broker.security.acl_kit import (
    ADMIN,
    ALICE,
    RT,
    Op,
    acl,
    connect_as,
    grant,
    one_record,
)

TOPIC = "watched"


def _fetch(session_id: int, epoch: int, partitions: list[int]) -> fetch.FetchRequest:
    topics = [fetch.FetchTopic(topic=TOPIC, partitions=[
        fetch.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20) for p in partitions])]
    return fetch.FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_id=session_id,
                              session_epoch=epoch, topics=topics if partitions else [])


async def test_revoked_read_and_another_principal(secured: BrokerApp) -> None:
    admin = await connect_as(secured, ADMIN)
    answer = await admin.call(produce.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        produce.TopicProduceData(name=TOPIC, partition_data=[produce.PartitionProduceData(index=0,
                                                                                          records=one_record())])]), 9)
    assert answer.responses[0].partition_responses[0].error_code == 0
    allowed = acl(RT.TOPIC, TOPIC, Op.READ)
    grant(secured, allowed)
    alice = await connect_as(secured, ALICE)
    full = await alice.call(_fetch(0, 0, [0]), 12)
    assert full.session_id != 0 and full.responses[0].partitions[0].error_code == 0
    # another principal cannot use alice's session
    stolen = await admin.call(_fetch(full.session_id, 1, []), 12)
    assert stolen.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # READ revoked: the session's partition is refused, not read
    grant(secured)
    revoked = await alice.call(_fetch(full.session_id, 1, []), 12)
    assert [(t.topic, p.error_code, bytes(p.records or b"")) for t in revoked.responses for p in t.partitions] == \
        [(TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED, b"")]
    grant(secured, allowed)
    back = await alice.call(_fetch(full.session_id, 2, []), 12)
    assert [p.error_code for t in back.responses for p in t.partitions] == [0]
    admin.close()
    alice.close()
