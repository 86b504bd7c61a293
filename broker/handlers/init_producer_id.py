"""InitProducerId (key 22), versions 0-6: producer ids for idempotent and transactional producers.

Without a transactional id, as in Kafka, a request always gets a fresh producer id at epoch 0 (the id
and epoch v3+ may carry are not reused). Ids come from a persisted block allocator and never repeat
across restarts.

With a transactional id the transaction coordinator answers (`broker/transactions/`): the first call
makes the id's state (in `__transaction_state`, created on first use) with a new producer id; later
calls bump the epoch, which fences the previous producer of that id. An open transaction is aborted
first (its epoch fenced) and the caller told CONCURRENT_TRANSACTIONS until that is done; an epoch about
to be exhausted moves the id to a new producer id. `transaction_timeout_ms` must be within
`transaction.max.timeout.ms` (INVALID_TRANSACTION_TIMEOUT). v3+ (KIP-360): a producer passing its id and
epoch keeps its producer id when it is still the current one (or the previous one after a rotation),
and gets PRODUCER_FENCED otherwise (INVALID_PRODUCER_EPOCH before v4). v5 adds TRANSACTION_ABORTABLE.

v6 (KIP-939): `enable_2pc` makes a transaction that never times out (allowed only with
`transaction.two.phase.commit.enable`, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); `keep_prepared_txn`
leaves an open transaction as it is and answers its producer id and epoch in
`ongoing_txn_producer_id/epoch`, with a new producer id for the caller, who may then only commit or
abort it with EndTxn (Kafka 4.2 refuses this path; we serve it as the KIP specifies).

Authorizes: WRITE on the transactional id (and TWO_PHASE_COMMIT with `enable_2pc`); without one,
IDEMPOTENT_WRITE on the cluster or WRITE on some topic (`broker/security/authorization_txn.py`).
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_txn import init_producer_id_rule
from pybroker.broker.transactions.requests import ensure_state_topic, for_version, id_error
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

FIRST_FENCED_VERSION = 4
FIRST_ABORTABLE_VERSION = 5


def _answer(code: ErrorCode, producer_id: int = -1, epoch: int = -1, ongoing_id: int = -1,
            ongoing_epoch: int = -1) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=producer_id,
                                  producer_epoch=epoch, ongoing_txn_producer_id=ongoing_id,
                                  ongoing_txn_producer_epoch=ongoing_epoch)


@handler(ApiKey.INIT_PRODUCER_ID, versions=(0, 6), authorize=init_producer_id_rule)
def handle_init_producer_id(ctx: RequestContext, request: InitProducerIdRequest) -> Any:
    if request.transactional_id is not None:
        return _transactional(ctx, request)
    if request.enable_2pc or request.keep_prepared_txn:
        return _answer(ErrorCode.INVALID_REQUEST)  # two-phase commit needs a transactional id
    try:
        return _answer(ErrorCode.NONE, ctx.state.next_producer_id(), 0)
    except OSError:
        return _answer(ErrorCode.KAFKA_STORAGE_ERROR)


async def _transactional(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    """Work: the state topic may be created, the state change is fsynced, an open transaction aborted."""
    transactional_id = request.transactional_id
    assert transactional_id is not None
    code = id_error(transactional_id)
    if code is not ErrorCode.NONE:
        return _answer(code)
    if not await ensure_state_topic(ctx):
        return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    try:
        result = await ctx.state.transactions.coordinator.init_producer_id(
            transactional_id, request.transaction_timeout_ms, request.producer_id, request.producer_epoch,
            enable_2pc=bool(request.enable_2pc), keep_prepared=bool(request.keep_prepared_txn))
    except OSError:  # the producer id block could not be persisted
        return _answer(ErrorCode.KAFKA_STORAGE_ERROR)
    code = for_version(result.error, ctx.api_version, fenced_from=FIRST_FENCED_VERSION,
                       abortable_from=FIRST_ABORTABLE_VERSION)
    if code is not ErrorCode.NONE:
        return _answer(code)
    return _answer(code, result.producer_id, result.producer_epoch, result.ongoing_producer_id,
                   result.ongoing_producer_epoch)
