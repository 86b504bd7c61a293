"""Every conformance scenario, by id: what it sends, what of the answers is not compared, and the known
difference, if any, with its reason.

A scenario is a coroutine that takes a `Side` (tests/conformance/side.py) and sends requests through it;
the test (test_conformance.py) runs it once against a fresh pybroker and once against Apache Kafka (live) or
reads Kafka's answers from the recording (tests/conformance/recorded/), and compares the two lists of
answers field by field. `known` marks a scenario whose difference is not fixed: its test is a strict xfail,
so the fix that closes it fails the run until the mark goes, and docs/conformance.md lists the reason.
Modules that define scenarios are imported by `load()`; the registry is filled at import, from one thread.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tests.conformance.side import Side

Run = Callable[[Side], Awaitable[None]]

# the modules that register scenarios; each one's Kafka answers are recorded in recorded/<family>.json
FAMILIES = ("api_versions_table", "error_paths", "more_error_paths", "group_errors", "transaction_errors",
            "security_errors", "scram_errors", "streams_errors")


@dataclass(frozen=True)
class Scenario:
    id: str
    family: str
    run: Run
    title: str
    known: str | None = None
    # answer paths (as `differences` prints them, without the leading answer index) compared only by
    # presence: a suffix here and its reason, e.g. {".high_watermark": "..."}
    ignoring: dict[str, str] = field(default_factory=dict)
    # how both brokers are configured (tests/conformance/settings.py), and the user each connection logs in
    # as first (SASL PLAIN), if any
    setting: str = "plain"
    login: str | None = None
    # compare error message texts as they are (clients show them), not only their presence
    messages: bool = False


SCENARIOS: dict[str, Scenario] = {}


def add(scenario: Scenario) -> None:
    assert scenario.id not in SCENARIOS, f"two scenarios named {scenario.id}"
    SCENARIOS[scenario.id] = scenario


def scenario(id: str, family: str, title: str, known: str | None = None,
             ignoring: dict[str, str] | None = None, setting: str = "plain",
             login: str | None = None, messages: bool = False) -> Callable[[Run], Run]:
    def register(run: Run) -> Run:
        add(Scenario(id, family, run, title, known, ignoring or {}, setting, login, messages))
        return run
    return register


def load() -> dict[str, Scenario]:
    for family in FAMILIES:
        importlib.import_module(f"tests.conformance.{family}")
    return SCENARIOS
