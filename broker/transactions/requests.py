"""What the transaction handlers share: id checks, per-version error codes, the internal topics made on
first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.protocol.errors import ErrorCode
from pybroker.storage.errors import StorageError

if TYPE_CHECKING:
    from pybroker.broker.context import RequestContext

log = get_logger("pybroker.transactions")

#: a transactional id is a TransactionLogKey string (int16 length): longer ones could never be stored
MAX_TRANSACTIONAL_ID_BYTES = 32_767


def id_error(transactional_id: str | None) -> ErrorCode:
    if not transactional_id or len(transactional_id.encode("utf-8", "surrogatepass")) > MAX_TRANSACTIONAL_ID_BYTES:
        return ErrorCode.INVALID_REQUEST
    return ErrorCode.NONE


def for_version(code: ErrorCode, api_version: int, *, fenced_from: int, abortable_from: int) -> ErrorCode:
    """Kafka's down-conversion for older clients: PRODUCER_FENCED was INVALID_PRODUCER_EPOCH, and
    TRANSACTION_ABORTABLE was INVALID_TXN_STATE, before the versions that introduced them."""
    if code is ErrorCode.PRODUCER_FENCED and api_version < fenced_from:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code is ErrorCode.TRANSACTION_ABORTABLE and api_version < abortable_from:
        return ErrorCode.INVALID_TXN_STATE
    return code


async def ensure_state_topic(ctx: RequestContext) -> bool:
    """Create `__transaction_state` on first use (on a worker thread); False if that failed."""
    topic = ctx.state.transactions.state_topic
    if topic.exists():
        return True
    try:
        await topic.ensure_off_loop()
    except (OSError, StorageError) as exc:  # a failing disk, or the partition cap reached
        log.error("cannot create the transaction state topic", error=str(exc), client_id=ctx.client_id)
        return False
    return True


async def ensure_offsets_topic(ctx: RequestContext) -> bool:
    topic = ctx.state.groups.offsets_topic
    if topic.exists():
        return True
    try:
        await topic.ensure_off_loop()
    except (OSError, StorageError) as exc:
        log.error("cannot create the offsets topic", error=str(exc), client_id=ctx.client_id)
        return False
    return True
