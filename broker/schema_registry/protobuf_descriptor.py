"""`.proto` text as a `FileDescriptorProto`: what `GET /schemas/ids/{id}?format=serialized` answers for a
Protobuf schema registered as text (Java's serializers register text; confluent-kafka's Python
deserializer asks for the serialized form). Built from proto-schema-parser's tree: package, syntax, imports,
messages (nested), fields with their labels, types and oneofs, map fields as protoc lays them out (a nested
`<Name>Entry` message with `map_entry`), and enums. Options other than `map_entry` are not carried.

Pure functions: any thread.
"""

from __future__ import annotations

import base64
from typing import Any

from pybroker.broker.schema_registry.formats import Parsed
from pybroker.broker.schema_registry.protobuf_format import ProtoModel, declared, parse_text, resolve_type

#: scalar name -> FieldDescriptorProto.Type
SCALAR_TYPES = {"double": 1, "float": 2, "int64": 3, "uint64": 4, "int32": 5, "fixed64": 6, "fixed32": 7,
                "bool": 8, "string": 9, "bytes": 12, "uint32": 13, "sfixed32": 15, "sfixed64": 16, "sint32": 17,
                "sint64": 18}
LABELS = {"optional": 1, "required": 2, "repeated": 3, "": 1}


def serialized(parsed: Parsed) -> str:
    """The base64 FileDescriptorProto of a Protobuf schema (as registered when it came in that form)."""
    model: ProtoModel = parsed.model
    if model.descriptor is not None:
        return parsed.text
    return base64.b64encode(descriptor_of(parsed)).decode()


def descriptor_of(parsed: Parsed) -> bytes:
    from google.protobuf import descriptor_pb2
    from proto_schema_parser import ast

    tree = parse_text(parsed.text)
    package, messages, enums = declared(tree)
    for ref in parsed.references.values():
        if ref.schema_type == "PROTOBUF":
            messages.update({name: ("", []) for name in ref.model.messages if name not in messages})
            enums |= ref.model.enums
    names, enum_names = set(messages), set(enums)
    file = descriptor_pb2.FileDescriptorProto(name="schema.proto", syntax=tree.syntax or "proto2")
    if package:
        file.package = package
    file.dependency.extend(e.name for e in tree.file_elements if isinstance(e, ast.Import))
    proto3 = file.syntax == "proto3"

    def field(message: Any, element: Any, scope: str, oneof_index: int | None, synthetic: list[Any]) -> None:
        out = message.field.add(name=element.name, number=element.number)
        cardinality = element.cardinality.value.lower() if element.cardinality is not None else ""
        out.label = LABELS.get(cardinality, 1)
        kind, type_name = resolve_type(element.type, scope, names, enum_names)
        if kind == "scalar":
            out.type = SCALAR_TYPES[type_name]
        else:
            out.type = 14 if kind == "enum" else 11
            out.type_name = f".{type_name}"
        if oneof_index is not None:
            out.oneof_index = oneof_index
        elif proto3 and cardinality == "optional":  # proto3 `optional`: a synthetic oneof, after the real ones
            synthetic.append(out)

    def map_field(message: Any, element: Any, scope: str) -> None:
        entry_name = "".join(part.capitalize() for part in element.name.split("_")) + "Entry"
        entry = message.nested_type.add(name=entry_name)
        entry.options.map_entry = True
        for number, (name, type_name) in enumerate((("key", element.key_type), ("value", element.value_type)), 1):
            kind, full = resolve_type(type_name, scope, names, enum_names)
            out = entry.field.add(name=name, number=number, label=1)
            if kind == "scalar":
                out.type = SCALAR_TYPES[full]
            else:
                out.type, out.type_name = (14 if kind == "enum" else 11), f".{full}"
        message.field.add(name=element.name, number=element.number, label=3, type=11,
                          type_name=f".{scope}.{entry_name}")

    def enum(into: Any, element: Any) -> None:
        out = into.add(name=element.name)
        for value in element.elements:
            if isinstance(value, ast.EnumValue):
                out.value.add(name=value.name, number=value.number)

    def message(into: Any, element: Any, scope: str) -> None:
        out = into.add(name=element.name)
        full = f"{scope}{element.name}"
        synthetic: list[Any] = []
        for inner in element.elements:
            if isinstance(inner, ast.Field):
                field(out, inner, full, None, synthetic)
            elif isinstance(inner, ast.MapField):
                map_field(out, inner, full)
            elif isinstance(inner, ast.OneOf):
                index = len(out.oneof_decl)
                out.oneof_decl.add(name=inner.name)
                for one in inner.elements:
                    if isinstance(one, ast.Field):
                        field(out, one, full, index, synthetic)
            elif isinstance(inner, ast.Message):
                message(out.nested_type, inner, f"{full}.")
            elif isinstance(inner, ast.Enum):
                enum(out.enum_type, inner)
        for optional in synthetic:
            optional.proto3_optional = True
            optional.oneof_index = len(out.oneof_decl)
            out.oneof_decl.add(name=f"_{optional.name}")

    prefix = f"{package}." if package else ""
    for element in tree.file_elements:
        if isinstance(element, ast.Message):
            message(file.message_type, element, prefix)
        elif isinstance(element, ast.Enum):
            enum(file.enum_type, element)
    data: bytes = file.SerializeToString()
    return data
