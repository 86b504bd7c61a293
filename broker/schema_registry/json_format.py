"""JSON Schema: parsed and checked as a schema by `jsonschema` (the draft its `$schema` names, else the
newest), stored as compact JSON, references resolved by their names (a `$ref` naming a reference), and the
compatibility rules Confluent documents for JSON Schema, applied to a reader (the schema that reads) and a
writer (the schema the data was written with):

- a type the writer allows must be allowed by the reader (integer is read as number);
- an `enum`/`const` added or narrowed, a `maxLength`/`maxItems`/`maxProperties`/`maximum` added or
  decreased, a `minLength`/`minItems`/`minProperties`/`minimum` added or increased, a `pattern` added or
  changed, and a `required` entry added to a property both have: incompatible;
- content models: a property added to a writer's open content model (writer data may hold anything under
  that name) is incompatible; added to a closed one it is fine unless the reader requires it without a
  default; a property removed is fine when the reader's model is open, incompatible when closed;
  `additionalProperties` going from open to closed is incompatible;
- `items`, `properties`, `additionalProperties` schemas and `$ref`s are compared recursively;
  `anyOf`/`oneOf`: every writer branch must be readable by some reader branch.

What is not compared (documented in docs/schema-registry.md): `if/then/else`, `dependentSchemas`,
`patternProperties`, `not`. Pure functions: any thread.
"""

from __future__ import annotations

import json
from typing import Any

from pybroker.broker.schema_registry.formats import Format, Parsed, invalid

MAXIMA = ("maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum")
MINIMA = ("minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum")
ALL_TYPES = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})
#: recursion past this depth stops comparing (a hostile schema cannot make the check run forever)
MAX_DEPTH = 64


def parse(text: str, references: dict[str, Parsed]) -> Parsed:
    import jsonschema
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise invalid(f"not JSON: {exc}") from None
    if not isinstance(raw, dict | bool):
        raise invalid("a JSON Schema is an object or a boolean")
    try:
        jsonschema.validators.validator_for(raw, default=jsonschema.Draft7Validator).check_schema(raw)
    except jsonschema.SchemaError as exc:
        raise invalid(exc.message) from None
    return Parsed("JSON", json.dumps(raw, separators=(",", ":")), raw, dict(references))


def normalize(parsed: Parsed) -> str:
    return json.dumps(parsed.model, separators=(",", ":"), sort_keys=True)


def _types(schema: dict[str, Any]) -> frozenset[str] | None:
    kind = schema.get("type")
    if kind is None:
        return None
    return frozenset([kind] if isinstance(kind, str) else kind)


