"""Client quotas on disk: one JSON file in the first log dir, replaced whole with `atomic_write`.

    {"version": 1, "entities": [{"entity": [["client-id", "app"]], "quotas": {"producer_byte_rate": 1024.0}}]}

A null name is the type's default entity. Kafka keeps quotas in its metadata log; a single node keeps
them beside its data so they survive a restart. An unreadable file stops the start rather than silently
lifting every limit.
"""

from __future__ import annotations

import json
from pathlib import Path

from pybroker.broker.security.quota_entities import Entity, QuotaError, check_value, entity_of
from pybroker.storage.errors import StorageError
from pybroker.storage.files import atomic_write

FILE_NAME = "client-quotas.json"
FORMAT_VERSION = 1


def load(path: Path) -> dict[Entity, dict[str, float]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise StorageError(f"{path}: cannot read client quotas ({exc})") from None
    try:
        doc = json.loads(data)
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"unsupported version {doc.get('version')!r}")
        quotas: dict[Entity, dict[str, float]] = {}
        for item in doc["entities"]:
            entity = entity_of((str(t), None if n is None else str(n)) for t, n in item["entity"])
            values = {str(k): float(v) for k, v in item["quotas"].items()}
            for key, value in values.items():
                check_value(entity, key, value)
            if values:
                quotas[entity] = values
        return quotas
    except (ValueError, KeyError, TypeError, AttributeError, QuotaError) as exc:
        raise StorageError(f"{path}: not a client quota file ({type(exc).__name__}: {exc})") from None


def render(quotas: dict[Entity, dict[str, float]]) -> bytes:
    entities = [{"entity": [list(p) for p in entity], "quotas": dict(sorted(values.items()))}
                for entity, values in sorted(quotas.items(), key=lambda kv: repr(kv[0])) if values]
    return (json.dumps({"version": FORMAT_VERSION, "entities": entities}, indent=1) + "\n").encode()


def save(path: Path, quotas: dict[Entity, dict[str, float]]) -> None:
    """Write the whole set durably (call off the event loop: it fsyncs)."""
    atomic_write(path, render(quotas))
