"""The transaction state table: Kafka's legal moves, and nothing else."""

from __future__ import annotations

import pytest

from pybroker.broker.transactions.state_machine import (
    STATE_CODES,
    TRANSITIONS,
    IllegalTransition,
    TxnEvent,
    TxnState,
    next_state,
)

S, E = TxnState, TxnEvent

#: Kafka's `TransactionState.validPreviousStates` (transactions v2 included)
KAFKA_PREVIOUS: dict[TxnState, set[TxnState]] = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def test_every_move_of_the_table_is_one_kafka_allows() -> None:
    for (before, _event), after in TRANSITIONS.items():
        assert before in KAFKA_PREVIOUS[after], f"{before.value} -> {after.value}"


def test_every_move_kafka_allows_has_an_event() -> None:
    reachable = {(before, after) for (before, _), after in TRANSITIONS.items()}
    for after, befores in KAFKA_PREVIOUS.items():
        for before in befores:
            assert (before, after) in reachable, f"{before.value} -> {after.value} has no event"


@pytest.mark.parametrize("state", list(S))
@pytest.mark.parametrize("event", list(E))
def test_a_pair_missing_from_the_table_raises(state: TxnState, event: TxnEvent) -> None:
    if (state, event) in TRANSITIONS:
        assert next_state(state, event) is TRANSITIONS[(state, event)]
    else:
        with pytest.raises(IllegalTransition):
            next_state(state, event)


def test_dead_and_the_prepared_states_only_leave_as_kafka_says() -> None:
    assert not [k for k in TRANSITIONS if k[0] is S.DEAD]
    assert {e for (s, e) in TRANSITIONS if s.is_prepared} == {E.MARKERS_WRITTEN}
    assert {e for (s, e) in TRANSITIONS if s is S.PREPARE_EPOCH_FENCE} == {E.PREPARE_ABORT}


def test_state_codes_are_kafkas() -> None:
    assert [STATE_CODES[s] for s in (S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT,
                                     S.COMPLETE_ABORT, S.DEAD, S.PREPARE_EPOCH_FENCE)] == list(range(8))
    for state in S:
        assert TxnState.from_code(state.code) is state
    with pytest.raises(ValueError):
        TxnState.from_code(8)
