"""One transactional id's state as the coordinator holds it, and Kafka's pure transitions over it.

`TxnMetadata` is an immutable snapshot: each transition returns a new one (Kafka's `TxnTransitMetadata`),
which the coordinator writes to `__transaction_state` and adopts only once it is durable. Every
transition goes through the state table (`state_machine.next_state`), takes the time as an argument, and
raises `TxnError` with the code the client must see when the request may not make it.

The producer ids and epochs follow Kafka's `TransactionMetadata`:

- `producer_id` / `producer_epoch`: the producer's current identity (markers carry them);
- `last_producer_epoch`: the epoch before the last bump, so a retried InitProducerId is recognised;
- `prev_producer_id`: the id used before a rotation (epoch exhaustion), for the same reason;
- `next_producer_id`: the id the producer moves to once the prepared transaction completes: set when a
  transactions-v2 commit or abort exhausts the epoch, and (KIP-939) when a new client took over a
  prepared transaction with `keep_prepared_txn`: that client's id, at epoch 0, while the transaction
  keeps its own id and epoch until its markers are written.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pybroker.broker.transactions.state_machine import TxnEvent, TxnState, next_state
from pybroker.protocol.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: Kafka never hands out the last two epochs: one is kept for the bump that fences, one for v2's end bump
MAX_EPOCH = 2**15 - 1
#: the timeout a two-phase-commit transaction stores: it never times out (KIP-939)
NO_TIMEOUT_MS = 2**31 - 1
#: the client transaction versions Kafka records (0 and 1 are the classic protocol; 2 is KIP-890's)
TV_1 = 1
TV_2 = 2

TopicPartition = tuple[str, int]


class TxnError(Exception):
    """A request the current state refuses, with the error code the client reacts to."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


def epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    last_update_ms: int
    partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    start_ms: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_version: int = 0

    # -- queries -------------------------------------------------------------------------------
    @property
    def two_phase(self) -> bool:
        """A KIP-939 participant: its transaction never times out."""
        return self.timeout_ms == NO_TIMEOUT_MS

    @property
    def recovering(self) -> bool:
        """An open transaction handed to a new client by InitProducerId(keep_prepared_txn)."""
        return self.state is TxnState.ONGOING and self.next_producer_id != NO_PRODUCER_ID

    def timed_out(self, now: int) -> bool:
        return (self.state is TxnState.ONGOING and not self.two_phase
                and self.start_ms >= 0 and now > self.start_ms + self.timeout_ms)

    def _to(self, event: TxnEvent, **changes: object) -> TxnMetadata:
        return replace(self, state=next_state(self.state, event), **changes)  # type: ignore[arg-type]


# -- InitProducerId ----------------------------------------------------------------------------------
def new_metadata(transactional_id: str, producer_id: int, timeout_ms: int, now: int) -> TxnMetadata:
    """A transactional id seen for the first time: an id, no epoch yet (the first bump makes it 0)."""
    return TxnMetadata(transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms, TxnState.EMPTY, now)


def increment_epoch(meta: TxnMetadata, timeout_ms: int, expected_epoch: int | None, now: int) -> TxnMetadata:
    """Kafka's `prepareIncrementProducerEpoch`: a new producer (no expected epoch) or the same one
    recovering (its epoch matches) gets the next epoch; a retry of a bump that succeeded (the last epoch)
    gets the current one again; any other epoch was fenced."""
    if epoch_exhausted(meta.producer_epoch):
        raise AssertionError("exhausted epochs are rotated, not bumped")
    if expected_epoch is None:
        epoch, last = meta.producer_epoch + 1, NO_PRODUCER_EPOCH
    elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == meta.producer_epoch:
        epoch, last = meta.producer_epoch + 1, meta.producer_epoch
    elif expected_epoch == meta.last_producer_epoch:
        epoch, last = meta.producer_epoch, meta.last_producer_epoch
    else:
        raise TxnError(ErrorCode.PRODUCER_FENCED, "the producer epoch was fenced by a newer producer")
    return meta._to(TxnEvent.INIT_PRODUCER, producer_epoch=epoch, last_producer_epoch=last,
                    timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1, last_update_ms=now,
                    next_producer_id=NO_PRODUCER_ID)


