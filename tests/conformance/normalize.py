"""What legitimately differs between two brokers' answers, taken out before they are compared.

A decoded answer becomes plain dicts and lists (`normalize`), with the values that name this broker
rather than describe the answer replaced by placeholders: cluster ids, topic ids, hosts and ports, throttle
times, timestamps a broker stamps, generated member ids and producer ids, the features epoch (an offset
of Kafka's metadata log), log dirs and their sizes, and error message texts (clients log them; they
do not act on them): a message becomes "<message>" so its presence still counts, and an empty
one null (clients show both as no message). Node ids are not
normalized: both brokers run as node 1. Pure functions, callable from any thread.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

ZERO = uuid.UUID(int=0)
PLACEHOLDER = {
    "cluster_id": "<cluster>",
    "host": "<host>",
    "port": "<port>",
    "throttle_time_ms": "<throttle>",
    "log_append_time_ms": "<timestamp>",
    "member_id": "<member>",
    "leader": "<member>",
    "producer_id": "<producer>",
    "finalized_features_epoch": "<epoch>",
    "log_dir": "<dir>",
    "total_bytes": "<bytes>",
    "usable_bytes": "<bytes>",
    "subscription_id": "<subscription>",
}
MESSAGES = {"error_message", "message"}


def normalize(value: Any, key: str = "", messages: bool = False) -> Any:
    """`value` as plain data with the placeholders; `messages` keeps message texts (a scenario whose
    messages clients show as they are, SASL's)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: normalize(getattr(value, f.name), f.name, messages) for f in dataclasses.fields(value)
                if not f.name.startswith("_")}
    if isinstance(value, list):
        return [normalize(item, key, messages) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if key in PLACEHOLDER and value not in (None, "", -1):
        return PLACEHOLDER[key]
    if key in MESSAGES and messages:
        return value or None
    if key in MESSAGES:
        return "<message>" if value else None  # no message: null or empty, as clients show them alike
    if isinstance(value, uuid.UUID):
        return "<id>" if value != ZERO else "<zero>"
    return value


def differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Every place two normalized answers differ, as `path: ours != theirs` lines."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out: list[str] = []
        for k in sorted(set(ours) | set(theirs), key=str):
            out += differences(ours.get(k, "<absent>"), theirs.get(k, "<absent>"), f"{path}.{k}")
        return out
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [d for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) for d in differences(a, b, f"{path}[{i}]")]
    return [] if ours == theirs else [f"{path or '.'}: pybroker {ours!r} != kafka {theirs!r}"]
