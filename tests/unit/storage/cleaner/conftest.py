"""`cleaner_kind`: a test that uses it (most modules here, by `pytestmark`) runs once with the in-process
cleaner and once with the worker process (`helpers.cleaner()` builds the one the run asks for)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.storage.cleaner import helpers

KINDS = ("thread", "process")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cleaner_kind" in metafunc.fixturenames:
        metafunc.parametrize("cleaner_kind", KINDS, indirect=True)


@pytest.fixture
def cleaner_kind(request: pytest.FixtureRequest) -> Iterator[str]:
    helpers.KIND["value"] = request.param
    try:
        yield request.param
    finally:
        helpers.KIND["value"] = "thread"
        helpers.close_process_cleaners()


@pytest.fixture(scope="session", autouse=True)
def _shared_cleaner_worker() -> Iterator[None]:
    yield
    helpers.close_shared_worker()
