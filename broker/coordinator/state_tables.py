"""A coordinator's state machine as one table: `(state, event) -> next state`, and nothing else.

Classic groups, consumer groups and their members, and transactional ids each keep their states and
events in their own module, with the table that is their spec; what they share is this: the next state
is a lookup, and a pair missing from the table is a bug, not a client error, so it raises. Pure and
thread-agnostic (the coordinators call it on the event loop's thread).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from typing import TypeVar

S = TypeVar("S", bound=Enum)
E = TypeVar("E", bound=Enum)


class IllegalTransition(Exception):
    """A (state, event) pair a coordinator's table does not have."""


def state_table(transitions: Mapping[tuple[S, E], S], *, what: str = "transition",
                error: type[IllegalTransition] = IllegalTransition) -> Callable[[S, E], S]:
    """The `next_state(state, event)` of `transitions` (raising `error` for a missing pair)."""

    def next_state(state: S, event: E) -> S:
        try:
            return transitions[(state, event)]
        except KeyError:
            label = state.value if isinstance(state.value, str) else state.name
            raise error(f"no {what} from {label} on {event.value}") from None

    return next_state
