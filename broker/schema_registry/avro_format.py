"""Avro schemas: parsed by fastavro, stored as compact JSON, and checked with the Avro specification's
schema-resolution rules (the rules Confluent's registry applies: a reader can read a writer's data when
every writer branch resolves to the reader, record fields match by name or alias, a reader field missing
from the writer has a default, enum symbols the writer may write exist in the reader or the reader has a
default, and the promotions int->long->float->double and string<->bytes).

References: each reference is an Avro schema whose named types the referencing schema may name.
Pure functions: any thread.
"""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from pybroker.broker.schema_registry.formats import Format, Parsed, invalid

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
#: writer type -> the reader types it is promoted to (Avro's schema resolution)
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}
NAMED = frozenset({"record", "error", "enum", "fixed"})


def _named_of(parsed: Parsed) -> dict[str, Any]:
    """Every named type a schema may use: its references' (recursively), then its own."""
    names: dict[str, Any] = {}
    for ref in parsed.references.values():
        if ref.schema_type == "AVRO":  # a reference to another format names no Avro type
            names.update(_named_of(ref))
    names.update(parsed.model["names"])
    return names


def parse(text: str, references: dict[str, Parsed]) -> Parsed:
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise invalid(f"not JSON: {exc}") from None
    named: dict[str, Any] = {}
    for ref in references.values():
        if ref.schema_type == "AVRO":
            named.update(_named_of(ref))
    try:
        known = dict(named)
        expanded = fastavro.parse_schema(raw, named_schemas=known, _write_hint=False)
    except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise invalid(str(exc)) from None
    own = {name: schema for name, schema in known.items() if name not in named}
    # fastavro's form: every name fully qualified, a named type used again written as its full name
    model = {"raw": raw, "expanded": expanded, "names": own}
    return Parsed("AVRO", json.dumps(raw, separators=(",", ":")), model, dict(references))


def _normal(schema: Any, namespace: str) -> Any:
    """A schema with `{"type": "int"}` written `"int"` and every name fully qualified."""
    if isinstance(schema, list):
        return [_normal(branch, namespace) for branch in schema]
    if isinstance(schema, str):
        return schema if schema in PRIMITIVES or "." in schema or not namespace else f"{namespace}.{schema}"
    kind = schema.get("type")
    if isinstance(kind, str) and kind in PRIMITIVES and set(schema) == {"type"}:
        return kind
    out = dict(schema)
    if kind in NAMED:
        name = schema["name"]
        ns = schema.get("namespace", namespace) if "." not in name else name.rpartition(".")[0]
        out["name"] = name if "." in name or not ns else f"{ns}.{name}"
        out.pop("namespace", None)
        namespace = ns
        if kind in ("record", "error"):
            out["fields"] = [{**f, "type": _normal(f["type"], namespace)} for f in schema.get("fields", [])]
    elif kind == "array":
        out["items"] = _normal(schema["items"], namespace)
    elif kind == "map":
        out["values"] = _normal(schema["values"], namespace)
    elif not isinstance(kind, str):
        out["type"] = _normal(kind, namespace)
    return out


def normalize(parsed: Parsed) -> str:
    return json.dumps(_normal(parsed.model["expanded"], ""), separators=(",", ":"))


