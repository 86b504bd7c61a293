"""The registry's state in memory, rebuilt from `_schemas` at start and changed only by `apply`, one record
at a time, after that record is durable in the topic (so memory never holds what a crash could lose).

Ids are global (one id per distinct schema: type, text and references; the same schema registered under
two subjects gets one id, as Confluent's), versions count per subject from 1. Soft-deleted versions stay
(flagged) until a hard delete's tombstone removes them.

Threads: the event loop owns it; `replay` applies records in a worker thread before the registry serves.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pybroker.broker.schema_registry.records import Key

#: Confluent's compatibility levels
LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_LEVEL = "BACKWARD"
DEFAULT_MODE = "READWRITE"


@dataclass(slots=True)
class Version:
    subject: str
    version: int
    schema_id: int
    schema_type: str
    schema: str
    references: list[dict[str, Any]]
    deleted: bool = False

    def answer(self) -> dict[str, Any]:
        """The REST shape of a subject's version (Confluent omits schemaType for AVRO, references when none)."""
        out: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.schema_id}
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = self.references
        out["schema"] = self.schema
        return out


def identity(schema_type: str, schema: str, references: list[dict[str, Any]]) -> str:
    return json.dumps([schema_type, schema, references], sort_keys=True, separators=(",", ":"))


@dataclass(slots=True)
class RegistryState:
    subjects: dict[str, dict[int, Version]] = field(default_factory=dict)
    #: id -> a version holding it (for its text, type and references)
    by_id: dict[int, Version] = field(default_factory=dict)
    ids: dict[str, int] = field(default_factory=dict)
    configs: dict[str | None, str] = field(default_factory=dict)
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0
    records: int = 0

    def apply(self, key: Key, value: dict[str, Any] | None) -> None:
        """One `_schemas` record (a decoded key, its value or None for a tombstone)."""
        self.records += 1
        handler = _APPLY.get(key.keytype)
        if handler is not None:
            handler(self, key, value)

    def _schema(self, key: Key, value: dict[str, Any] | None) -> None:
        assert key.subject is not None and key.version is not None
        versions = self.subjects.setdefault(key.subject, {})
        if value is None:
            gone = versions.pop(key.version, None)
            if not versions:
                del self.subjects[key.subject]
            if gone is not None:
                self._forget_id(gone.schema_id)
            return
        try:
            version = Version(key.subject, key.version, int(value["id"]), str(value.get("schemaType") or "AVRO"),
                              str(value["schema"]), list(value.get("references") or []), bool(value.get("deleted")))
        except (KeyError, TypeError, ValueError):
            return
        versions[key.version] = version
        self.by_id.setdefault(version.schema_id, version)
        self.ids.setdefault(identity(version.schema_type, version.schema, version.references), version.schema_id)
        self.max_id = max(self.max_id, version.schema_id)

    def _forget_id(self, schema_id: int) -> None:
        holders = [v for vs in self.subjects.values() for v in vs.values() if v.schema_id == schema_id]
        if holders:
            self.by_id[schema_id] = holders[0]
            return
        gone = self.by_id.pop(schema_id, None)
        if gone is not None:
            self.ids.pop(identity(gone.schema_type, gone.schema, gone.references), None)

    def _config(self, key: Key, value: dict[str, Any] | None) -> None:
        level = (value or {}).get("compatibilityLevel")
        if value is None or level not in LEVELS:
            self.configs.pop(key.subject, None)
        else:
            self.configs[key.subject] = str(level)

    def _mode(self, key: Key, value: dict[str, Any] | None) -> None:
        mode = (value or {}).get("mode")
        if value is None or mode not in MODES:
            self.modes.pop(key.subject, None)
        else:
            self.modes[key.subject] = str(mode)

    def _delete_subject(self, key: Key, value: dict[str, Any] | None) -> None:
        upto = (value or {}).get("version")
        for version in self.subjects.get(key.subject or "", {}).values():
            if isinstance(upto, int) and version.version <= upto:
                version.deleted = True

    def _clear_subject(self, key: Key, value: dict[str, Any] | None) -> None:
        for version in list(self.subjects.get(key.subject or "", {}).values()):
            if version.deleted:
                self._schema(Key("SCHEMA", version.subject, version.version), None)

    # -- reads ---------------------------------------------------------------------------------------

    def live(self, subject: str, *, deleted: bool = False) -> list[Version]:
        """A subject's versions in order (soft-deleted ones only when asked)."""
        versions = self.subjects.get(subject, {})
        return [versions[n] for n in sorted(versions) if deleted or not versions[n].deleted]

    def level(self, subject: str | None) -> str:
        return self.configs.get(subject) or self.configs.get(None) or DEFAULT_LEVEL

    def mode(self, subject: str | None) -> str:
        return self.modes.get(subject) or self.modes.get(None) or DEFAULT_MODE

    def referenced_by(self, subject: str, version: int) -> list[int]:
        return sorted({v.schema_id for vs in self.subjects.values() for v in vs.values() if not v.deleted
                       and any(r.get("subject") == subject and r.get("version") == version for r in v.references)})


_APPLY = {"SCHEMA": RegistryState._schema, "CONFIG": RegistryState._config, "MODE": RegistryState._mode,
          "DELETE_SUBJECT": RegistryState._delete_subject, "CLEAR_SUBJECT": RegistryState._clear_subject}