def rotate_producer_id(meta: TxnMetadata, new_producer_id: int, timeout_ms: int, now: int,
                       record_last_epoch: bool) -> TxnMetadata:
    """Kafka's `prepareProducerIdRotation`: the epoch is exhausted, so a fresh id starts at epoch 0."""
    return meta._to(TxnEvent.INIT_PRODUCER, producer_id=new_producer_id, producer_epoch=0,
                    prev_producer_id=meta.producer_id,
                    last_producer_epoch=meta.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                    timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1, last_update_ms=now,
                    next_producer_id=NO_PRODUCER_ID)


def keep_prepared(meta: TxnMetadata, new_producer_id: int, now: int) -> TxnMetadata:
    """KIP-939 recovery: the open transaction keeps its id and epoch (its markers will use them) and a new
    client gets `new_producer_id` at epoch 0, with which it may only commit or abort that transaction."""
    return meta._to(TxnEvent.KEEP_PREPARED, next_producer_id=new_producer_id, last_update_ms=now)


def fence_epoch(meta: TxnMetadata, failed_fence: bool) -> TxnMetadata:
    """Kafka's `prepareFenceProducerEpoch`: the coordinator takes the transaction from its producer. The
    bumped epoch is never handed out; a fence whose write failed is not bumped again."""
    epoch = meta.producer_epoch if failed_fence or meta.producer_epoch >= MAX_EPOCH else meta.producer_epoch + 1
    return meta._to(TxnEvent.FENCE, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH,
                    next_producer_id=NO_PRODUCER_ID)


# -- AddPartitionsToTxn / AddOffsetsToTxn / Produce v12 ----------------------------------------------
def add_partitions(meta: TxnMetadata, added: frozenset[TopicPartition], client_version: int,
                   now: int) -> TxnMetadata:
    start = now if meta.state.is_complete else meta.start_ms
    return meta._to(TxnEvent.ADD_PARTITIONS, partitions=meta.partitions | added, start_ms=start,
                    last_update_ms=now, client_version=client_version)


# -- EndTxn ------------------------------------------------------------------------------------------
def prepare_end(meta: TxnMetadata, commit: bool, client_version: int, next_producer_id: int,
                now: int, nothing_added: bool = False) -> TxnMetadata:
    """Kafka's `prepareAbortOrCommit`. With transactions v2 the epoch is bumped by every end (so each
    transaction is its own (id, epoch)); `next_producer_id` is the id after an exhausted epoch, or the
    new client's id of a KIP-939 recovery (whose markers also carry a bumped epoch, to fence the old
    client's late writes)."""
    bump = client_version >= TV_2 or meta.recovering
    if bump and meta.producer_epoch < MAX_EPOCH:
        epoch, last = meta.producer_epoch + 1, meta.producer_epoch
    elif bump:
        epoch, last = meta.producer_epoch, meta.producer_epoch  # a broken state: let the abort through
    else:
        epoch, last = meta.producer_epoch, meta.last_producer_epoch
    event = TxnEvent.PREPARE_COMMIT if commit else TxnEvent.PREPARE_ABORT
    return meta._to(event, producer_epoch=epoch, last_producer_epoch=last,
                    next_producer_id=next_producer_id,
                    start_ms=now if nothing_added else meta.start_ms, last_update_ms=now,
                    client_version=client_version)


def complete(meta: TxnMetadata, now: int) -> TxnMetadata:
    """Kafka's `prepareComplete`: every marker is written. The producer moves to `next_producer_id` at
    epoch 0 when one was chosen (exhausted epoch, or the KIP-939 client that completed the transaction)."""
    if meta.next_producer_id != NO_PRODUCER_ID:
        producer_id, epoch, prev = meta.next_producer_id, 0, meta.producer_id
    else:
        producer_id, epoch, prev = meta.producer_id, meta.producer_epoch, meta.prev_producer_id
    return meta._to(TxnEvent.MARKERS_WRITTEN, producer_id=producer_id, producer_epoch=epoch,
                    prev_producer_id=prev, next_producer_id=NO_PRODUCER_ID, partitions=frozenset(),
                    last_update_ms=now)


def expire(meta: TxnMetadata) -> TxnMetadata:
    return meta._to(TxnEvent.EXPIRE, partitions=frozenset())
