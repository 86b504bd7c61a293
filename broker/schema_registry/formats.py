"""What every schema format gives the registry: parse (with its references), the stored text, the
normalized text (`?normalize=true`), the compatibility check of a reader against a writer, and the check of
one payload (produce-time validation). `FORMATS` is the table by Confluent's `schemaType` names.

Pure functions over values: any thread may call them (the routes call them on the event loop; a schema is
at most `MAX_SCHEMA_CHARS`, so a parse is short).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pybroker.broker.schema_registry.errors import RegistryError

#: a schema's text is refused past this many characters (42201): it is kept in memory and in `_schemas`
MAX_SCHEMA_CHARS = 512 * 1024


@dataclass(slots=True)
class Parsed:
    """A parsed schema: its format, the text to store, and what the format's rules work on."""

    schema_type: str
    text: str
    model: Any
    #: the parsed schemas it references, by reference name (Avro: named types; JSON: `$ref`; Protobuf: imports)
    references: dict[str, Parsed] = field(default_factory=dict)
    #: what a payload check builds once per schema (a fastavro reader, a jsonschema validator)
    cache: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Format:
    name: str
    #: (text, references by name) -> Parsed; raises RegistryError(42201)
    parse: Callable[[str, dict[str, Parsed]], Parsed]
    #: the normalized text of a parsed schema (`normalize=true`)
    normalize: Callable[[Parsed], str]
    #: (reader, writer) -> the reasons the reader cannot read what the writer wrote (empty: compatible)
    compatible: Callable[[Parsed, Parsed], list[str]]
    #: (schema, payload after the 5-byte prefix) -> why the payload does not match, or None
    validate: Callable[[Parsed, bytes], str | None]


def invalid(message: str) -> RegistryError:
    return RegistryError(42201, f"Invalid schema: {message}")


def formats() -> dict[str, Format]:
    """The formats by `schemaType`, imported on first use (their parsers are optional dependencies)."""
    from pybroker.broker.schema_registry.avro_format import AVRO
    from pybroker.broker.schema_registry.json_format import JSON
    from pybroker.broker.schema_registry.protobuf_format import PROTOBUF
    return {"AVRO": AVRO, "JSON": JSON, "PROTOBUF": PROTOBUF}
