"""EndTxn (key 26), versions 0-5: commit or abort a producer's transaction.

The coordinator writes PrepareCommit/PrepareAbort to `__transaction_state` (fsynced) and answers; the
markers are then written into every partition of the transaction, after which CompleteCommit/
CompleteAbort is written (a crash in between: the restart completes it). A retry of an end that already
completed is answered NONE. Errors: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (v2+; INVALID_PRODUCER_EPOCH
before), CONCURRENT_TRANSACTIONS (the same end still completing), INVALID_TXN_STATE (commit with nothing
open, or the opposite of a prepared end), COORDINATOR_LOAD_IN_PROGRESS. v3 is flexible; v4 may answer
TRANSACTION_ABORTABLE.

v5 is transactions v2 (KIP-890): every commit or abort bumps the producer epoch (a fresh producer id
when the epoch is exhausted), an abort with nothing open is allowed, and the answer carries the producer
id and epoch the client uses next. With KIP-939, the client that resumed a prepared transaction
(InitProducerId keep_prepared_txn) ends it with its new producer id at epoch 0.

Authorizes: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_txn import end_txn_rule
from pybroker.broker.transactions.metadata import TV_1, TV_2
from pybroker.broker.transactions.requests import for_version, id_error
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse

FIRST_FENCED_VERSION = 2
FIRST_ABORTABLE_VERSION = 4
FIRST_V2_VERSION = 5


@handler(ApiKey.END_TXN, versions=(0, 5), authorize=end_txn_rule)
def handle_end_txn(ctx: RequestContext, request: EndTxnRequest) -> object:
    return _end(ctx, request)


async def _end(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    code = id_error(request.transactional_id)
    if code is not ErrorCode.NONE:
        return EndTxnResponse(throttle_time_ms=0, error_code=code)
    version = TV_2 if ctx.api_version >= FIRST_V2_VERSION else TV_1
    result = await ctx.state.transactions.coordinator.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, bool(request.committed), version)
    code = for_version(result.error, ctx.api_version, fenced_from=FIRST_FENCED_VERSION,
                       abortable_from=FIRST_ABORTABLE_VERSION)
    if code is not ErrorCode.NONE:
        return EndTxnResponse(throttle_time_ms=0, error_code=code)
    return EndTxnResponse(throttle_time_ms=0, error_code=code, producer_id=result.producer_id,
                          producer_epoch=result.producer_epoch)
