"""The registry's operations, as Confluent's REST API defines them, over `RegistryState` and a durable
writer: each change is built as `_schemas` records, written (fsynced) through `write`, and only then
applied to memory and answered. Changes run one at a time (`_changing`), so two registrations cannot take
one id or one version.

Threads: the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from pybroker.broker.schema_registry.errors import RegistryError
from pybroker.broker.schema_registry.formats import MAX_SCHEMA_CHARS, Format, Parsed, formats
from pybroker.broker.schema_registry.records import Key, schema_key, schema_value
from pybroker.broker.schema_registry.store import LEVELS, MODES, RegistryState, Version, identity

#: writes records durably (in order) and returns once they are fsynced; raises RegistryError(50001)
Writer = Callable[[list[tuple[Key, dict[str, Any] | None]]], Awaitable[None]]
#: parsed schemas kept by id (they are re-parsed on a miss)
PARSED_CACHE = 1024
#: references one schema may name
MAX_REFERENCES = 256
#: reference chains deeper than this are refused (42201)
MAX_REFERENCE_DEPTH = 16

#: level -> (check the new schema reads the old, the old reads the new, against every version or the latest)
LEVEL_RULES: dict[str, tuple[bool, bool, bool]] = {
    "NONE": (False, False, False),
    "BACKWARD": (True, False, False),
    "BACKWARD_TRANSITIVE": (True, False, True),
    "FORWARD": (False, True, False),
    "FORWARD_TRANSITIVE": (False, True, True),
    "FULL": (True, True, False),
    "FULL_TRANSITIVE": (True, True, True),
}


class Registry:
    def __init__(self, state: RegistryState, write: Writer) -> None:
        self.state = state
        self._write = write
        self._changing = asyncio.Lock()
        self._parsed: dict[str, Parsed] = {}

    async def change(self, records: list[tuple[Key, dict[str, Any] | None]]) -> None:
        """Write, then apply (the caller holds `_changing`)."""
        await self._write(records)
        for key, value in records:
            self.state.apply(key, value)

    # -- parsing -------------------------------------------------------------------------------------

    def format_of(self, schema_type: str) -> Format:
        table = formats()
        found = table.get(schema_type.upper())
        if found is None:
            raise RegistryError(42201, f"Invalid schema type {schema_type!r}: one of {sorted(table)}")
        return found

    def parse(self, schema_type: str, text: str, references: list[dict[str, Any]], depth: int = 0) -> Parsed:
        if len(text) > MAX_SCHEMA_CHARS:
            raise RegistryError(42201, f"Invalid schema: longer than {MAX_SCHEMA_CHARS} characters")
        if depth > MAX_REFERENCE_DEPTH:
            raise RegistryError(42201, "Invalid schema: references nested too deeply")
        cache_key = identity(schema_type, text, references)
        cached = self._parsed.get(cache_key)
        if cached is not None:
            return cached
        resolved: dict[str, Parsed] = {}
        if not isinstance(references, list) or len(references) > MAX_REFERENCES:
            raise RegistryError(42201, f"Invalid schema: references are a list of at most {MAX_REFERENCES}")
        for ref in references:
            if not isinstance(ref, dict):
                raise RegistryError(42201, "Invalid schema: a reference is an object")
            name, subject, version = ref.get("name"), ref.get("subject"), ref.get("version")
            if not isinstance(name, str) or not isinstance(subject, str) or not isinstance(version, int):
                raise RegistryError(42201, "Invalid schema: a reference needs a name, a subject and a version")
            target = self.state.subjects.get(subject, {}).get(version)
            if target is None:
                raise RegistryError(42201, f"Invalid schema: reference {name} to {subject} version {version} "
                                           "not found")
            resolved[name] = self.parse(target.schema_type, target.schema, target.references, depth + 1)
        parsed = self.format_of(schema_type).parse(text, resolved)
        if len(self._parsed) >= PARSED_CACHE:
            self._parsed.clear()
        self._parsed[cache_key] = parsed
        return parsed

    def parsed_version(self, version: Version) -> Parsed:
        return self.parse(version.schema_type, version.schema, version.references)

    # -- compatibility -------------------------------------------------------------------------------

    def incompatibilities(self, subject: str, new: Parsed, against: list[Version], level: str) -> list[str]:
        backward, forward, transitive = LEVEL_RULES[level]
        if not (backward or forward):
            return []
        olders = [v for v in against if v.schema_type == new.schema_type]
        if not transitive:
            olders = olders[-1:]
        fmt = self.format_of(new.schema_type)
        reasons: list[str] = []
        for old in olders:
            parsed = self.parsed_version(old)
            if backward:
                reasons += [f"version {old.version}: {r}" for r in fmt.compatible(new, parsed)]
            if forward:
                reasons += [f"version {old.version} reading the new schema: {r}" for r in fmt.compatible(parsed, new)]
        return reasons

    # -- the changes ---------------------------------------------------------------------------------

    def writable(self, subject: str | None, *, importing: bool = False) -> None:
        """Refuses a change the mode forbids: any in READONLY, a given id outside IMPORT (42205)."""
        mode = self.state.mode(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError(42205, f"Subject {subject} is in read-only mode" if subject else
                                "The registry is in read-only mode")
        if importing and mode != "IMPORT":
            raise RegistryError(42205, "An id may be given only in IMPORT mode")

    async def register(self, subject: str, body: dict[str, Any], *, normalize: bool) -> dict[str, Any]:
        schema_type = str(body.get("schemaType") or "AVRO").upper()
        text = body.get("schema")
        references = body.get("references") or []
        if not isinstance(text, str) or not isinstance(references, list):
            raise RegistryError(42201, "Invalid schema: the body needs a schema string")
        wanted_id, wanted_version = body.get("id"), body.get("version")
        importing = wanted_id is not None
        async with self._changing:
            self.writable(subject, importing=importing)
            parsed = self.parse(schema_type, text, references)
            stored = self.format_of(schema_type).normalize(parsed) if normalize else parsed.text
            key = identity(schema_type, stored, references)
            existing = self.state.live(subject)
            for version in existing:
                if identity(version.schema_type, version.schema, version.references) == key:
                    return {"id": version.schema_id, "version": version.version}
            level = self.state.level(subject)
            if not importing:
                reasons = self.incompatibilities(subject, parsed, existing, level)
                if reasons:
                    raise RegistryError(409, "Schema being registered is incompatible with an earlier schema for "
                                             f"subject \"{subject}\", details: {reasons[:10]}")
            if importing:
                if not isinstance(wanted_id, int) or wanted_id < 1:
                    raise RegistryError(42201, "Invalid schema: an id is a positive integer")
                holder = self.state.by_id.get(wanted_id)
                if holder is not None and identity(holder.schema_type, holder.schema, holder.references) != key:
                    raise RegistryError(42205, f"Overwrite new schema with id {wanted_id} is not permitted")
                schema_id = wanted_id
            else:
                schema_id = self.state.ids.get(key) or self.state.max_id + 1
            everything = self.state.subjects.get(subject, {})
            number = wanted_version if isinstance(wanted_version, int) and wanted_version > 0 else \
                max(everything, default=0) + 1
            if number in everything and importing:
                raise RegistryError(42202, f"Version {number} already exists under subject {subject}")
            value = schema_value(subject, number, schema_id, schema_type, stored, references, False)
            await self.change([(schema_key(subject, number), value)])
            return {"id": schema_id, "version": number}

    async def delete_version(self, subject: str, version: Version, *, permanent: bool) -> int:
        async with self._changing:
            self.writable(subject)
            if self.state.referenced_by(subject, version.version):
                raise RegistryError(42206, f"One or more references exist to the schema {{subject={subject},"
                                           f"version={version.version}}}")
            if permanent:
                if not version.deleted:
                    raise RegistryError(40407, f"Subject '{subject}' Version {version.version} was not deleted "
                                               "first before being permanently deleted")
                await self.change([(schema_key(subject, version.version), None)])
            else:
                if version.deleted:
                    raise RegistryError(40406, f"Subject '{subject}' Version {version.version} was soft deleted. "
                                               "Set permanent=true to delete permanently")
                value = schema_value(subject, version.version, version.schema_id, version.schema_type,
                                     version.schema, version.references, True)
                await self.change([(schema_key(subject, version.version), value)])
            return version.version

    async def delete_subject(self, subject: str, *, permanent: bool) -> list[int]:
        async with self._changing:
            self.writable(subject)
            versions = self.state.live(subject, deleted=True)
            live = [v for v in versions if not v.deleted]
            if not versions:
                raise RegistryError(40401, f"Subject '{subject}' not found.")
            if any(self.state.referenced_by(subject, v.version) for v in versions):
                raise RegistryError(42206, f"One or more references exist to the schema of subject {subject}")
            if permanent:
                if live:
                    raise RegistryError(40405, f"Subject '{subject}' was not deleted first before being "
                                               "permanently deleted")
                records: list[tuple[Key, dict[str, Any] | None]] = [
                    (schema_key(subject, v.version), None) for v in versions]
                records += [(Key(kind, subject), None) for kind, table in (("CONFIG", self.state.configs),
                            ("MODE", self.state.modes)) if subject in table]
                await self.change(records)
                return [v.version for v in versions]
            if not live:
                raise RegistryError(40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete "
                                           "permanently")
            await self.change([(schema_key(subject, v.version), schema_value(
                subject, v.version, v.schema_id, v.schema_type, v.schema, v.references, True)) for v in live])
            return [v.version for v in live]

    async def set_config(self, subject: str | None, level: Any) -> str:
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise RegistryError(42203, f"Invalid compatibility level. Valid values are {', '.join(LEVELS)}")
        async with self._changing:
            await self.change([(Key("CONFIG", subject), {"compatibilityLevel": level.upper()})])
        return level.upper()

    async def delete_config(self, subject: str | None) -> str:
        async with self._changing:
            before = self.state.level(subject)
            if subject in self.state.configs:
                await self.change([(Key("CONFIG", subject), None)])
            return before

    async def set_mode(self, subject: str | None, mode: Any, *, force: bool) -> str:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise RegistryError(42204, f"Invalid mode. Valid values are {', '.join(MODES)}")
        mode = mode.upper()
        if mode == "IMPORT" and not force:
            occupied = self.state.live(subject) if subject else any(self.state.subjects.values())
            if occupied:
                raise RegistryError(42205, "Cannot import since found existing subjects")
        async with self._changing:
            await self.change([(Key("MODE", subject), {"mode": mode})])
        return str(mode)

    async def delete_mode(self, subject: str) -> str:
        async with self._changing:
            before = self.state.mode(subject)
            if subject in self.state.modes:
                await self.change([(Key("MODE", subject), None)])
            return before
