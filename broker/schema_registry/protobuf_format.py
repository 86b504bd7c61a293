"""Protobuf schemas, in either form clients send: `.proto` text (parsed by proto-schema-parser, a pure-Python
parser of the proto grammar) or a base64 `FileDescriptorProto` (what confluent-kafka's Python serializer
registers; decoded by protobuf itself). Both become one model, the messages by full name with their fields
by number, so the rules compare them alike. Stored as sent (compact), which Confluent's own registry reads
in both forms.

The rules are Confluent's for Protobuf, between a reader and a writer: a changed package or syntax, a
message removed, a field whose kind (scalar, message, enum) or named type changed, a scalar changed outside
its wire-compatible group ({int32, uint32, int64, uint64, bool}, {sint32, sint64}, {fixed32, sfixed32},
{fixed64, sfixed64}, {string, bytes}), a required field added or removed, a field taken out of its oneof,
and several existing fields moved into one oneof are incompatible; fields added or removed are not.
Pure functions: any thread.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Any

from pybroker.broker.schema_registry.formats import Format, Parsed, invalid

SCALARS = frozenset({"double", "float", "int64", "uint64", "int32", "fixed64", "fixed32", "bool", "string",
                     "bytes", "uint32", "sfixed32", "sfixed64", "sint32", "sint64"})
#: FieldDescriptorProto.Type -> its scalar name (11: message, 14: enum, 10: group)
DESCRIPTOR_TYPES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32",
                    8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64",
                    17: "sint32", 18: "sint64"}
LABELS = {1: "optional", 2: "required", 3: "repeated"}
COMPATIBLE_GROUPS = (frozenset({"int32", "uint32", "int64", "uint64", "bool"}), frozenset({"sint32", "sint64"}),
                     frozenset({"fixed32", "sfixed32"}), frozenset({"fixed64", "sfixed64"}),
                     frozenset({"string", "bytes"}))
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]+$")


@dataclass(slots=True)
class ProtoField:
    name: str
    number: int
    label: str  # optional, required, repeated, or "" (proto3 singular)
    kind: str  # scalar, message, enum
    type: str  # the scalar's name or the named type's full name
    oneof: str | None = None


@dataclass(slots=True)
class ProtoModel:
    syntax: str
    package: str
    #: message full name -> field number -> field
    messages: dict[str, dict[int, ProtoField]] = field(default_factory=dict)
    enums: set[str] = field(default_factory=set)
    #: the FileDescriptorProto's bytes, when the schema came in that form (a payload check needs it)
    descriptor: bytes | None = None


def parse(text: str, references: dict[str, Parsed]) -> Parsed:
    known_messages: set[str] = set()
    known_enums: set[str] = set()
    for ref in references.values():
        if ref.schema_type != "PROTOBUF":
            continue
        known_messages.update(ref.model.messages)
        known_enums.update(ref.model.enums)
    if _BASE64.match(text) and "syntax" not in text:
        model = _from_descriptor(text)
    else:
        model = _from_text(text, known_messages, known_enums)
    return Parsed("PROTOBUF", text.strip(), model, dict(references))


def _from_descriptor(text: str) -> ProtoModel:
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError
    try:
        data = base64.b64decode(text, validate=False)
        proto = descriptor_pb2.FileDescriptorProto.FromString(data)
    except (binascii.Error, DecodeError, ValueError) as exc:
        raise invalid(f"neither .proto text nor a base64 FileDescriptorProto: {exc}") from None
    model = ProtoModel(proto.syntax or "proto2", proto.package, descriptor=data)
    prefix = f"{proto.package}." if proto.package else ""

    def type_of(f: Any) -> str:
        return DESCRIPTOR_TYPES.get(f.type) or f.type_name.lstrip(".")

    def visit(message: Any, scope: str) -> None:
        name = f"{scope}{message.name}"
        oneofs = [o.name for o in message.oneof_decl]
        # map fields are written as a nested `<Name>Entry` message: the model keeps them as map<key,value>
        entries = {f"{name}.{nested.name}": nested for nested in message.nested_type if nested.options.map_entry}
        fields: dict[int, ProtoField] = {}
        for f in message.field:
            entry = entries.get(f.type_name.lstrip("."))
            if entry is not None:
                key, value = sorted(entry.field, key=lambda x: x.number)[:2]
                fields[f.number] = ProtoField(f.name, f.number, "repeated", "message",
                                              f"map<{type_of(key)},{type_of(value)}>")
                continue
            kind = "message" if f.type in (10, 11) else "enum" if f.type == 14 else "scalar"
            oneof = oneofs[f.oneof_index] if f.HasField("oneof_index") and not f.proto3_optional else None
            label = LABELS.get(f.label, "") if model.syntax == "proto2" or f.label == 3 else ""
            fields[f.number] = ProtoField(f.name, f.number, label, kind, type_of(f), oneof)
        model.messages[name] = fields
        for nested in message.nested_type:
            if not nested.options.map_entry:
                visit(nested, f"{name}.")
        for enum in message.enum_type:
            model.enums.add(f"{name}.{enum.name}")

    for message in proto.message_type:
        visit(message, prefix)
    for enum in proto.enum_type:
        model.enums.add(f"{prefix}{enum.name}")
    return model


def parse_text(text: str) -> Any:
    """The proto-schema-parser tree of `.proto` text; a syntax error raises (the grammar would recover)."""
    from antlr4.error.ErrorListener import ErrorListener
    from proto_schema_parser.parser import Parser

    class Strict(ErrorListener):
        """The grammar's recovery would skip bad text: a syntax error refuses the schema instead."""

        def syntaxError(self, recognizer: Any, symbol: Any, line: int, column: int, msg: str, e: Any) -> None:
            raise ValueError(f"line {line}:{column}: {msg}")

    def strict(recognizer: Any) -> None:
        recognizer.removeErrorListeners()
        recognizer.addErrorListener(Strict())

    try:
        return Parser(setup_lexer=strict, setup_parser=strict).parse(text)
    except Exception as exc:  # a syntax error, or the parser's own errors for malformed text
        raise invalid(f"not .proto text: {exc}") from None


