"""Authorization rules of the topic and partition APIs (Kafka's KafkaApis checks): Produce, Fetch, ListOffsets,
OffsetForLeaderEpoch, DeleteRecords, CreatePartitions, CreateTopics, DeleteTopics, Metadata and
DescribeTopicPartitions. Each handler module picks its rule here when it registers (`@handler(...,
authorize=...)`); `authorization.call` runs it on the event loop before the handler. A rule answers None
(allowed), a response (refused) or a merge (partly allowed), as `authorization` describes.
"""

from __future__ import annotations

import uuid
from typing import Any

from pybroker.broker.security.acls import CLUSTER_NAME
from pybroker.broker.security.authorization_check import (
    CLUSTER,
    FIRST_TOPIC_ID_FETCH_VERSION,
    TOPIC,
    TOPIC_DENIED,
    TXN,
    TXN_DENIED,
    UNSET_OPERATIONS,
    Check,
    Merge,
    Op,
    Outcome,
    appending,
    per_topic,
    split_by,
)
from pybroker.protocol.messages import (
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_topic_partitions,
    fetch,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
)


def produce_rule(check: Check, r: produce.ProduceRequest) -> Outcome:
    def entry(t: Any, code: int = TOPIC_DENIED) -> Any:
        return produce.TopicProduceResponse(name=t.name, partition_responses=[
            produce.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1)
            for p in t.partition_data])

    if r.transactional_id is not None and not check.ok(Op.WRITE, TXN, r.transactional_id):
        if r.acks == 0:
            return None if not r.topic_data else _drop_all(r, "topic_data")
        return produce.ProduceResponse(responses=[entry(t, TXN_DENIED) for t in r.topic_data])
    uncreatable = _creation_refused(check, [t.name for t in r.topic_data])  # a Produce auto-creates too
    return per_topic(check, r, "topic_data", Op.WRITE, entry, "responses", refused=uncreatable)


def _creation_refused(check: Check, names: list[str | None]) -> set[str]:
    """The names auto-creation would create that the principal may not CREATE (on the cluster or topic)."""
    missing = check.state.topics.to_auto_create(names)
    if not missing or check.cluster(Op.CREATE, quiet=True):
        return set()
    return {name for name in missing if not check.ok(Op.CREATE, TOPIC, name)}


def _drop_all(request: Any, attr: str) -> Merge:
    setattr(request, attr, [])
    return lambda response: response


def fetch_rule(check: Check, r: fetch.FetchRequest) -> Outcome:
    by_id = check.version >= FIRST_TOPIC_ID_FETCH_VERSION
    follower = max(r.replica_id, r.replica_state.replica_id) >= 0
    if follower and check.cluster(Op.CLUSTER_ACTION):
        return None  # a replica's fetch needs CLUSTER_ACTION instead of READ on each topic

    def name_of(t: Any) -> str | None:
        if not by_id:
            return str(t.topic)
        info = check.state.logs.topic_by_id(t.topic_id)
        return None if info is None else str(info.name)  # an unknown id is the handler's UNKNOWN_TOPIC_ID

    def entry(t: Any) -> Any:
        return fetch.FetchableTopicResponse(topic=name_of(t) or "", topic_id=t.topic_id, partitions=[
            fetch.PartitionData(partition_index=p.partition, error_code=TOPIC_DENIED, high_watermark=-1,
                                last_stable_offset=-1, log_start_offset=-1, records=b"")
            for p in t.partitions])

    if follower:  # and not allowed to replicate: every partition refused
        refused = [entry(t) for t in r.topics]
        r.topics = []
        return appending("responses", refused)
    return per_topic(check, r, "topics", Op.READ, entry, "responses", name_of)


def list_offsets_rule(check: Check, r: list_offsets.ListOffsetsRequest) -> Outcome:
    def entry(t: Any) -> Any:
        return list_offsets.ListOffsetsTopicResponse(name=t.name, partitions=[
            list_offsets.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=TOPIC_DENIED)
            for p in t.partitions])
    return per_topic(check, r, "topics", Op.DESCRIBE, entry, "topics")


def offset_for_leader_epoch_rule(check: Check, r: offset_for_leader_epoch.OffsetForLeaderEpochRequest) -> Outcome:
    def entry(t: Any) -> Any:
        return offset_for_leader_epoch.OffsetForLeaderTopicResult(topic=t.topic, partitions=[
            offset_for_leader_epoch.EpochEndOffset(partition=p.partition, error_code=TOPIC_DENIED)
            for p in t.partitions])
    return per_topic(check, r, "topics", Op.DESCRIBE, entry, "topics", lambda t: t.topic)


def delete_records_rule(check: Check, r: delete_records.DeleteRecordsRequest) -> Outcome:
    def entry(t: Any) -> Any:
        return delete_records.DeleteRecordsTopicResult(name=t.name, partitions=[
            delete_records.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                                        error_code=TOPIC_DENIED)
            for p in t.partitions])
    return per_topic(check, r, "topics", Op.DELETE, entry, "topics")


def create_partitions_rule(check: Check, r: create_partitions.CreatePartitionsRequest) -> Outcome:
    def entry(t: Any) -> Any:
        return create_partitions.CreatePartitionsTopicResult(name=t.name, error_code=TOPIC_DENIED,
                                                             error_message="not authorized to alter the topic")
    return per_topic(check, r, "topics", Op.ALTER, entry, "results")


