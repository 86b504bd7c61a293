"""DescribeTransactions (key 65), version 0: the coordinator's record of each transactional id asked for.

Per id: state (Kafka's name), producer id and epoch, transaction timeout, the start time of the current
transaction (-1 when none), and the partitions in it (while PrepareCommit/PrepareAbort: those still
waiting for their marker). An id the coordinator does not hold, or holds as Dead, is
TRANSACTIONAL_ID_NOT_FOUND; while `__transaction_state` is still loading, COORDINATOR_LOAD_IN_PROGRESS.
An id named twice is described once.

Authorizes DESCRIBE on each transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for that id alone).
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_txn import describe_transactions_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)


def _describe(ctx: RequestContext, transactional_id: str) -> TransactionState:
    transactions = ctx.state.transactions
    error = transactions.coordinator.availability(transactional_id)
    if error:
        return TransactionState(error_code=error, transactional_id=transactional_id)
    found = transactions.get(transactional_id)  # Dead ones are not found
    if found is None:
        return TransactionState(error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, transactional_id=transactional_id)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(found.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return TransactionState(
        error_code=ErrorCode.NONE, transactional_id=transactional_id, transaction_state=found.state.value,
        transaction_timeout_ms=found.timeout_ms, transaction_start_time_ms=found.start_ms,
        producer_id=found.producer_id, producer_epoch=found.producer_epoch,
        topics=[TopicData(topic=name, partitions=parts) for name, parts in by_topic.items()])


@handler(ApiKey.DESCRIBE_TRANSACTIONS, versions=(0, 0), authorize=describe_transactions_rule)
def handle_describe_transactions(ctx: RequestContext, request: DescribeTransactionsRequest
                                 ) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=[
        _describe(ctx, transactional_id) for transactional_id in dict.fromkeys(request.transactional_ids)])