def declared(tree: Any) -> tuple[str, dict[str, tuple[str, list[Any]]], set[str]]:
    """The package, every message (full name -> (its scope, its elements)) and every enum's full name."""
    from proto_schema_parser import ast
    package = next((e.name for e in tree.file_elements if isinstance(e, ast.Package)), "")
    messages: dict[str, tuple[str, list[Any]]] = {}
    enums: set[str] = set()

    def walk(elements: list[Any], scope: str) -> None:
        for element in elements:
            if isinstance(element, ast.Message):
                name = f"{scope}{element.name}"
                messages[name] = (scope, element.elements)
                walk(element.elements, f"{name}.")
            elif isinstance(element, ast.Enum):
                enums.add(f"{scope}{element.name}")

    walk(tree.file_elements, f"{package}." if package else "")
    return package, messages, enums


def resolve_type(type_name: str, scope: str, messages: set[str], enums: set[str]) -> tuple[str, str]:
    """(kind, full name) of a field's type as protoc resolves it: scalars, then the innermost scope outwards."""
    if type_name in SCALARS:
        return "scalar", type_name
    if type_name.startswith("."):
        full = type_name[1:]
        return ("enum" if full in enums else "message"), full
    parts = scope.split(".") if scope else []
    for i in range(len(parts), -1, -1):
        candidate = ".".join([*parts[:i], type_name])
        if candidate in enums:
            return "enum", candidate
        if candidate in messages:
            return "message", candidate
    return "message", type_name


def _from_text(text: str, known_messages: set[str], known_enums: set[str]) -> ProtoModel:
    from proto_schema_parser import ast
    tree = parse_text(text)
    package, declared_messages, declared_enums = declared(tree)
    model = ProtoModel(tree.syntax or "proto2", package, enums=set(declared_enums))
    messages, enums = set(declared_messages) | known_messages, declared_enums | known_enums

    def add(fields: dict[int, ProtoField], element: Any, scope: str, oneof: str | None) -> None:
        if isinstance(element, ast.MapField):
            value = resolve_type(element.value_type, scope, messages, enums)[1]
            fields[element.number] = ProtoField(element.name, element.number, "repeated", "message",
                                                f"map<{element.key_type},{value}>")
            return
        kind, type_name = resolve_type(element.type, scope, messages, enums)
        cardinality = element.cardinality.value.lower() if element.cardinality is not None else ""
        fields[element.number] = ProtoField(element.name, element.number, cardinality, kind, type_name, oneof)

    for name, (_scope, elements) in declared_messages.items():
        fields = model.messages[name] = {}
        for element in elements:
            if isinstance(element, ast.Field | ast.MapField):
                add(fields, element, name, None)
            elif isinstance(element, ast.OneOf):
                for inner in element.elements:
                    if isinstance(inner, ast.Field):
                        add(fields, inner, name, element.name)
    return model


def normalize(parsed: Parsed) -> str:
    return parsed.text if parsed.model.descriptor is not None else re.sub(r"\s+", " ", parsed.text).strip()


