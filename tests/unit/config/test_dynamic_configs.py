"""Dynamic broker configs in the config layer: layering, synonyms and sources, IncrementalAlterConfigs'
operations, validation, the persisted file, and the generated docs page."""

from __future__ import annotations

from pathlib import Path

import pytest

from pybroker.config.alter_ops import APPEND, DELETE, SET, SUBTRACT, apply_operations
from pybroker.config.broker_config import BrokerConfig, ConfigSource, validate_dynamic_broker
from pybroker.config.definitions import BROKER, TOPIC
from pybroker.config.docs import DOC_PATH, render_markdown
from pybroker.config.types import ConfigError
from pybroker.storage.dynamic_config_store import DynamicConfigStore
from pybroker.storage.errors import StorageError

ROOT = Path(__file__).resolve().parents[3]


def _config(**static: str) -> BrokerConfig:
    return BrokerConfig.load({"log.dirs": "/tmp/x", **{k.replace("_", "."): v for k, v in static.items()}})


def test_dynamic_layers_win_in_kafkas_order_and_show_as_synonyms() -> None:
    config = _config(log_retention_hours="10")
    assert config.resolve_topic("retention.ms", {}).value == 10 * 3_600_000
    config.set_dynamic(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, {"log.retention.ms": "5000"})
    resolved = config.resolve_topic("retention.ms", {})
    assert (resolved.value, resolved.source) == (5000, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    config.set_dynamic(ConfigSource.DYNAMIC_BROKER_CONFIG, {"log.retention.ms": "7000"})
    resolved = config.resolve_topic("retention.ms", {})
    assert (resolved.value, resolved.source) == (7000, ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert [(k, s) for k, _, s in resolved.synonyms] == [
        ("log.retention.ms", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", ConfigSource.STATIC_BROKER_CONFIG)]
    assert config.resolve_topic("retention.ms", {"retention.ms": "1"}).value == 1
    broker = config.resolve_broker("log.retention.ms")
    assert broker.source == ConfigSource.DYNAMIC_BROKER_CONFIG and broker.text == "7000"
    config.set_dynamic(ConfigSource.DYNAMIC_BROKER_CONFIG, {})
    assert config.get("log.retention.ms") == 5000


def test_only_dynamic_known_valid_broker_keys_are_accepted() -> None:
    assert validate_dynamic_broker({"log.cleaner.threads": "2"}) == {"log.cleaner.threads": "2"}
    for bad, words in [({"log.dirs": "/x"}, "cannot be updated dynamically"), ({"no.such": "1"}, "unknown"),
                       ({"log.cleaner.min.cleanable.ratio": "2"}, "between"),
                       ({"log.retention.bytes": "lots"}, "Not a number of type LONG")]:
        with pytest.raises(ConfigError, match=words):
            validate_dynamic_broker(bad)


@pytest.mark.parametrize(("current", "changes", "expected"), [
    ({}, [("retention.ms", SET, "5")], {"retention.ms": "5"}),
    ({"retention.ms": "5"}, [("retention.ms", DELETE, None)], {}),
    ({}, [("cleanup.policy", APPEND, "compact")], {"cleanup.policy": "delete,compact"}),
    ({"cleanup.policy": "delete,compact"}, [("cleanup.policy", SUBTRACT, "delete")], {"cleanup.policy": "compact"}),
    ({"cleanup.policy": "compact"}, [("cleanup.policy", APPEND, "compact")], {"cleanup.policy": "compact"}),
])
def test_incremental_operations(current: dict[str, str], changes: list[tuple[str, int, str | None]],
                                expected: dict[str, str]) -> None:
    assert apply_operations(current, changes, TOPIC, lambda key: "delete") == expected


@pytest.mark.parametrize(("changes", "words"), [
    ([("retention.ms", APPEND, "5")], "only allowed for list"),
    ([("retention.ms", 9, "5")], "unknown operation"),
    ([("nope", SET, "5")], "unknown config"),
    ([("retention.ms", SET, None)], "needs a value"),
    ([("retention.ms", SET, "1"), ("retention.ms", DELETE, None)], "more than once"),
])
def test_incremental_refusals_name_the_key(changes: list[tuple[str, int, str | None]], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        apply_operations({}, changes, TOPIC, lambda key: None)


def test_a_topic_delete_of_an_unknown_key_may_pass() -> None:
    assert apply_operations({"retention.ms": "5"}, [("nope", DELETE, None)], TOPIC, lambda key: None,
                            unknown_delete_ok=True) == {"retention.ms": "5"}
    with pytest.raises(ConfigError, match="unknown config"):
        apply_operations({}, [("nope", SET, "1")], TOPIC, lambda key: None, unknown_delete_ok=True)


def test_store_round_trip_and_corrupt_file(tmp_path: Path) -> None:
    store = DynamicConfigStore(tmp_path)
    assert store.load() == ({}, {})
    store.save({"log.retention.ms": "1"}, {"log.cleaner.threads": "2"})
    assert store.load() == ({"log.retention.ms": "1"}, {"log.cleaner.threads": "2"})
    store.path.write_text("{not json")
    with pytest.raises(StorageError, match="not a dynamic config file"):
        store.load()
    store.path.write_text('{"version": 1, "broker": {"a": 1}}')
    with pytest.raises(StorageError, match="strings"):
        store.load()


def test_every_dynamic_broker_key_is_in_the_table_and_docs_are_current() -> None:
    assert {"log.retention.ms", "log.retention.bytes", "log.cleaner.threads",
            "log.cleaner.io.max.bytes.per.second"} <= {k for k, d in BROKER.items() if d.dynamic}
    committed = (ROOT / DOC_PATH).read_text()
    assert committed == render_markdown(), "docs/configuration.md is out of date: run make docs"
