"""docs/metrics.md lists exactly the families the broker serves (and, apart, the cleaner's)."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pybroker.broker.app import BrokerApp
from pybroker.config.broker_config import BrokerConfig

DOC = Path(__file__).resolve().parents[4] / "docs" / "metrics.md"
CLEANER_SECTION = "## Families served by the log cleaner"


def _documented() -> tuple[set[str], set[str]]:
    text = DOC.read_text()
    broker_part, _, cleaner_part = text.partition(CLEANER_SECTION)
    pattern = re.compile(r"^\| `(pybroker_[a-z_]+)`", re.MULTILINE)
    return set(pattern.findall(broker_part)), set(pattern.findall(cleaner_part))


def _served() -> set[str]:
    """Family names on the page (a family with no samples yet still has its HELP and TYPE lines)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(generate_latest(REGISTRY).decode()):
        if family.name.startswith("pybroker_") and not family.name.startswith("pybroker_cleaner_") \
                and not family.name.endswith("_created"):
            names.add(f"{family.name}_total" if family.type == "counter" else family.name)
    return names


async def test_every_served_family_is_documented_and_every_documented_one_is_served(tmp_path: Path) -> None:
    config = BrokerConfig.load({"log.dirs": str(tmp_path / "d"), "listeners": "PLAINTEXT://127.0.0.1:0"})
    app = BrokerApp(config, metrics_port=0)
    await app.start()
    try:
        served = _served()
    finally:
        await app.stop()
    documented, cleaner = _documented()
    assert served == documented
    assert cleaner and all(name.startswith("pybroker_cleaner_") for name in cleaner)
