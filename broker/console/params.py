"""Checking what a console request asks for, before any work: every count, size and name is capped.

A bad parameter is a `ConsoleError` with an HTTP status and one sentence; the router turns it into a
JSON answer `{"error": ...}`. Nothing here trusts the browser: the page is ours, but anyone who can reach
the port can send anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: the longest query string and JSON body accepted
MAX_QUERY_BYTES = 4096
MAX_BODY_BYTES = 1024 * 1024
#: Kafka's longest topic name; group ids and config keys get a generous bound of their own
MAX_TOPIC_NAME = 249
MAX_NAME = 1024
MAX_CONFIG_VALUE = 32 * 1024
#: messages one browse may return, and bytes it may read from the log
MAX_MESSAGES = 500
MAX_FETCH_BYTES = 4 * 1024 * 1024
#: a produced message's key + value + headers
MAX_PRODUCE_BYTES = 512 * 1024
MAX_HEADERS = 64
#: partitions a topic created here may have (the broker's own caps still apply after this)
MAX_PARTITIONS = 10_000
MAX_CONFIGS = 200
INT64_MAX = 2**63 - 1


class ConsoleError(Exception):
    """An answer other than 200: `status` and a sentence for the person at the browser."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def bad(message: str) -> ConsoleError:
    return ConsoleError(400, message)


def text(params: Mapping[str, Any], name: str, *, max_len: int = MAX_NAME, default: str | None = None,
         required: bool = True) -> str:
    value = params.get(name, default)
    if value is None:
        if required:
            raise bad(f"{name} is required")
        return ""
    if not isinstance(value, str):
        raise bad(f"{name} must be a string")
    if len(value) > max_len:
        raise bad(f"{name} is longer than {max_len} characters")
    if required and not value:
        raise bad(f"{name} must not be empty")
    return value


def optional_text(params: Mapping[str, Any], name: str, *, max_len: int) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    return text(params, name, max_len=max_len, required=False)


def integer(params: Mapping[str, Any], name: str, lo: int, hi: int, default: int | None = None) -> int:
    value = params.get(name, default)
    if value is None or value == "":
        if default is None:
            raise bad(f"{name} is required")
        value = default
    if isinstance(value, bool):
        raise bad(f"{name} must be an integer")
    if isinstance(value, str):
        stripped = value.strip()
        if not stripped.lstrip("-").isdigit() or len(stripped) > 20:
            raise bad(f"{name} must be an integer")
        value = int(stripped)
    if not isinstance(value, int):
        raise bad(f"{name} must be an integer")
    if not lo <= value <= hi:
        raise bad(f"{name} must be between {lo} and {hi}")
    return value


def choice(params: Mapping[str, Any], name: str, options: tuple[str, ...], default: str) -> str:
    value = params.get(name, default)
    if value not in options:
        raise bad(f"{name} must be one of {', '.join(options)}")
    return str(value)


def flag(params: Mapping[str, Any], name: str) -> bool:
    value = params.get(name, False)
    if isinstance(value, bool):
        return value
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("", "0", "false", "no", "off"):
        return False
    raise bad(f"{name} must be true or false")


def query(raw: str) -> dict[str, str]:
    """A query string as a flat dict: each key once, percent-decoded, bounded."""
    from urllib.parse import parse_qsl

    if len(raw) > MAX_QUERY_BYTES:
        raise ConsoleError(414, f"the query string is longer than {MAX_QUERY_BYTES} bytes")
    try:
        pairs = parse_qsl(raw, keep_blank_values=True, strict_parsing=False, max_num_fields=50)
    except ValueError:
        raise bad("too many query parameters") from None
    out: dict[str, str] = {}
    for key, value in pairs:
        if key in out:
            raise bad(f"{key} is given twice")
        out[key] = value
    return out


def json_body(body: bytes) -> dict[str, Any]:
    if len(body) > MAX_BODY_BYTES:
        raise ConsoleError(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise bad("the body is not JSON") from None
    if not isinstance(value, dict):
        raise bad("the body must be a JSON object")
    return value


def string_map(params: Mapping[str, Any], name: str, *, max_items: int = MAX_CONFIGS) -> dict[str, str]:
    value = params.get(name) or {}
    if not isinstance(value, dict):
        raise bad(f"{name} must be an object of strings")
    if len(value) > max_items:
        raise bad(f"{name} has more than {max_items} entries")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(item, str) or len(key) > MAX_NAME or len(item) > MAX_CONFIG_VALUE:
            raise bad(f"{name}: each value must be a string of at most {MAX_CONFIG_VALUE} characters")
        out[key] = item
    return out
