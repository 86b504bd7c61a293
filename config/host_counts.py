"""Kafka's `host:count,host:count` values (`max.connections.per.ip.overrides`): parsing and checking.

A host is an IP address or a name (resolved by the broker when it starts); the count is a non-negative
int. An empty value means no overrides.
"""

from __future__ import annotations

from typing import Any

INT_MAX = 2**31 - 1


def parse_host_counts(text: str) -> dict[str, int]:
    """{host: count}; ValueError naming the bad entry."""
    counts: dict[str, int] = {}
    for entry in (item.strip() for item in text.split(",")):
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        host = host.strip().strip("[]")  # an IPv6 address may be written [::1]:5
        if not sep or not host:
            raise ValueError(f"{entry!r} is not host:count")
        try:
            value = int(count.strip())
        except ValueError:
            raise ValueError(f"{entry!r}: the count is not an integer") from None
        if not 0 <= value <= INT_MAX:
            raise ValueError(f"{entry!r}: the count must be between 0 and {INT_MAX}")
        counts[host] = value
    return counts


def host_counts(value: Any) -> str | None:
    """Validator for the config table."""
    try:
        parse_host_counts(value or "")
    except ValueError as exc:
        return str(exc)
    return None


host_counts.__doc__ = "[host:count,...]"
