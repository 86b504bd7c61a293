"""InitProducerId (key 22), versions 0-5: producer ids for idempotent producers.

As in Kafka, a request without a transactional id always gets a fresh producer id at epoch 0 (the id
and epoch it may carry from v3 on are not reused: a bumped epoch is a transaction coordinator's job).
Ids come from a persisted block allocator and never repeat across restarts. Transactions are not
implemented yet, so a transactional id is answered COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse


def _answer(code: ErrorCode, producer_id: int = -1, epoch: int = -1) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=producer_id,
                                  producer_epoch=epoch)


@handler(ApiKey.INIT_PRODUCER_ID, versions=(0, 5))
def handle_init_producer_id(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    try:
        return _answer(ErrorCode.NONE, ctx.state.next_producer_id(), 0)
    except OSError:
        return _answer(ErrorCode.KAFKA_STORAGE_ERROR)
