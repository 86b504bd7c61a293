"""The `_schemas` topic's records in Confluent's format: JSON keys and values, so a Confluent or Karapace
registry pointed at the broker reads the same subjects, and what they wrote is read here.

Keys (field order as Confluent writes them, so compaction keeps one record per key whichever wrote it):
`{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}`, `{"keytype":"CONFIG","subject":S|null,"magic":0}`,
`{"keytype":"MODE","subject":S|null,"magic":0}`, `{"keytype":"NOOP","magic":0}`,
`{"keytype":"DELETE_SUBJECT","subject":S,"magic":0}`, `{"keytype":"CLEAR_SUBJECT","subject":S,"magic":0}`.
Values: a SCHEMA's `{"subject","version","id","schemaType" (absent for AVRO),"references","schema",
"deleted"}`, a CONFIG's `{"compatibilityLevel"}`, a MODE's `{"mode"}`, a DELETE_SUBJECT's `{"subject",
"version"}` (every version up to it soft-deleted), a CLEAR_SUBJECT's `{"subject"}`. A null value (a
tombstone) removes the key's state: a hard delete.

Pure functions: any thread (replay decodes in a worker thread).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_RECORD_CHARS = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Key:
    keytype: str
    subject: str | None = None
    version: int | None = None

    def encode(self) -> bytes:
        if self.keytype == "SCHEMA":
            body: dict[str, Any] = {"keytype": "SCHEMA", "subject": self.subject, "version": self.version, "magic": 1}
        elif self.keytype == "NOOP":
            body = {"keytype": "NOOP", "magic": 0}
        else:
            body = {"keytype": self.keytype, "subject": self.subject, "magic": 0}
        return json.dumps(body, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> Key:
    return Key("SCHEMA", subject, version)


def encode_value(value: dict[str, Any] | None) -> bytes | None:
    return None if value is None else json.dumps(value, separators=(",", ":")).encode()


def schema_value(subject: str, version: int, schema_id: int, schema_type: str, schema: str,
                 references: list[dict[str, Any]], deleted: bool) -> dict[str, Any]:
    value: dict[str, Any] = {"subject": subject, "version": version, "id": schema_id}
    if schema_type != "AVRO":
        value["schemaType"] = schema_type
    if references:
        value["references"] = references
    value["schema"] = schema
    value["deleted"] = deleted
    return value


def decode(key: bytes | None, value: bytes | None) -> tuple[Key, dict[str, Any] | None] | None:
    """A record's key and value, or None for one this registry does not know (skipped, as Confluent's
    reader skips keys of types it does not know)."""
    if key is None or len(key) > MAX_RECORD_CHARS or (value is not None and len(value) > MAX_RECORD_CHARS):
        return None
    try:
        raw_key = json.loads(key)
        raw_value = json.loads(value) if value is not None else None
    except ValueError:
        return None
    if not isinstance(raw_key, dict) or not isinstance(raw_value, dict | None):
        return None
    keytype = raw_key.get("keytype")
    subject = raw_key.get("subject")
    version = raw_key.get("version")
    if keytype not in ("SCHEMA", "CONFIG", "MODE", "NOOP", "DELETE_SUBJECT", "CLEAR_SUBJECT"):
        return None
    if not isinstance(subject, str | None) or (keytype == "SCHEMA" and not isinstance(version, int)):
        return None
    return Key(keytype, subject, version if keytype == "SCHEMA" else None), raw_value