def create_topics_rule(check: Check, r: create_topics.CreateTopicsRequest) -> Outcome:
    def entry(t: Any) -> Any:
        return create_topics.CreatableTopicResult(name=t.name, error_code=TOPIC_DENIED,
                                                  error_message="not authorized to create the topic")

    denied = None if check.cluster(Op.CREATE, quiet=True) else per_topic(
        check, r, "topics", Op.CREATE, entry, "topics")

    def merge(response: Any) -> Any:
        # v5+ answers carry the new topic's configs: only to whom may DESCRIBE_CONFIGS it (Kafka's rule)
        for result in response.topics:
            if result.configs and not check.ok(Op.DESCRIBE_CONFIGS, TOPIC, result.name, quiet=True):
                result.topic_config_error_code, result.configs = TOPIC_DENIED, None
        return denied(response) if denied is not None else response
    return merge


def delete_topics_rule(check: Check, r: delete_topics.DeleteTopicsRequest) -> Outcome:
    if check.version < 6:
        kept, denied = split_by(r.topic_names, lambda n: check.ok(Op.DELETE, TOPIC, n))
        if not denied:
            return None
        r.topic_names = kept
        return appending("responses", [delete_topics.DeletableTopicResult(name=n, error_code=TOPIC_DENIED)
                                        for n in denied])

    def name_of(t: Any) -> str | None:
        if t.name is not None:
            return str(t.name)
        info = check.state.logs.topic_by_id(t.topic_id)
        return None if info is None else str(info.name)

    def entry(t: Any) -> Any:
        return delete_topics.DeletableTopicResult(name=t.name, topic_id=t.topic_id, error_code=TOPIC_DENIED)
    return per_topic(check, r, "topics", Op.DELETE, entry, "responses", name_of)




# -- metadata: list what it may describe; auto-create only with CREATE -----------------------------
def metadata_rule(check: Check, r: Any) -> Outcome:
    named = r.topics is not None and not (check.version == 0 and not r.topics)
    auto_create = r.allow_auto_topic_creation or check.version < 4
    blocked: list[str] = []
    if named and auto_create:
        uncreatable = _creation_refused(check, [t.name for t in r.topics])
        blocked = list(dict.fromkeys(t.name for t in r.topics if t.name in uncreatable))
        r.topics = [t for t in r.topics if t.name not in uncreatable]
    # v0 reads an empty list as "every topic": when every named topic was refused, list none of them
    emptied_v0 = named and check.version == 0 and not r.topics
    asked_by_id = {t.topic_id for t in r.topics if t.name is None} if named else set()
    include_topic_ops = bool(r.include_topic_authorized_operations)
    include_cluster_ops = bool(getattr(r, "include_cluster_authorized_operations", False))

    def merge(response: Any) -> Any:
        topics = []
        for t in response.topics:
            if emptied_v0:
                continue
            if t.name is None or check.ok(Op.DESCRIBE, TOPIC, t.name, quiet=not named):
                if include_topic_ops and t.name is not None and not t.error_code:
                    t.topic_authorized_operations = check.operations(TOPIC, t.name)
                topics.append(t)
            elif named:  # refused without saying more than was asked: a name asked by id stays unsaid
                t.error_code, t.partitions = TOPIC_DENIED, []
                if t.topic_id in asked_by_id:
                    t.name = None
                else:
                    t.topic_id = uuid.UUID(int=0)
                t.topic_authorized_operations = UNSET_OPERATIONS
                topics.append(t)
        topics.extend(metadata.MetadataResponseTopic(error_code=TOPIC_DENIED, name=name, partitions=[])
                      for name in blocked)
        response.topics = topics
        if include_cluster_ops:
            response.cluster_authorized_operations = check.operations(CLUSTER, CLUSTER_NAME)
        return response
    return merge




def describe_topic_partitions_rule(check: Check, r: describe_topic_partitions.DescribeTopicPartitionsRequest) -> Outcome:
    denied: list[str] = []
    if r.topics:  # named: a denied topic is answered as such, with no id
        names = list(dict.fromkeys(t.name for t in r.topics))
        kept, denied = split_by(names, lambda n: check.ok(Op.DESCRIBE, TOPIC, n))
        cursor = r.cursor
        if cursor is not None and cursor.topic_name in denied:
            # Kafka starts at the next topic it may describe, from its first partition
            following = sorted(n for n in kept if n > cursor.topic_name)
            kept = following
            r.cursor = None if not following else describe_topic_partitions.DescribeTopicPartitionsRequestCursor(
                topic_name=following[0], partition_index=0)
        r.topics = [describe_topic_partitions.TopicRequest(name=n) for n in kept]
        if not kept:  # nothing left to ask: an empty list would mean every topic ("" answers an error, dropped)
            r.topics = [describe_topic_partitions.TopicRequest(name="")]

    def merge(response: Any) -> Any:
        listed = []
        for t in response.topics:
            if t.error_code == 0 and not check.ok(Op.DESCRIBE, TOPIC, t.name, quiet=True):
                continue  # an every-topic listing shows only what the principal may describe
            if t.error_code == 0:
                t.topic_authorized_operations = check.operations(TOPIC, t.name)
            if t.name or t.error_code == 0:
                listed.append(t)
        listed.extend(describe_topic_partitions.DescribeTopicPartitionsResponseTopic(
            error_code=TOPIC_DENIED, name=n, partitions=[]) for n in denied)
        response.topics = listed
        return response
    return merge


