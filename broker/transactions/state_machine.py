"""A transactional id's states and the events that move it between them, as one table.

Kafka's transaction coordinator: a transactional id is Empty after InitProducerId; the first partition
added makes its transaction Ongoing; EndTxn (or the coordinator, on a timeout or a new producer's
InitProducerId) moves it to PrepareCommit or PrepareAbort, which is written to `__transaction_state`
before any marker; once every partition has its marker it is CompleteCommit or CompleteAbort, from
which the next transaction starts. PrepareEpochFence is the coordinator's own step before aborting a
transaction it must take away from its producer (a timeout, or a new producer with the same id): the
epoch is bumped so the old producer is fenced. Dead is an id whose state expired.

`next_state` is a pure function of (state, event): the coordinator decides which event happened, this
table decides where that leads. A pair missing from the table is a bug, not a client error, so it raises.
The numeric codes are those of Kafka's `TransactionState` (what `__transaction_state` values carry).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from pybroker.broker.coordinator.state_tables import IllegalTransition as IllegalTransition
from pybroker.broker.coordinator.state_tables import state_table


class TxnState(Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    @property
    def code(self) -> int:
        return STATE_CODES[self]

    @classmethod
    def from_code(cls, code: int) -> TxnState:
        try:
            return _BY_CODE[code]
        except KeyError:
            raise ValueError(f"unknown transaction state code {code}") from None

    @property
    def is_prepared(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        """No transaction open: a new one may begin (Kafka's Empty, CompleteCommit, CompleteAbort)."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


#: Kafka's `TransactionState.id()` values, as stored in TransactionLogValue.TransactionStatus
STATE_CODES: dict[TxnState, int] = {
    TxnState.EMPTY: 0, TxnState.ONGOING: 1, TxnState.PREPARE_COMMIT: 2, TxnState.PREPARE_ABORT: 3,
    TxnState.COMPLETE_COMMIT: 4, TxnState.COMPLETE_ABORT: 5, TxnState.DEAD: 6, TxnState.PREPARE_EPOCH_FENCE: 7,
}
_BY_CODE = {code: state for state, code in STATE_CODES.items()}


class TxnEvent(Enum):
    #: InitProducerId with no transaction open: a bumped epoch (or a new producer id), nothing in flight
    INIT_PRODUCER = "init producer"
    #: partitions (or the group's offsets partition) joined the transaction
    ADD_PARTITIONS = "add partitions"
    #: InitProducerId with keep_prepared_txn (KIP-939): a new client takes over the open transaction
    KEEP_PREPARED = "keep prepared"
    #: the coordinator takes the transaction from its producer (timeout, new producer): epoch bumped
    FENCE = "fence"
    #: EndTxn(commit) accepted
    PREPARE_COMMIT = "prepare commit"
    #: EndTxn(abort) accepted, or the coordinator's abort after a fence (v2: also with nothing open)
    PREPARE_ABORT = "prepare abort"
    #: every partition of the transaction has its marker
    MARKERS_WRITTEN = "markers written"
    #: the id was idle past `transactional.id.expiration.ms`
    EXPIRE = "expire"


S = TxnState
E = TxnEvent

TRANSITIONS: dict[tuple[TxnState, TxnEvent], TxnState] = {
    (S.EMPTY, E.INIT_PRODUCER): S.EMPTY,
    (S.COMPLETE_COMMIT, E.INIT_PRODUCER): S.EMPTY,
    (S.COMPLETE_ABORT, E.INIT_PRODUCER): S.EMPTY,
    (S.EMPTY, E.ADD_PARTITIONS): S.ONGOING,
    (S.ONGOING, E.ADD_PARTITIONS): S.ONGOING,
    (S.COMPLETE_COMMIT, E.ADD_PARTITIONS): S.ONGOING,
    (S.COMPLETE_ABORT, E.ADD_PARTITIONS): S.ONGOING,
    (S.ONGOING, E.KEEP_PREPARED): S.ONGOING,
    (S.ONGOING, E.FENCE): S.PREPARE_EPOCH_FENCE,
    (S.ONGOING, E.PREPARE_COMMIT): S.PREPARE_COMMIT,
    (S.ONGOING, E.PREPARE_ABORT): S.PREPARE_ABORT,
    (S.PREPARE_EPOCH_FENCE, E.PREPARE_ABORT): S.PREPARE_ABORT,
    # transactions v2: an abort with nothing open is accepted (and bumps the epoch)
    (S.EMPTY, E.PREPARE_ABORT): S.PREPARE_ABORT,
    (S.COMPLETE_COMMIT, E.PREPARE_ABORT): S.PREPARE_ABORT,
    (S.COMPLETE_ABORT, E.PREPARE_ABORT): S.PREPARE_ABORT,
    (S.PREPARE_COMMIT, E.MARKERS_WRITTEN): S.COMPLETE_COMMIT,
    (S.PREPARE_ABORT, E.MARKERS_WRITTEN): S.COMPLETE_ABORT,
    (S.EMPTY, E.EXPIRE): S.DEAD,
    (S.COMPLETE_COMMIT, E.EXPIRE): S.DEAD,
    (S.COMPLETE_ABORT, E.EXPIRE): S.DEAD,
}


next_state: Callable[[TxnState, TxnEvent], TxnState] = state_table(TRANSITIONS)