def _scalar_compatible(a: str, b: str) -> bool:
    return a == b or any(a in group and b in group for group in COMPATIBLE_GROUPS)


def compatible(reader: Parsed, writer: Parsed) -> list[str]:
    new, old = reader.model, writer.model
    errors: list[str] = []
    if new.package != old.package:
        errors.append(f"PACKAGE_CHANGED: {old.package!r} -> {new.package!r}")
    if new.syntax != old.syntax:
        errors.append(f"SYNTAX_VERSION_CHANGED: {old.syntax} -> {new.syntax}")
    for name, old_fields in old.messages.items():
        new_fields = new.messages.get(name)
        if new_fields is None:
            errors.append(f"MESSAGE_REMOVED: {name}")
            continue
        moved: dict[str, int] = {}
        for number, before in old_fields.items():
            after = new_fields.get(number)
            where = f"{name}.{before.name} (field {number})"
            if after is None:
                if before.label == "required":
                    errors.append(f"REQUIRED_FIELD_REMOVED: {where}")
                if before.oneof is not None:
                    errors.append(f"ONEOF_FIELD_REMOVED: {where}")
                continue
            if after.kind != before.kind:
                errors.append(f"FIELD_KIND_CHANGED: {where}: {before.kind} -> {after.kind}")
            elif after.kind == "scalar" and not _scalar_compatible(before.type, after.type):
                errors.append(f"FIELD_SCALAR_KIND_CHANGED: {where}: {before.type} -> {after.type}")
            elif after.kind != "scalar" and before.type.rpartition(".")[2] != after.type.rpartition(".")[2]:
                errors.append(f"FIELD_NAMED_TYPE_CHANGED: {where}: {before.type} -> {after.type}")
            if (after.label == "required") != (before.label == "required"):
                errors.append(f"REQUIRED_FIELD_{'ADDED' if after.label == 'required' else 'REMOVED'}: {where}")
            if before.oneof is not None and after.oneof is None:
                errors.append(f"ONEOF_FIELD_REMOVED: {where}")
            if before.oneof is None and after.oneof is not None:
                moved[after.oneof] = moved.get(after.oneof, 0) + 1
        errors.extend(f"MULTIPLE_FIELDS_MOVED_TO_ONEOF: {name}.{oneof}" for oneof, n in moved.items() if n > 1)
        for number, after in new_fields.items():
            if number not in old_fields and after.label == "required":
                errors.append(f"REQUIRED_FIELD_ADDED: {name}.{after.name} (field {number})")
    return errors


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos  # zigzag, as Confluent writes the indexes
        shift += 7


def proto_imports(model: ProtoModel) -> bool:
    """Whether a descriptor imports other files (well-known types are in protobuf's default pool)."""
    from google.protobuf import descriptor_pb2
    return bool(model.descriptor is not None and descriptor_pb2.FileDescriptorProto.FromString(model.descriptor).dependency)


def validate(parsed: Parsed, payload: bytes) -> str | None:
    """The message-index prefix, then (for a schema registered as a descriptor) the message itself."""
    try:
        count, pos = _read_varint(payload, 0)
        if count < 0 or count > 64:
            return "a bad message-index count"
        indexes = []
        for _ in range(count):
            index, pos = _read_varint(payload, pos)
            indexes.append(index)
    except ValueError as exc:
        return f"bad message indexes: {exc}"
    model: ProtoModel = parsed.model
    if model.descriptor is None or parsed.references:
        return None  # .proto text (or imports): only the prefix is checked
    message_class = parsed.cache.get("classes")
    if message_class is None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        pool = descriptor_pool.Default() if proto_imports(model) else descriptor_pool.DescriptorPool()
        proto = descriptor_pb2.FileDescriptorProto.FromString(model.descriptor)
        proto.name = f"pybroker-registered-{id(parsed)}.proto"
        try:
            pool.Add(proto)
            message_class = parsed.cache["classes"] = (pool.FindFileByName(proto.name), message_factory)
        except Exception:  # an import the pool does not know: only the prefix is checked
            message_class = parsed.cache["classes"] = (None, None)
    file, factory = message_class
    if file is None or factory is None:
        return None
    try:
        descriptor = file.message_types_by_name[list(file.message_types_by_name)[indexes[0] if indexes else 0]]
        for index in indexes[1:]:
            descriptor = descriptor.nested_types[index]
        factory.GetMessageClass(descriptor).FromString(payload[pos:])
    except Exception as exc:  # any decode failure is the payload's
        return f"not a Protobuf message of the registered schema: {type(exc).__name__}"
    return None


PROTOBUF = Format("PROTOBUF", parse, normalize, compatible, validate)
