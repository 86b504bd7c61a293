"""No property test may fail because the machine is busy: hypothesis's per-example deadline and its
too-slow health check are off for the whole suite (`tests/conftest.py`), and a test's own `settings(...)`
may not turn them back on. A test that names `suppress_health_check` replaces the profile's list, so it
must keep `HealthCheck.too_slow` in it."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import HealthCheck, settings

TESTS = Path(__file__).resolve().parents[1]


def test_the_suite_runs_hypothesis_without_timing_checks() -> None:
    assert settings.default.deadline is None
    assert HealthCheck.too_slow in settings.default.suppress_health_check


def _keeps_too_slow(value: ast.expr) -> bool:
    if isinstance(value, ast.Call) and ast.unparse(value) == "list(HealthCheck)":
        return True  # every check suppressed
    return isinstance(value, ast.List | ast.Tuple) and any(ast.unparse(e).endswith("HealthCheck.too_slow")
                                                           for e in value.elts)


def _offences(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func) in ("settings", "hypothesis.settings")):
            continue
        for keyword in node.keywords:
            where = f"{path.relative_to(TESTS.parent)}:{node.lineno}"
            if keyword.arg == "deadline" and not (isinstance(keyword.value, ast.Constant)
                                                  and keyword.value.value is None):
                found.append(f"{where}: deadline={ast.unparse(keyword.value)}")
            if keyword.arg == "suppress_health_check" and not _keeps_too_slow(keyword.value):
                found.append(f"{where}: suppress_health_check without HealthCheck.too_slow")
    return found


def test_no_property_test_turns_a_timing_check_back_on() -> None:
    offences = [o for path in sorted(TESTS.rglob("*.py")) for o in _offences(path)]
    assert not offences, "\n".join(offences)
