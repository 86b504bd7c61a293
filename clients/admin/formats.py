"""Records as text: the lines `pybroker produce` reads and the lines `pybroker consume` prints.

Input, as kafka-console-producer's line reader: one record per line; with a key separator the line
is `key<SEP>value` (a line without the separator is an error naming its number, as Kafka's
`parse.key=true`); with header parsing the line starts with `k:v,k2:v2<TAB>` (Kafka's
`parse.headers=true` and its delimiters); a key or value equal to the null marker is null. Or one JSON
object per line (`{"key": ..., "value": ..., "headers": {...}, "partition": 0, "timestamp": ms}`, as rpk's
JSON input): a value that is not a string is sent as its compact JSON text. Keys, values and header values
may be written as hex or base64 to send binary data (`--encoding`, as consume shows them).

Output, as kafka-console-consumer's default formatter: the chosen fields (timestamp, partition, offset,
headers, key) then the value, joined by the key separator (a tab); or one JSON object per record. Bytes
are shown as text (UTF-8, undecodable bytes escaped), JSON, hex or base64.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ENCODINGS = ("text", "json", "hex", "base64")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


class InputError(ValueError):
    """A line that cannot become a record; the message names the line."""


@dataclass(slots=True)
class OutgoingRecord:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    partition: int | None = None
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class LineFormat:
    """How a line of input splits (Kafka's LineMessageReader properties)."""

    key_separator: str | None = None
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    null_marker: str | None = None
    #: how keys, values and header values are written: text (UTF-8), hex or base64 (binary data)
    encoding: str = "text"


def decode_text(text: str, encoding: str, number: int) -> bytes:
    """Input text to bytes: UTF-8, or the bytes that hex or base64 text spells (InputError naming the line)."""
    try:
        if encoding == "hex":
            return bytes.fromhex(text)
        if encoding == "base64":
            return base64.b64decode(text, validate=True)
    except ValueError:
        raise InputError(f"line {number}: {text[:40]!r} is not {encoding}") from None
    return text.encode()


def _blob(text: str, fmt: LineFormat, number: int) -> bytes | None:
    if fmt.null_marker is not None and text == fmt.null_marker:
        return None
    return decode_text(text, fmt.encoding, number)


def parse_line(line: str, number: int, fmt: LineFormat) -> OutgoingRecord:
    headers: list[tuple[str, bytes | None]] = []
    rest = line
    if fmt.parse_headers:
        head, sep, rest = line.partition(fmt.headers_delimiter)
        if not sep:
            raise InputError(f"line {number}: no headers delimiter {fmt.headers_delimiter!r} found")
        for item in (h for h in head.split(fmt.headers_separator) if h):
            name, colon, value = item.partition(fmt.headers_key_separator)
            if not colon:
                raise InputError(f"line {number}: header {item!r} has no key separator "
                                 f"{fmt.headers_key_separator!r}")
            headers.append((name, _blob(value, fmt, number)))
    if fmt.key_separator is None:
        return OutgoingRecord(None, _blob(rest, fmt, number), headers)
    key, sep, value = rest.partition(fmt.key_separator)
    if not sep:
        raise InputError(f"line {number}: no key separator {fmt.key_separator!r} found")
    return OutgoingRecord(_blob(key, fmt, number), _blob(value, fmt, number), headers)


def _json_blob(value: Any, encoding: str, number: int) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return decode_text(value, encoding, number)
    return json.dumps(value, separators=(",", ":")).encode()


def parse_json_line(line: str, number: int, encoding: str = "text") -> OutgoingRecord:
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise InputError(f"line {number}: not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise InputError(f"line {number}: expected a JSON object with a value")
    raw_headers = obj.get("headers") or {}
    pairs = raw_headers.items() if isinstance(raw_headers, dict) else \
        [(h.get("key"), h.get("value")) if isinstance(h, dict) else tuple(h) for h in raw_headers]
    headers = [(str(k), _json_blob(v, encoding, number)) for k, v in pairs]
    partition, timestamp = obj.get("partition"), obj.get("timestamp")
    for name, number_value in (("partition", partition), ("timestamp", timestamp)):
        if number_value is not None and (not isinstance(number_value, int) or number_value < 0):
            raise InputError(f"line {number}: {name} must be a non-negative integer")
    return OutgoingRecord(_json_blob(obj.get("key"), encoding, number), _json_blob(obj.get("value"), encoding, number),
                          headers, partition, timestamp)


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()


def render(blob: bytes | None, encoding: str) -> Any:
    """Bytes as the chosen encoding; for JSON the decoded document when the bytes hold one."""
    if blob is None:
        return None
    if encoding == "hex":
        return blob.hex()
    if encoding == "base64":
        return base64.b64encode(blob).decode()
    text = blob.decode("utf-8", errors="backslashreplace")
    if encoding == "json":
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


@dataclass(frozen=True, slots=True)
class PrintFormat:
    """Which fields a text line shows (kafka-console-consumer's print.* properties)."""

    encoding: str = "text"
    key_separator: str = "\t"
    print_key: bool = False
    print_headers: bool = False
    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    null_literal: str = "null"


def _cell(blob: bytes | None, fmt: PrintFormat) -> str:
    value = render(blob, fmt.encoding)
    if value is None:
        return fmt.null_literal
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def text_line(record: ConsumedRecord, fmt: PrintFormat) -> str:
    cells = []
    if fmt.print_timestamp:
        cells.append(f"{TIMESTAMP_TYPES[record.timestamp_type]}:{record.timestamp_ms}")
    if fmt.print_partition:
        cells.append(f"Partition:{record.partition}")
    if fmt.print_offset:
        cells.append(f"Offset:{record.offset}")
    if fmt.print_headers:
        cells.append(",".join(f"{k}:{_cell(v, fmt)}" for k, v in record.headers) or "NO_HEADERS")
    if fmt.print_key:
        cells.append(_cell(record.key, fmt))
    cells.append(_cell(record.value, fmt))
    return fmt.key_separator.join(cells)


def json_object(record: ConsumedRecord, encoding: str) -> Mapping[str, Any]:
    return {"topic": record.topic, "partition": record.partition, "offset": record.offset,
            "timestamp": record.timestamp_ms, "timestamp_type": TIMESTAMP_TYPES[record.timestamp_type],
            "headers": [{"key": k, "value": render(v, encoding)} for k, v in record.headers],
            "key": render(record.key, encoding), "value": render(record.value, encoding)}


#: placeholders of `consume --format` (rpk's and kcat's letters): what each is replaced with
TEMPLATE_FIELDS = {"t": "topic", "p": "partition", "o": "offset", "k": "key", "v": "value", "T": "timestamp",
                   "h": "headers", "K": "key size", "V": "value size"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "0": "\0"}


def check_template(template: str) -> None:
    """ValueError naming the first placeholder or escape the template may not hold."""
    index = 0
    while index < len(template):
        char = template[index]
        if char in "%\\":
            if index + 1 >= len(template):
                raise ValueError(f"the template ends with a lone {char!r}")
            code = template[index + 1]
            if char == "%" and code != "%" and code not in TEMPLATE_FIELDS:
                raise ValueError(f"%{code} is not a placeholder (known: "
                                 + ", ".join(f"%{k} {v}" for k, v in TEMPLATE_FIELDS.items()) + ", %%)")
            if char == "\\" and code not in _ESCAPES:
                raise ValueError(f"\\{code} is not an escape (known: \\n, \\t, \\r, \\\\, \\0)")
            index += 2
        else:
            index += 1


def templated(record: ConsumedRecord, template: str, encoding: str) -> str:
    """The record through a `--format` template such as `%k=%v\\n` (checked by `check_template`)."""
    def cell(blob: bytes | None) -> str:
        value = render(blob, encoding)
        return "" if value is None else value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))

    fields = {"t": lambda: record.topic, "p": lambda: str(record.partition), "o": lambda: str(record.offset),
              "k": lambda: cell(record.key), "v": lambda: cell(record.value), "T": lambda: str(record.timestamp_ms),
              "h": lambda: ",".join(f"{k}:{cell(v)}" for k, v in record.headers),
              "K": lambda: str(-1 if record.key is None else len(record.key)),
              "V": lambda: str(-1 if record.value is None else len(record.value))}
    out = []
    index = 0
    while index < len(template):
        char = template[index]
        if char == "%" and index + 1 < len(template):
            code = template[index + 1]
            out.append("%" if code == "%" else fields[code]())
            index += 2
        elif char == "\\" and index + 1 < len(template):
            out.append(_ESCAPES[template[index + 1]])
            index += 2
        else:
            out.append(char)
            index += 1
    return "".join(out)

