"""Confluent's REST API as a table: (method, path pattern) -> the function that answers it. A pattern's
`{s}` is one URL-decoded path segment (a subject), `{v}` a version (`latest`, `-1` or 1..2^31-1), `{id}`
a schema id. Each function gets the `Call` (the registry, the segments, the query, the JSON body, the
caller's `Access`) and returns the JSON to answer with (status 200), or raises `RegistryError`.

What each route authorizes is `access.py`'s rule. Threads: the event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote

from pybroker.broker.schema_registry.access import Access
from pybroker.broker.schema_registry.errors import RegistryError
from pybroker.broker.schema_registry.registry import Registry
from pybroker.broker.schema_registry.store import Version
from pybroker.protocol.acl_codes import AclOperation

READ, WRITE, DELETE, ALTER = AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER_CONFIGS
MAX_VERSION = 2**31 - 1


@dataclass(slots=True)
class Call:
    registry: Registry
    args: list[str]
    query: dict[str, str]
    body: Any
    access: Access

    def flag(self, name: str) -> bool:
        return self.query.get(name, "false").lower() == "true"

    @property
    def subject(self) -> str:
        return self.args[0]

    def versions(self, subject: str) -> list[Version]:
        versions = self.registry.state.live(subject, deleted=self.flag("deleted"))
        if not versions:
            raise RegistryError(40401, f"Subject '{subject}' not found.")
        return versions

    def version(self, subject: str, text: str) -> Version:
        number = _version_number(text)
        everything = self.registry.state.live(subject, deleted=True)
        if not everything or (not self.flag("deleted") and all(v.deleted for v in everything)):
            raise RegistryError(40401, f"Subject '{subject}' not found.")
        candidates = everything if self.flag("deleted") else [v for v in everything if not v.deleted]
        if number == -1:
            return candidates[-1]
        found = next((v for v in candidates if v.version == number), None)
        if found is None:
            raise RegistryError(40402, f"Version {number} not found.")
        return found

    def body_schema(self) -> dict[str, Any]:
        if not isinstance(self.body, dict) or not isinstance(self.body.get("schema"), str):
            raise RegistryError(42201, "Invalid schema: the body is a JSON object with a \"schema\" string")
        return self.body


def _version_number(text: str) -> int:
    if text == "latest":
        return -1
    try:
        number = int(text)
    except ValueError:
        raise RegistryError(42202, "The specified version '" + text[:40] + "' is not a valid version id. Allowed "
                                   "values are between [1, 2^31-1] and the string \"latest\"") from None
    if number == -1 or 1 <= number <= MAX_VERSION:
        return number
    raise RegistryError(42202, f"The specified version '{number}' is not a valid version id. Allowed values are "
                               "between [1, 2^31-1] and the string \"latest\"")


def _schema_id(text: str) -> int:
    if not text.isdigit() or len(text) > 10:
        raise RegistryError(40403, "Schema not found")
    return int(text)


# -- reads --------------------------------------------------------------------------------------------

async def root(call: Call) -> Any:
    return {}


async def schema_types(call: Call) -> Any:
    return ["JSON", "PROTOBUF", "AVRO"]


def _holders(call: Call, schema_id: int) -> list[Version]:
    """The versions holding an id that the caller may see (none: 40403, as for an unknown id)."""
    deleted = call.flag("deleted")
    holders = [v for vs in call.registry.state.subjects.values() for v in vs.values()
               if v.schema_id == schema_id and (deleted or not v.deleted) and call.access.may(READ, v.subject)]
    if not holders and call.registry.state.by_id.get(schema_id) is not None and not deleted:
        holders = [v for vs in call.registry.state.subjects.values() for v in vs.values()
                   if v.schema_id == schema_id and call.access.may(READ, v.subject)]
    if not holders:
        raise RegistryError(40403, "Schema not found")
    return sorted(holders, key=lambda v: (v.subject, v.version))


def _formatted(call: Call, version: Version) -> str:
    """The schema's text in the form `?format=` asks for: `serialized` gives a Protobuf schema as a base64
    FileDescriptorProto, whatever form it was registered in; any other format, the text as registered."""
    if call.query.get("format") == "serialized" and version.schema_type == "PROTOBUF":
        from pybroker.broker.schema_registry.protobuf_descriptor import serialized
        return serialized(call.registry.parsed_version(version))
    return version.schema


async def schema_by_id(call: Call) -> Any:
    version = _holders(call, _schema_id(call.args[0]))[0]
    out: dict[str, Any] = {}
    if version.schema_type != "AVRO":
        out["schemaType"] = version.schema_type
    if version.references:
        out["references"] = version.references
    out["schema"] = _formatted(call, version)
    return out


async def schema_text_by_id(call: Call) -> Any:
    return RawText(_holders(call, _schema_id(call.args[0]))[0].schema)


async def subjects_of_id(call: Call) -> Any:
    return sorted({v.subject for v in _holders(call, _schema_id(call.args[0]))})


async def versions_of_id(call: Call) -> Any:
    return [{"subject": v.subject, "version": v.version} for v in _holders(call, _schema_id(call.args[0]))]


async def list_subjects(call: Call) -> Any:
    prefix = call.query.get("subjectPrefix", "")
    deleted, only = call.flag("deleted"), call.flag("deletedOnly")
    out = []
    for subject, versions in call.registry.state.subjects.items():
        if not subject.startswith(prefix) or not call.access.may(READ, subject):
            continue
        live = any(not v.deleted for v in versions.values())
        if (only and not live) or (not only and (live or deleted)):
            out.append(subject)
    return sorted(out)


async def list_schemas(call: Call) -> Any:
    prefix = call.query.get("subjectPrefix", "")
    latest_only = call.flag("latestOnly")
    out = []
    for subject in sorted(call.registry.state.subjects):
        if subject.startswith(prefix) and call.access.may(READ, subject):
            versions = call.registry.state.live(subject, deleted=call.flag("deleted"))
            out += [v.answer() for v in (versions[-1:] if latest_only else versions)]
    return out


async def subject_versions(call: Call) -> Any:
    call.access.require(READ, call.subject)
    return [v.version for v in call.versions(call.subject)]


async def subject_version(call: Call) -> Any:
    call.access.require(READ, call.subject)
    version = call.version(call.subject, call.args[1])
    return {**version.answer(), "schema": _formatted(call, version)}


async def subject_version_schema(call: Call) -> Any:
    call.access.require(READ, call.subject)
    return RawText(call.version(call.subject, call.args[1]).schema)


async def referenced_by(call: Call) -> Any:
    call.access.require(READ, call.subject)
    version = call.version(call.subject, call.args[1])
    return call.registry.state.referenced_by(call.subject, version.version)


async def lookup(call: Call) -> Any:
    call.access.require(READ, call.subject)
    body = call.body_schema()
    registry = call.registry
    if not registry.state.live(call.subject, deleted=True):
        raise RegistryError(40401, f"Subject '{call.subject}' not found.")
    schema_type = str(body.get("schemaType") or "AVRO").upper()
    references = body.get("references") or []
    parsed = registry.parse(schema_type, body["schema"], references)  # refuses references that are not a list
    fmt = registry.format_of(schema_type)
    normal = fmt.normalize(parsed) if call.flag("normalize") else None
    for version in registry.state.live(call.subject, deleted=call.flag("deleted")):
        if version.schema_type != schema_type or version.references != references:
            continue
        if version.schema == parsed.text or (normal is not None and normal == fmt.normalize(
                registry.parsed_version(version))):
            return version.answer()
    raise RegistryError(40403, "Schema not found")


# -- changes ------------------------------------------------------------------------------------------

async def register(call: Call) -> Any:
    call.access.require(WRITE, call.subject)
    return await call.registry.register(call.subject, call.body_schema(), normalize=call.flag("normalize"))


async def delete_subject(call: Call) -> Any:
    call.access.require(DELETE, call.subject)
    return await call.registry.delete_subject(call.subject, permanent=call.flag("permanent"))


async def delete_version(call: Call) -> Any:
    call.access.require(DELETE, call.subject)
    call.query["deleted"] = "true"  # a soft-deleted version is found for its permanent delete
    version = call.version(call.subject, call.args[1])
    return await call.registry.delete_version(call.subject, version, permanent=call.flag("permanent"))


async def compatibility(call: Call) -> Any:
    call.access.require(READ, call.subject)
    body = call.body_schema()
    registry = call.registry
    schema_type = str(body.get("schemaType") or "AVRO").upper()
    parsed = registry.parse(schema_type, body["schema"], body.get("references") or [])
    level = registry.state.level(call.subject)
    if len(call.args) > 1:
        against = [call.version(call.subject, call.args[1])]
        level = {"BACKWARD_TRANSITIVE": "BACKWARD", "FORWARD_TRANSITIVE": "FORWARD",
                 "FULL_TRANSITIVE": "FULL"}.get(level, level)
    else:
        against = registry.state.live(call.subject)
    reasons = registry.incompatibilities(call.subject, parsed, against, level)
    out: dict[str, Any] = {"is_compatible": not reasons}
    if call.flag("verbose"):
        out["messages"] = reasons
    return out


async def get_config(call: Call) -> Any:
    if call.args:
        call.access.require(READ, call.subject)
        level = call.registry.state.configs.get(call.subject)
        if level is None and not call.flag("defaultToGlobal"):
            raise RegistryError(40408, f"Subject '{call.subject}' does not have subject-level compatibility "
                                       "configured")
        return {"compatibilityLevel": level or call.registry.state.level(None)}
    return {"compatibilityLevel": call.registry.state.level(None)}


async def put_config(call: Call) -> Any:
    subject = _scope(call)
    level = call.body.get("compatibility") if isinstance(call.body, dict) else None
    return {"compatibility": await call.registry.set_config(subject, level)}


async def delete_config(call: Call) -> Any:
    return {"compatibilityLevel": await call.registry.delete_config(_scope(call))}


async def get_mode(call: Call) -> Any:
    if call.args:
        call.access.require(READ, call.subject)
        mode = call.registry.state.modes.get(call.subject)
        if mode is None and not call.flag("defaultToGlobal"):
            raise RegistryError(40409, f"Subject '{call.subject}' does not have subject-level mode configured")
        return {"mode": mode or call.registry.state.mode(None)}
    return {"mode": call.registry.state.mode(None)}


async def put_mode(call: Call) -> Any:
    subject = _scope(call)
    mode = call.body.get("mode") if isinstance(call.body, dict) else None
    return {"mode": await call.registry.set_mode(subject, mode, force=call.flag("force"))}


async def delete_mode(call: Call) -> Any:
    subject = _scope(call)
    if subject is None:
        raise RegistryError(405)
    return {"mode": await call.registry.delete_mode(subject)}


def _scope(call: Call) -> str | None:
    """The subject a config or mode change is for (None: global), authorized as `access.py` says."""
    if call.args:
        call.access.require(ALTER, call.subject)
        return call.subject
    call.access.require_cluster(ALTER)
    return None


class RawText(str):
    """An answer sent as the schema's own text, not JSON-quoted (`.../schema` routes)."""


