"""Dynamic broker configs on disk: one JSON file in the first log dir, replaced atomically.

Kafka keeps configs changed at runtime in its metadata log; a single node keeps them next to its data,
so they survive a restart and move with the log dirs:

    {"version": 1, "broker": {"log.retention.ms": "3600000"}, "cluster_default": {}}

Values are text (the config layer parses and checks them), in two layers: this broker's own and the
cluster-wide default (AlterConfigs on the broker resource named "").
"""

from __future__ import annotations

import json
from pathlib import Path

from pybroker.storage.errors import StorageError
from pybroker.storage.files import atomic_write

FILE_NAME = "pybroker-dynamic-configs.json"
VERSION = 1


class DynamicConfigStore:
    def __init__(self, log_dir: Path) -> None:
        self.path = Path(log_dir) / FILE_NAME

    def load(self) -> tuple[dict[str, str], dict[str, str]]:
        """(this broker's configs, the cluster-wide defaults); empty when nothing was ever altered.

        An unreadable file raises `StorageError` naming it: silently dropping an operator's settings
        would be worse than refusing to start.
        """
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}, {}
        except (OSError, UnicodeDecodeError) as exc:
            raise StorageError(f"{self.path}: cannot read dynamic configs ({exc})") from None
        try:
            data = json.loads(text)
            if data.get("version") != VERSION:
                raise ValueError(f"unsupported version {data.get('version')!r}")
            broker, default = data.get("broker", {}), data.get("cluster_default", {})
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in [*broker.items(), *default.items()]):
                raise ValueError("keys and values must be strings")
            return dict(broker), dict(default)
        except (ValueError, AttributeError, TypeError) as exc:
            raise StorageError(f"{self.path}: not a dynamic config file ({exc})") from None

    def save(self, broker: dict[str, str], cluster_default: dict[str, str]) -> None:
        data = {"version": VERSION, "broker": dict(sorted(broker.items())),
                "cluster_default": dict(sorted(cluster_default.items()))}
        atomic_write(self.path, (json.dumps(data, indent=2) + "\n").encode())
