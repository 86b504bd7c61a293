"""Dynamic broker configs: loaded at startup, changed by AlterConfigs, persisted, applied at once.

Two layers, as in Kafka: this broker's own (resource name = node id) and the cluster-wide default
(resource name ""). A change is validated against the config table (only keys marked dynamic may
change), written to the first log dir, put into `BrokerConfig`, and then applied: every partition log
gets its settings recomputed (retention, segment and flush settings follow their broker synonyms), and
listeners registered with `on_change` are told which keys changed — the place for components that read
broker keys themselves, such as the log cleaner's threads and I/O throttle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.config.broker_config import (
    BrokerConfig,
    ConfigSource,
    broker_definition,
    validate_dynamic_broker,
)
from pybroker.config.types import ConfigError
from pybroker.storage.dynamic_config_store import DynamicConfigStore

if TYPE_CHECKING:
    from pybroker.storage.log_manager import LogManager

log = get_logger("pybroker.config")

NODE = ConfigSource.DYNAMIC_BROKER_CONFIG
CLUSTER_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG

ChangeListener = Callable[[set[str]], None]


class DynamicBrokerConfigs:
    def __init__(self, config: BrokerConfig, logs: LogManager) -> None:
        self.config = config
        self.logs = logs
        self.store = DynamicConfigStore(Path(config.log_dirs[0]))
        self._texts: dict[ConfigSource, dict[str, str]] = {NODE: {}, CLUSTER_DEFAULT: {}}
        self._listeners: list[ChangeListener] = []
        self._checks: list[ChangeListener] = []

    def load(self) -> None:
        """Read the persisted layers into the config (before the logs open, so they start with them).

        A persisted key this version no longer accepts is dropped with a warning rather than
        stopping the broker; an unreadable file stops it (`StorageError`)."""
        node, default = self.store.load()
        for source, texts in ((NODE, node), (CLUSTER_DEFAULT, default)):
            usable: dict[str, str] = {}
            for key, text in texts.items():
                try:
                    usable.update(validate_dynamic_broker({key: text}))
                except ConfigError as exc:
                    log.warning("ignoring persisted dynamic config", key=key, reason=exc.message,
                                file=str(self.store.path))
            self._texts[source] = usable
            self.config.set_dynamic(source, usable)
        if node or default:
            log.info("dynamic broker configs loaded",
                     broker={key: _shown(key, text) for key, text in self._texts[NODE].items()},
                     cluster_default={key: _shown(key, text) for key, text in self._texts[CLUSTER_DEFAULT].items()})

    def overrides(self, source: ConfigSource) -> dict[str, str]:
        return dict(self._texts[source])

    def on_change(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    def check_with(self, check: ChangeListener) -> None:
        """`check(changed keys)` runs with the new values in force, before they are saved; a
        `ConfigError` refuses the change and puts the old values back (Kafka validates a dynamic
        update, e.g. a new key store, before applying it)."""
        self._checks.append(check)

    def replace(self, source: ConfigSource, texts: Mapping[str, str | None], *, validate_only: bool = False) -> None:
        """Make `texts` the whole of one layer; `ConfigError` if any key or value is refused."""
        clean = validate_dynamic_broker(texts)
        old = self._texts[source]
        changed = {key for key in set(old) | set(clean) if old.get(key) != clean.get(key)}
        if not changed:
            return
        layers = {**self._texts, source: clean}
        self.config.set_dynamic(source, clean)
        try:
            for check in self._checks:  # e.g. new TLS material must load before it is accepted
                check(changed)
            if not validate_only:
                self.store.save(layers[NODE], layers[CLUSTER_DEFAULT])
        except BaseException:
            self.config.set_dynamic(source, old)
            raise
        if validate_only:
            self.config.set_dynamic(source, old)
            return
        self._texts = layers
        self.logs.reapply_configs()
        log.info("dynamic broker configs changed", layer=source.name, changed=sorted(changed),
                 values={key: _shown(key, clean.get(key)) for key in sorted(changed)})
        for listener in self._listeners:
            try:
                listener(changed)
            except Exception:
                log.exception("dynamic config listener failed", changed=sorted(changed))


def _shown(key: str, text: str | None) -> str | None:
    """A value as it may be logged: secrets (passwords, inline keys) never are."""
    definition = broker_definition(key)
    return "[hidden]" if text is not None and definition is not None and definition.sensitive else text