class _Compare:
    def __init__(self, reader: Parsed, writer: Parsed) -> None:
        self.reader, self.writer = reader, writer
        self.errors: list[str] = []

    def _deref(self, schema: Any, side: Parsed) -> Any:
        for _ in range(MAX_DEPTH):
            if not isinstance(schema, dict) or "$ref" not in schema:
                return schema
            ref = str(schema["$ref"])
            base, _, pointer = ref.partition("#")
            root = side.model
            if base:
                target = side.references.get(base)
                if target is None or target.schema_type != "JSON":
                    return {}
                side, root = target, target.model
            schema = root
            for part in [p for p in pointer.split("/") if p]:
                part = part.replace("~1", "/").replace("~0", "~")
                schema = schema.get(part, {}) if isinstance(schema, dict) else {}
        return schema

    def check(self, reader: Any, writer: Any, path: str, depth: int = 0) -> None:
        if depth > MAX_DEPTH:
            return
        reader, writer = self._deref(reader, self.reader), self._deref(writer, self.writer)
        if reader is True or reader == {} or writer is False:
            return
        if reader is False:
            return self._fail(path, "the reader accepts nothing")
        if writer is True:
            writer = {}
        self._types(reader, writer, path)
        self._values(reader, writer, path)
        self._object(reader, writer, path, depth)
        if isinstance(reader.get("items"), dict) and isinstance(writer.get("items", {}), dict):
            self.check(reader["items"], writer.get("items", {}), f"{path}/items", depth + 1)
        for key in ("anyOf", "oneOf"):
            if key in reader:
                for i, branch in enumerate(writer.get(key, [writer])):
                    trial = _Compare(self.reader, self.writer)
                    if not any(not trial._errors_of(option, branch, depth) for option in reader[key]):
                        self._fail(f"{path}/{key}/{i}", "no reader branch reads this writer branch")
        return None

    def _errors_of(self, reader: Any, writer: Any, depth: int) -> list[str]:
        self.errors = []
        self.check(reader, writer, "", depth + 1)
        return self.errors

    def _fail(self, path: str, reason: str) -> None:
        self.errors.append(f"{path or '#'}: {reason}")

    def _types(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        read, written = _types(reader), _types(writer)
        if read is None:
            return
        for kind in sorted((written or ALL_TYPES) - read):
            if not (kind == "integer" and "number" in read):
                self._fail(path, f"the writer's type {kind} is not one the reader accepts")

    def _values(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        if "enum" in reader:
            allowed = {json.dumps(v, sort_keys=True) for v in reader["enum"]}
            written = writer.get("enum", [writer["const"]] if "const" in writer else None)
            if written is None or any(json.dumps(v, sort_keys=True) not in allowed for v in written):
                self._fail(path, "enum narrowed or added")
        if "const" in reader and writer.get("const", object()) != reader["const"]:
            self._fail(path, "const added or changed")
        for key in MAXIMA:
            if key in reader and (key not in writer or reader[key] < writer[key]):
                self._fail(path, f"{key} added or decreased")
        for key in MINIMA:
            if key in reader and (key not in writer or reader[key] > writer[key]):
                self._fail(path, f"{key} added or increased")
        if "pattern" in reader and reader["pattern"] != writer.get("pattern"):
            self._fail(path, "pattern added or changed")

    def _object(self, reader: dict[str, Any], writer: dict[str, Any], path: str, depth: int) -> None:
        read = reader.get("properties", {})
        written = writer.get("properties", {})
        if not isinstance(read, dict) or not isinstance(written, dict):
            return
        reader_extra = reader.get("additionalProperties", True)
        writer_extra = writer.get("additionalProperties", True)
        writer_open = writer_extra is not False
        if reader_extra is False and writer_open:
            self._fail(path, "additionalProperties removed (the content model was closed)")
        required = set(reader.get("required", []))
        for name in sorted(set(read) - set(written)):
            if writer_open:
                self.check(read[name], writer_extra if isinstance(writer_extra, dict) else True,
                           f"{path}/properties/{name}", depth + 1)
                if writer_extra is True:
                    self._fail(f"{path}/properties/{name}", "property added to an open content model")
            elif name in required and not (isinstance(read[name], dict) and "default" in read[name]):
                self._fail(f"{path}/properties/{name}", "required property added to a closed content model")
        for name in sorted(set(written) - set(read)):
            if reader_extra is False:
                self._fail(f"{path}/properties/{name}", "property removed from a closed content model")
            elif isinstance(reader_extra, dict):
                self.check(reader_extra, written[name], f"{path}/properties/{name}", depth + 1)
        for name in sorted(set(read) & set(written)):
            self.check(read[name], written[name], f"{path}/properties/{name}", depth + 1)
        added = required - set(writer.get("required", [])) - (set(read) - set(written))
        for name in sorted(added):
            self._fail(f"{path}/required/{name}", "required attribute added")


def compatible(reader: Parsed, writer: Parsed) -> list[str]:
    walk = _Compare(reader, writer)
    walk.check(reader.model, writer.model, "")
    return walk.errors


def _validator(parsed: Parsed) -> Any:
    cached = parsed.cache.get("validator")
    if cached is not None:
        return cached
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7

    resources = [(name, Resource.from_contents(ref.model, default_specification=DRAFT7))
                 for name, ref in parsed.references.items() if ref.schema_type == "JSON"]
    cls = jsonschema.validators.validator_for(parsed.model, default=jsonschema.Draft7Validator)
    validator = cls(parsed.model, registry=Registry().with_resources(resources))
    parsed.cache["validator"] = validator
    return validator


def validate(parsed: Parsed, payload: bytes) -> str | None:
    try:
        value = json.loads(payload)
    except ValueError:
        return "not JSON"
    error = next(iter(_validator(parsed).iter_errors(value)), None)
    return None if error is None else f"does not match the registered JSON Schema: {error.message[:200]}"


JSON = Format("JSON", parse, normalize, compatible, validate)
