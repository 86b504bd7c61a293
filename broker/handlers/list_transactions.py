"""ListTransactions (key 66), versions 0-2: the transactional ids this coordinator holds, with producer id
and state, filtered as the request asks.

- v0: by state names (Kafka's exact names: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit,
  CompleteAbort, PrepareEpochFence); a name Kafka does not know is echoed back in `unknown_state_filters`
  with no error, and matches nothing; by producer ids. Empty filter lists mean "all".
- v1: `duration_filter` >= 0 leaves out transactions that started no longer than that many ms ago (as
  Kafka compares: now - start time <= duration is left out).
- v2: `transactional_id_pattern`, a regular expression the whole id must match (KIP-1152); null or empty
  means all; a pattern that does not compile is INVALID_REGULAR_EXPRESSION with nothing listed. It is
  matched in linear time (`broker/id_pattern.py`), off the event loop: a pattern cannot stall the broker.

Ids in state Dead (being expired) are never listed, as in Kafka. While the coordinator is still loading
`__transaction_state` the answer is COORDINATOR_LOAD_IN_PROGRESS.

Authorizes DESCRIBE on each listed transactional id: the listing leaves out the ids the principal may not
describe (no error), as Kafka filters it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.id_pattern import IdPattern, PatternError
from pybroker.broker.security.authorization_txn import list_transactions_rule
from pybroker.broker.transactions.metadata import TxnMetadata
from pybroker.broker.transactions.state_machine import TxnState
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from pybroker.protocol.messages.list_transactions import TransactionState as ListedTransaction

#: Kafka's transaction state names (TransactionState.fromName is exact)
KNOWN_STATES = frozenset(state.value for state in TxnState)


Keep = Callable[[TxnMetadata], bool]


def _filters(request: ListTransactionsRequest, now_ms: int) -> list[Keep]:
    keep: list[Keep] = [lambda t: t.state is not TxnState.DEAD]
    if request.state_filters:
        states = set(request.state_filters)
        keep.append(lambda t: t.state.value in states)
    if request.producer_id_filters:
        producer_ids = set(request.producer_id_filters)
        keep.append(lambda t: t.producer_id in producer_ids)
    if request.duration_filter >= 0:
        duration = request.duration_filter
        keep.append(lambda t: now_ms - t.start_ms > duration)
    if request.transactional_id_pattern:
        pattern = IdPattern(request.transactional_id_pattern)  # PatternError: the caller answers it
        keep.append(lambda t: pattern.matches(t.transactional_id))
    return keep


def _listing(transactions: list[TxnMetadata], keep: list[Keep], unknown: list[str]) -> ListTransactionsResponse:
    listed = [ListedTransaction(transactional_id=t.transactional_id, producer_id=t.producer_id,
                                transaction_state=t.state.value)
              for t in transactions if all(k(t) for k in keep)]
    return ListTransactionsResponse(error_code=ErrorCode.NONE, unknown_state_filters=unknown,
                                    transaction_states=listed)


@handler(ApiKey.LIST_TRANSACTIONS, versions=(0, 2), authorize=list_transactions_rule)
def handle_list_transactions(ctx: RequestContext, request: ListTransactionsRequest
                             ) -> ListTransactionsResponse | Awaitable[ListTransactionsResponse]:
    unknown = list(dict.fromkeys(s for s in request.state_filters if s not in KNOWN_STATES))
    try:
        keep = _filters(request, ctx.state.clock_ms())
    except PatternError:
        return ListTransactionsResponse(error_code=ErrorCode.INVALID_REGULAR_EXPRESSION, unknown_state_filters=unknown)
    if ctx.state.transactions.coordinator.loading:
        return ListTransactionsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                        unknown_state_filters=unknown)
    transactions = ctx.state.transactions.all()  # immutable snapshots: safe to filter off the loop
    if request.transactional_id_pattern:
        return asyncio.to_thread(_listing, transactions, keep, unknown)
    return _listing(transactions, keep, unknown)
