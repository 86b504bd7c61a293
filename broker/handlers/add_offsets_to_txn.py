"""AddOffsetsToTxn (key 25), versions 0-4: a group's offsets join a producer's transaction.

The coordinator adds the group's `__consumer_offsets` partition (created on first use) to the open
transaction, with one fsynced write to `__transaction_state`, so that its TxnOffsetCommit is allowed
and the transaction's marker reaches that partition too. Errors as AddPartitionsToTxn's:
INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (v2+; INVALID_PRODUCER_EPOCH before),
CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS; an empty group id is INVALID_GROUP_ID.
v3 is flexible; v4 may answer TRANSACTION_ABORTABLE.

Authorizes: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group
(GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.groups.offsets_topic import OFFSETS_TOPIC
from pybroker.broker.security.authorization_txn import add_offsets_to_txn_rule
from pybroker.broker.transactions.metadata import TV_1
from pybroker.broker.transactions.requests import (
    ensure_offsets_topic,
    ensure_state_topic,
    for_version,
    id_error,
)
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

FIRST_FENCED_VERSION = 2
FIRST_ABORTABLE_VERSION = 4


@handler(ApiKey.ADD_OFFSETS_TO_TXN, versions=(0, 4), authorize=add_offsets_to_txn_rule)
def handle_add_offsets_to_txn(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> object:
    return _add_offsets(ctx, request)


async def _add_offsets(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    code = id_error(request.transactional_id)
    if code is ErrorCode.NONE and not request.group_id:
        code = ErrorCode.INVALID_GROUP_ID
    if code is ErrorCode.NONE and not (await ensure_state_topic(ctx) and await ensure_offsets_topic(ctx)):
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code is ErrorCode.NONE:
        partition = ctx.state.groups.coordinator.partition_for(request.group_id)
        code = await ctx.state.transactions.coordinator.add_partitions(
            request.transactional_id, request.producer_id, request.producer_epoch,
            frozenset({(OFFSETS_TOPIC, partition)}), TV_1)
        code = for_version(code, ctx.api_version, fenced_from=FIRST_FENCED_VERSION,
                           abortable_from=FIRST_ABORTABLE_VERSION)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)
