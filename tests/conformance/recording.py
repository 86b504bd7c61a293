"""Kafka's recorded answers: what `make test` compares pybroker's with, without starting Kafka.

How a run gets Kafka's answers is chosen by `PYBROKER_CONFORMANCE` (`mode()`):
- unset (`make test`): from the recordings in tests/conformance/recorded/<family>.json; Kafka is not started;
- `live` (`make conformance`): from a Kafka node started for the run, the recordings untouched;
- `record` (`make conformance RECORD=1`): live, and the answers written back into the recordings.
The scenario code is the same in the three modes: only where Kafka's side comes from changes. A recording
is JSON with sorted keys, one answer list per scenario id, so a re-record shows in a diff as what changed.
Called from the test's thread only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ENV = "PYBROKER_CONFORMANCE"
MODES = ("recorded", "live", "record")
DIRECTORY = Path(__file__).parent / "recorded"


def mode() -> str:
    chosen = os.environ.get(ENV) or "recorded"
    assert chosen in MODES, f"{ENV}={chosen!r}: one of {', '.join(MODES)}"
    return chosen


def path_of(family: str) -> Path:
    return DIRECTORY / f"{family}.json"


def load(family: str) -> dict[str, Any]:
    path = path_of(family)
    if not path.exists():
        return {}
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def store(family: str, answers: dict[str, Any], keep: set[str]) -> None:
    """Merge `answers` into the family's recording; ids not in `keep` (scenarios gone) are dropped."""
    merged = {k: v for k, v in load(family).items() if k in keep}
    merged.update(answers)
    DIRECTORY.mkdir(exist_ok=True)
    path_of(family).write_text(json.dumps(merged, sort_keys=True, indent=0, separators=(",", ":")) + "\n")
