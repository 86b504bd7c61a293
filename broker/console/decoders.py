"""How the console shows a key, a value or a header value: a table of decoders by format name.

`DECODERS` maps a format name (the `format` parameter of the message browser and search) to a function
from the record's bytes to `(text, format shown)`, or None when the bytes are not in that format (the
caller then falls back to text and says so). `auto` picks JSON when the bytes parse, text when they are
UTF-8, hex otherwise. This table is the seam for decoding by schema later: a schema-registry decoder
(Avro, Protobuf, JSON Schema by schema id) is one more entry here, and the page lists the names it finds
in `/console/api/session`'s `formats`.

Pure functions on bytes, called off the event loop (inside the records read); every shown text is cut at
`MAX_SHOWN_BYTES` of input (pretty JSON at four times that) with a `truncated` flag saying so.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

MAX_SHOWN_BYTES = 16 * 1024

Decoder = Callable[[bytes], "tuple[str, str] | None"]


def _json(data: bytes) -> tuple[str, str] | None:
    try:
        return json.dumps(json.loads(data), indent=2, ensure_ascii=False), "json"
    except (ValueError, RecursionError):
        return None


def _text(data: bytes) -> tuple[str, str]:
    return data[:MAX_SHOWN_BYTES].decode("utf-8", errors="replace"), "text"


def _hex(data: bytes) -> tuple[str, str]:
    return data[:MAX_SHOWN_BYTES].hex(" "), "hex"


def _auto(data: bytes) -> tuple[str, str]:
    if len(data) <= MAX_SHOWN_BYTES and data[:1] in (b"{", b"["):
        shown = _json(data)
        if shown is not None:
            return shown
    try:
        data[:MAX_SHOWN_BYTES].decode("utf-8")
        return _text(data)
    except UnicodeDecodeError:
        return _hex(data)


#: format name -> decoder; a new format (say, "avro" through a schema registry) is one more row
DECODERS: dict[str, Decoder] = {"auto": _auto, "text": _text, "json": _json, "hex": _hex}
FORMATS = tuple(DECODERS)


def render(data: bytes | None, fmt: str) -> dict[str, Any] | None:
    """How one key, value or header value is shown: `text`, the `format` it is shown in, its `size`,
    `truncated`, and a `note` when the bytes are not in the format asked for."""
    if data is None:
        return None
    out: dict[str, Any] = {"size": len(data), "truncated": len(data) > MAX_SHOWN_BYTES}
    shown = DECODERS.get(fmt, _auto)(data)
    if shown is None:
        shown, out["note"] = _text(data), f"not {fmt}"
    elif shown[1] == "json":
        out["truncated"] = len(shown[0]) > 4 * MAX_SHOWN_BYTES  # shown whole (it parsed whole) unless very long
        shown = (shown[0][:4 * MAX_SHOWN_BYTES], "json")
    out["text"], out["format"] = shown
    return out