Route = Callable[[Call], Awaitable[Any]]

#: (method, path pattern) -> route; patterns are matched segment by segment
ROUTES: dict[tuple[str, str], Route] = {
    ("GET", ""): root,
    ("GET", "schemas"): list_schemas,
    ("GET", "schemas/types"): schema_types,
    ("GET", "schemas/ids/{id}"): schema_by_id,
    ("GET", "schemas/ids/{id}/schema"): schema_text_by_id,
    ("GET", "schemas/ids/{id}/subjects"): subjects_of_id,
    ("GET", "schemas/ids/{id}/versions"): versions_of_id,
    ("GET", "subjects"): list_subjects,
    ("POST", "subjects/{s}"): lookup,
    ("DELETE", "subjects/{s}"): delete_subject,
    ("GET", "subjects/{s}/versions"): subject_versions,
    ("POST", "subjects/{s}/versions"): register,
    ("GET", "subjects/{s}/versions/{v}"): subject_version,
    ("DELETE", "subjects/{s}/versions/{v}"): delete_version,
    ("GET", "subjects/{s}/versions/{v}/schema"): subject_version_schema,
    ("GET", "subjects/{s}/versions/{v}/referencedby"): referenced_by,
    ("POST", "compatibility/subjects/{s}/versions"): compatibility,
    ("POST", "compatibility/subjects/{s}/versions/{v}"): compatibility,
    ("GET", "config"): get_config,
    ("PUT", "config"): put_config,
    ("DELETE", "config"): delete_config,
    ("GET", "config/{s}"): get_config,
    ("PUT", "config/{s}"): put_config,
    ("DELETE", "config/{s}"): delete_config,
    ("GET", "mode"): get_mode,
    ("PUT", "mode"): put_mode,
    ("GET", "mode/{s}"): get_mode,
    ("PUT", "mode/{s}"): put_mode,
    ("DELETE", "mode/{s}"): delete_mode,
}

_PATTERNS = [(method, pattern.split("/") if pattern else [], route) for (method, pattern), route in ROUTES.items()]


def match(method: str, path: str) -> tuple[Route, list[str]]:
    """The route for a request and its decoded arguments; RegistryError 404/405 when none."""
    segments = [unquote(part) for part in path.strip("/").split("/")] if path.strip("/") else []
    methods_seen = False
    for route_method, pattern, route in _PATTERNS:
        if len(pattern) != len(segments):
            continue
        args: list[str] = []
        for want, got in zip(pattern, segments, strict=True):
            if want.startswith("{"):
                args.append(got)
            elif want != got:
                break
        else:
            if route_method == method:
                return route, args
            methods_seen = True
    raise RegistryError(405 if methods_seen else 404)


def query_of(text: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(text, keep_blank_values=True).items()}