class _Resolution:
    """The reader/writer walk over two schemas' named types (recursive types end where a pair repeats)."""

    def __init__(self, reader: Parsed, writer: Parsed) -> None:
        self.reader_names = _named_of(reader)
        self.writer_names = _named_of(writer)
        self.seen: set[tuple[str, str]] = set()
        self.errors: list[str] = []

    @staticmethod
    def _resolve(schema: Any, names: dict[str, Any]) -> Any:
        while isinstance(schema, str) and schema not in PRIMITIVES and schema in names:
            schema = names[schema]
        if isinstance(schema, dict) and not isinstance(schema.get("type"), str):
            return schema["type"]
        if isinstance(schema, dict) and schema.get("type") in PRIMITIVES:
            return schema["type"]
        return schema

    @staticmethod
    def _kind(schema: Any) -> str:
        if isinstance(schema, list):
            return "union"
        if isinstance(schema, str):
            return schema
        kind = str(schema.get("type"))
        return "record" if kind == "error" else kind

    def readable(self, reader: Any, writer: Any, path: str) -> bool:
        """Whether `reader` reads what `writer` wrote; appends the reasons when not."""
        reader = self._resolve(reader, self.reader_names)
        writer = self._resolve(writer, self.writer_names)
        rk, wk = self._kind(reader), self._kind(writer)
        if wk == "union":
            return all([self.readable(reader, branch, f"{path}/{i}") for i, branch in enumerate(writer)])
        if rk == "union":
            for branch in reader:
                trial = _Resolution.__new__(_Resolution)
                trial.reader_names, trial.writer_names = self.reader_names, self.writer_names
                trial.seen, trial.errors = set(self.seen), []
                if trial.readable(branch, writer, path):
                    return True
            return self._fail(f"{path}: the reader's union has no branch for the writer's {wk}")
        if rk != wk:
            if rk in PROMOTIONS.get(wk, ()):
                return True
            return self._fail(f"{path}: the reader's type {rk} does not match the writer's type {wk}")
        if rk in PRIMITIVES:
            return True
        if rk == "array":
            return self.readable(reader["items"], writer["items"], f"{path}/items")
        if rk == "map":
            return self.readable(reader["values"], writer["values"], f"{path}/values")
        if not self._same_name(reader, writer):
            return self._fail(f"{path}: the reader's name {reader['name']} does not match the writer's "
                              f"{writer['name']}")
        pair = (reader["name"], writer["name"])
        if pair in self.seen:
            return True
        self.seen.add(pair)
        return {"record": self._record, "enum": self._enum, "fixed": self._fixed}[rk](reader, writer, path)

    def _fail(self, reason: str) -> bool:
        self.errors.append(reason)
        return False

    @staticmethod
    def _same_name(reader: dict[str, Any], writer: dict[str, Any]) -> bool:
        def short(name: str) -> str:
            return name.rpartition(".")[2]
        aliases = {short(a) for a in reader.get("aliases", [])}
        return short(reader["name"]) == short(writer["name"]) or short(writer["name"]) in aliases

    def _record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> bool:
        written = {f["name"]: f for f in writer.get("fields", [])}
        ok = True
        for field in reader.get("fields", []):
            names = [field["name"], *field.get("aliases", [])]
            match = next((written[n] for n in names if n in written), None)
            if match is not None:
                ok &= self.readable(field["type"], match["type"], f"{path}/fields/{field['name']}")
            elif "default" not in field:
                ok = self._fail(f"{path}/fields/{field['name']}: the reader's field {field['name']} is not in "
                                "the writer's schema and has no default")
        return ok

    def _enum(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> bool:
        missing = [s for s in writer.get("symbols", []) if s not in set(reader.get("symbols", []))]
        if missing and "default" not in reader:
            return self._fail(f"{path}/symbols: the reader's enum lacks the writer's symbols {missing}")
        return True

    def _fixed(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> bool:
        if reader.get("size") != writer.get("size"):
            return self._fail(f"{path}/size: fixed size {writer.get('size')} read as {reader.get('size')}")
        return True


def compatible(reader: Parsed, writer: Parsed) -> list[str]:
    walk = _Resolution(reader, writer)
    walk.readable(reader.model["expanded"], writer.model["expanded"], "")
    return walk.errors


def _reader_schema(parsed: Parsed) -> Any:
    cached = parsed.cache.get("fastavro")
    if cached is None:
        names = {name: schema for name, schema in _named_of(parsed).items() if name not in parsed.model["names"]}
        cached = parsed.cache["fastavro"] = fastavro.parse_schema(parsed.model["raw"], named_schemas=names)
    return cached


def validate(parsed: Parsed, payload: bytes) -> str | None:
    stream = io.BytesIO(payload)
    try:
        fastavro.schemaless_reader(stream, _reader_schema(parsed), None)
    except Exception as exc:  # any decode failure is the payload's
        return f"not Avro of the registered schema: {type(exc).__name__}"
    if stream.tell() != len(payload):
        return f"{len(payload) - stream.tell()} bytes left after the Avro value"
    return None


AVRO = Format("AVRO", parse, normalize, compatible, validate)
