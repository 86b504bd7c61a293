"""The little language our message schema tables are written in.

Each API's request and response is described once, as data, in a module of this package
(`pybroker.protocol.schema.produce`, ...). The tables are written by us from the facts in Kafka's
message specs: a field has a type, the versions it exists in, the versions in which it may be null,
and (for tagged fields) a tag. Version ranges use Kafka's notation so a table can be checked against
the spec by eye: ``"0+"``, ``"3-7"``, ``"none"``.

The code generator (`pybroker.protocol.codegen`) turns these tables into flat per-version codecs in
`pybroker.protocol.messages`; the reference interpreter in the tests walks the same tables.

Types:
    bool, int8, int16, int32, int64, uint16, uint32, float64, uuid,
    string, bytes, records                  (compact forms in flexible versions)
    []int32, []int64, []string, ...         (arrays of a scalar)
    []StructName / StructName with fields=  (arrays of structs, or a single nested struct)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Sentinel meaning "use the type's natural default" (0, False, "", empty list, zero uuid ...).
TYPE_DEFAULT: Any = object()

SCALAR_TYPES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "uuid",
     "string", "bytes", "records"}
)


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; ``hi is None`` means open-ended (``"3+"``); empty means ``"none"``."""

    lo: int
    hi: int | None
    empty: bool = False

    @classmethod
    def parse(cls, text: str) -> Versions:
        text = text.strip()
        if text == "none":
            return cls(0, -1, True)
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        if self.empty or not isinstance(version, int):
            return False
        return self.lo <= version and (self.hi is None or version <= self.hi)

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi is None:
            return f"{self.lo}+"
        return f"{self.lo}-{self.hi}" if self.lo != self.hi else str(self.lo)


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message or struct.

    ``name`` is the snake_case attribute name on the generated class; ``type`` as in the module
    docstring; ``fields`` is given for struct and struct-array types; ``tag``/``tagged`` make a
    tagged field (only present in flexible versions, written only when not at its default).
    ``default`` is the value used when the field is absent in a version (and when constructing).
    ``flexible`` narrows the versions in which the field takes its compact (flexible) encoding, as
    Kafka's field-level ``flexibleVersions`` does: ``None`` follows the message; the request header's
    client id says ``"none"`` (it stays a classic string even in header v2).
    """

    name: str
    type: str
    versions: Versions
    nullable: Versions
    tag: int | None = None
    tagged: Versions = field(default_factory=lambda: Versions.parse("none"))
    default: Any = TYPE_DEFAULT
    fields: tuple[Field, ...] = ()
    doc: str = ""
    flexible: Versions | None = None

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type not in SCALAR_TYPES


def F(
    name: str,
    type: str,
    versions: str = "0+",
    *,
    nullable: str = "none",
    tag: int | None = None,
    tagged: str | None = None,
    default: Any = TYPE_DEFAULT,
    fields: tuple[Field, ...] | list[Field] = (),
    doc: str = "",
    flexible: str | None = None,
) -> Field:
    """Build a `Field` from Kafka-style version strings. A tagged field's ``tagged`` defaults to ``versions``."""
    if tag is not None and tagged is None:
        tagged = versions
    return Field(
        name=name,
        type=type,
        versions=Versions.parse(versions),
        nullable=Versions.parse(nullable),
        tag=tag,
        tagged=Versions.parse(tagged or "none"),
        default=default,
        fields=tuple(fields),
        doc=doc,
        flexible=None if flexible is None else Versions.parse(flexible),
    )


@dataclass(frozen=True, slots=True)
class Message:
    """A request, response or header: ``valid`` is every version we have a codec for."""

    name: str
    api_key: int | None
    kind: str  # "request" | "response" | "header" | "data"
    valid: Versions
    flexible: Versions
    fields: tuple[Field, ...]


def M(
    name: str,
    api_key: int | None,
    kind: str,
    valid: str,
    flexible: str,
    fields: list[Field] | tuple[Field, ...],
) -> Message:
    return Message(name, api_key, kind, Versions.parse(valid), Versions.parse(flexible), tuple(fields))
