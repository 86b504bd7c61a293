"""README's "What it serves" names every API the broker registers with the versions ApiVersions advertises, so
the list cannot drift from what is really served (a new handler fails this test until the README says so)."""

from __future__ import annotations

import re
from pathlib import Path

from pybroker.broker.dispatch import load_handlers, supported_versions
from pybroker.protocol.api_keys import ApiKey

README = Path(__file__).resolve().parents[2] / "README.md"


def _camel(key: ApiKey) -> str:
    return "".join(part.capitalize() for part in key.name.split("_"))


def _section() -> str:
    text = README.read_text()
    start = text.index("## What it serves")
    return re.sub(r"\s+", " ", text[start:text.index("\n## ", start + 1)])


def test_readme_lists_every_served_api_with_its_versions() -> None:
    load_handlers()
    section = _section()
    missing = []
    for key, low, high in supported_versions():
        name = _camel(ApiKey(key))
        versions = f"{low}" if low == high else f"{low}-{high}"
        if not re.search(rf"\b{re.escape(name)} {re.escape(versions)}\b", section):
            missing.append(f"{name} {versions}")
    assert not missing, f"README's 'What it serves' lacks: {', '.join(missing)}"
