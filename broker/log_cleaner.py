"""The log cleaner as the broker runs it: `log.cleaner.*` settings in, a `CleanerManager` out.

Kept apart from `state` so the wiring of the cleaner's hooks (the log-dir failure channel for I/O
errors, the offline-dir predicate) has one place to go.
"""

from __future__ import annotations

from collections.abc import Callable

from pybroker.config.broker_config import BrokerConfig
from pybroker.storage.cleaner.manager import CleanerManager, CleanerSettings
from pybroker.storage.log_manager import LogManager


def cleaner_settings(config: BrokerConfig) -> CleanerSettings:
    return CleanerSettings(
        enabled=bool(config.get("log.cleaner.enable")),
        threads=int(config.get("log.cleaner.threads")),
        dedupe_buffer_size=int(config.get("log.cleaner.dedupe.buffer.size")),
        io_max_bytes_per_second=float(config.get("log.cleaner.io.max.bytes.per.second")),
        backoff_ms=int(config.get("log.cleaner.backoff.ms")),
        process=bool(config.get("log.cleaner.process.enable")),
        process_nice=int(config.get("log.cleaner.process.niceness")),
    )


def build_cleaner(config: BrokerConfig, logs: LogManager, clock_ms: Callable[[], int]) -> CleanerManager:
    return CleanerManager(logs, cleaner_settings(config), clock_ms=clock_ms,
                          on_io_error=logs.failures.report, is_dir_online=logs.failures.is_online)


def follow_dynamic_configs(cleaner: CleanerManager, config: BrokerConfig,
                           on_change: Callable[[Callable[[set[str]], None]], None]) -> None:
    """Apply `log.cleaner.*` changes made with AlterConfigs while the broker runs, as Kafka does: the
    throttle and backoff at once, a new dedupe buffer size from the next clean, and a changed thread
    count or on/off switch by restarting the cleaner's threads."""

    def changed(keys: set[str]) -> None:
        if not any(key.startswith("log.cleaner.") for key in keys):
            return
        new = cleaner_settings(config)
        restart = (new.threads, new.enabled) != (cleaner.settings.threads, cleaner.settings.enabled)
        cleaner.settings = new
        cleaner.throttler.bytes_per_second = new.io_max_bytes_per_second
        if restart:
            cleaner.shutdown()
            cleaner.startup()

    on_change(changed)
