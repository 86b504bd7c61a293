"""The schema registry's schemas as the Iceberg worker's jobs carry them (the decoding modes).

Why the broker hands the schemas over rather than the worker reading `_schemas` itself: the registry
already holds them in memory, parsed from Confluent's records with its rules for soft and hard deletes
(`broker/schema_registry/store.py`); `clients/` may not import that code, and a second reader of the
compacted topic would be a second parser of the same records to keep in step. Each schema goes to a
worker process once (the supervisor remembers which ids it sent, and forgets when the worker restarts),
so a round costs only the schemas registered since the last one.

A schema is `{"type": "AVRO", "schema": text, "refs": [ids of the schemas its references name]}` under its
id; the referenced ones are sent too (they have ids of their own). A subject's latest version is its
newest not soft-deleted one, as Confluent's `/subjects/<s>/versions/latest` answers.

Threads: the event loop (the registry's state is the loop's).
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.schema_registry.store import RegistryState, Version


def _refs(state: RegistryState, version: Version) -> list[int]:
    ids = []
    for ref in version.references:
        found = state.subjects.get(str(ref.get("subject")), {}).get(ref.get("version"))  # type: ignore[arg-type]
        if found is not None:
            ids.append(found.schema_id)
    return ids


def new_schemas(state: RegistryState, sent: frozenset[int]) -> dict[str, Any]:
    """Every schema the worker was not sent yet, by id (JSON object keys are text)."""
    return {str(schema_id): {"type": version.schema_type, "schema": version.schema, "refs": _refs(state, version)}
            for schema_id, version in state.by_id.items() if schema_id not in sent}


def latest_id(state: RegistryState, subject: str) -> int | None:
    """The id of the subject's latest live version (None: no such subject)."""
    live = state.live(subject)
    return live[-1].schema_id if live else None
