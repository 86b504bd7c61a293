"""TxnOffsetCommit (key 28), versions 0-5: a transactional producer commits a group's offsets inside its
transaction (`send_offsets_to_transaction`), answered once they are fsynced.

The offsets go to the group's `__consumer_offsets` partition as one transactional batch under the
producer's id and epoch, and stay pending for that producer until the transaction's marker: a commit
makes them the group's committed offsets, an abort drops them (`GroupService.complete_transaction`);
meanwhile OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for them.

Checks, in Kafka's order: authorization (WRITE on the transactional id, READ on the group, READ on each
topic: the rule it registers with, `broker/security/authorization_groups.py`); unknown topics or
partitions answer UNKNOWN_TOPIC_OR_PARTITION alone; an empty group id INVALID_GROUP_ID, a loading
partition COORDINATOR_LOAD_IN_PROGRESS (before v2,
which clients before 2.0 could not handle: COORDINATOR_NOT_AVAILABLE); the transaction coordinator's
verification that the producer owns an open transaction with the group's partition in it (fenced:
INVALID_PRODUCER_EPOCH, as Kafka answers it; not added: INVALID_TXN_STATE, TRANSACTION_ABORTABLE from v4);
then the group's own rules, which enforce no group state but, from v3, match a named member and
generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID).

v1 is v0; v2 adds the leader epoch; v3 the member id, generation and instance id (flexible); v4 the
TRANSACTION_ABORTABLE code; v5 (transactions v2, KIP-890) lets the transaction coordinator add the
group's partition to the transaction itself.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.groups.deferred_responses import answer
from pybroker.broker.groups.outcomes import OffsetToCommit, TxnCommitRequest
from pybroker.broker.security.authorization_groups import txn_offset_commit_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

FIRST_LOAD_IN_PROGRESS_VERSION = 2
FIRST_ABORTABLE_VERSION = 4
Codes = dict[tuple[str, int], ErrorCode]

#: what the transaction coordinator's verification tells this API's clients (Kafka's mapping: a fenced
#: producer is told INVALID_PRODUCER_EPOCH, which every client version handles)
VERIFICATION_CODES = {ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH}


@handler(ApiKey.TXN_OFFSET_COMMIT, versions=(0, 5), authorize=txn_offset_commit_rule)
def handle_txn_offset_commit(ctx: RequestContext, request: TxnOffsetCommitRequest) -> Any:
    state = ctx.state
    version = ctx.api_version
    coordinator = state.groups.coordinator
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    codes: Codes = {key: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for key in wanted
                    if state.logs.get_log(*key) is None}
    known = [OffsetToCommit(t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                            p.committed_metadata)
             for t in request.topics for p in t.partitions if (t.name, p.partition_index) not in codes]

    def build(found: Codes) -> TxnOffsetCommitResponse:
        merged = {**codes, **found}
        return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
            TxnOffsetCommitResponseTopic(name=t.name, partitions=[
                TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                                 error_code=_for_version(merged[(t.name, p.partition_index)],
                                                                         version))
                for p in t.partitions])
            for t in request.topics])

    if not known:
        return build({})
    error = coordinator.availability(request.group_id)
    if error is not ErrorCode.NONE:
        return build({(o.topic, o.partition): error for o in known})
    commit = TxnCommitRequest(request.group_id, request.producer_id, request.producer_epoch, request.generation_id,
                              request.member_id, request.group_instance_id, known)

    def write(verified: ErrorCode) -> Any:
        if verified != ErrorCode.NONE:
            code = VERIFICATION_CODES.get(verified, verified)
            return build({(o.topic, o.partition): code for o in known})
        return answer(lambda respond: coordinator.commit_txn_offsets(commit, state.clock_ms(), respond), build)

    verified = _verify(ctx, request)
    if inspect.isawaitable(verified):
        return _after(verified, write)
    return write(verified)


def _verify(ctx: RequestContext, request: TxnOffsetCommitRequest) -> ErrorCode | Awaitable[ErrorCode]:
    """The transaction coordinator's word on this producer's transaction (none in a build without one)."""
    transactions = getattr(ctx.state, "transactions", None)
    if transactions is None:
        return ErrorCode.NONE
    return transactions.check_txn_offset_commit(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id,
        api_version=ctx.api_version)


async def _after(verified: Awaitable[ErrorCode], write: Any) -> Any:
    return write(await verified)


def _for_version(code: ErrorCode, version: int) -> ErrorCode:
    """Codes a request version's clients do not know, told as the ones they do (Kafka's mapping)."""
    if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and version < FIRST_LOAD_IN_PROGRESS_VERSION:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code == ErrorCode.TRANSACTION_ABORTABLE and version < FIRST_ABORTABLE_VERSION:
        return ErrorCode.INVALID_TXN_STATE
    return ErrorCode(code)
