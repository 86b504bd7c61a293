"""The schema registry's schemas as the Iceberg worker's jobs carry them (the decoding modes).

Why the broker hands the schemas over rather than the worker reading `_schemas` itself: the registry
already holds them in memory, parsed from Confluent's records with its rules for soft and hard deletes
(`broker/schema_registry/store.py`); `clients/` may not import that code, and a second reader of the
compacted topic would be a second parser of the same records to keep in step. Each schema goes to a
worker process once (the supervisor remembers which ids it sent, and forgets when the worker restarts),
so a round costs only the schemas registered since the last one.

A schema is `{"type": "AVRO", "schema": text, "refs": [ids of the schemas its references name]}` under its
id; the referenced ones are sent too (they have ids of their own). A Protobuf schema also carries
`"descriptor"` (the base64 `FileDescriptorProto` the registry makes of it, as `?format=serialized` answers:
the worker builds its message classes with protobuf's descriptor pool, and `clients/` may not import the
registry's `.proto` parser) and `"ref_names"` (the names it imports its references under, beside `refs`). A subject's latest version is its
newest not soft-deleted one, as Confluent's `/subjects/<s>/versions/latest` answers.

Threads: the event loop (the registry's state is the loop's).
"""

from __future__ import annotations

import logging
from typing import Any

from pybroker.broker.schema_registry.formats import Parsed
from pybroker.broker.schema_registry.store import RegistryState, Version

log = logging.getLogger(__name__)
#: references followed this deep at most (the registry refuses deeper ones when they are registered)
MAX_REF_DEPTH = 16


def _referenced(state: RegistryState, version: Version) -> list[tuple[str, Version]]:
    """(the name it is imported under, the version) of each reference that names a known version."""
    found = []
    for ref in version.references:
        target = state.subjects.get(str(ref.get("subject")), {}).get(ref.get("version"))  # type: ignore[arg-type]
        if target is not None:
            found.append((str(ref.get("name")), target))
    return found


def _protobuf(state: RegistryState, version: Version, depth: int = 0) -> Parsed:
    from pybroker.broker.schema_registry.protobuf_format import PROTOBUF

    if depth > MAX_REF_DEPTH:
        raise ValueError("references nested too deeply")
    refs = {name: _protobuf(state, target, depth + 1) for name, target in _referenced(state, version)
            if target.schema_type == "PROTOBUF"}
    return PROTOBUF.parse(version.schema, refs)


def _entry(state: RegistryState, version: Version) -> dict[str, Any]:
    refs = _referenced(state, version)
    entry: dict[str, Any] = {"type": version.schema_type, "schema": version.schema,
                             "refs": [target.schema_id for _, target in refs]}
    if version.schema_type == "PROTOBUF":
        from pybroker.broker.schema_registry.protobuf_descriptor import serialized

        entry["ref_names"] = [name for name, _ in refs]
        try:
            entry["descriptor"] = serialized(_protobuf(state, version))
        except Exception as exc:  # the registry took it; still, a schema protobuf cannot describe is only its own
            log.warning("schema id %d has no Protobuf descriptor for the Iceberg worker: %s", version.schema_id, exc)
    return entry


def new_schemas(state: RegistryState, sent: frozenset[int]) -> dict[str, Any]:
    """Every schema the worker was not sent yet, by id (JSON object keys are text)."""
    return {str(schema_id): _entry(state, version) for schema_id, version in state.by_id.items()
            if schema_id not in sent}


def latest_id(state: RegistryState, subject: str) -> int | None:
    """The id of the subject's latest live version (None: no such subject)."""
    live = state.live(subject)
    return live[-1].schema_id if live else None
