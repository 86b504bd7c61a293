"""Config values as a person reads them: "7 d" for 604800000 ms, "1 GiB" for 1073741824 bytes, "unlimited"
where Kafka means that. The page shows `display` and keeps the raw value on hover; pure functions, no I/O.

Which keys are durations or sizes comes from the name's last word (`.ms`, `.seconds`, `.minutes`,
`.hours`, `bytes`) and the config's type as DescribeConfigs states it (INT, SHORT or LONG); the values
with a meaning of their own are a table by name suffix and value (`SPECIAL`), since -1 means
"unlimited" for `retention.ms` but "the operating system's default" for `socket.send.buffer.bytes`.
A LONG at Long.MAX_VALUE, or an INT at Integer.MAX_VALUE, is "unlimited" (Kafka's "never" or "no
limit": `flush.messages`, `max.compaction.lag.ms`, `max.connections`).
"""

from __future__ import annotations

#: DescribeConfigs config_type values of whole numbers (INT, SHORT, LONG)
INTEGER_TYPES = frozenset({3, 4, 5})
LONG = 5
LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
#: (name suffix, raw value) -> what Kafka means by it; the first matching suffix wins
SPECIAL: tuple[tuple[str, str, str], ...] = (
    ("local.retention.ms", "-2", "same as retention.ms"),
    ("local.retention.bytes", "-2", "same as retention.bytes"),
    ("retention.ms", "-1", "unlimited"),
    ("retention.bytes", "-1", "unlimited"),
    ("retention.hours", "-1", "unlimited"),
    ("retention.minutes", "-1", "unlimited"),
    ("buffer.bytes", "-1", "OS default"),
)
#: the name's last word -> milliseconds per unit
DURATION_UNITS = {"ms": 1, "seconds": 1000, "minutes": 60_000, "hours": 3_600_000}
#: (unit, ms) from the largest; a duration shows its two largest parts
PARTS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000), ("ms", 1))
BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def duration(ms: int) -> str:
    """`5400000` -> "1 h 30 min"; the two largest non-zero parts."""
    if ms < 0:
        return f"-{duration(-ms)}"
    if ms == 0:
        return "0 ms"
    shown: list[str] = []
    rest = ms
    for unit, size in PARTS:
        if rest >= size:
            shown.append(f"{rest // size} {unit}")
            rest %= size
        elif shown:
            break  # "1 d 0 h 5 min" reads badly: stop at the first gap after the largest part
        if len(shown) == 2:
            break
    approximate = "~" if rest else ""  # what the parts leave out (the raw value is on hover)
    return approximate + " ".join(shown)


def size(n: int) -> str:
    """`1073741824` -> "1 GiB"; a value that is not a whole number of its unit gets "~" and 2 decimals."""
    if n < 1024:
        return f"{n} B"
    unit, value = 0, float(n)
    while value >= 1024 and unit < len(BYTE_UNITS) - 1:
        value /= 1024
        unit += 1
    if n % (1024 ** unit) == 0:
        return f"{n // 1024 ** unit} {BYTE_UNITS[unit]}"
    return f"~{value:.2f}".rstrip("0").rstrip(".") + f" {BYTE_UNITS[unit]}"


def config_display(name: str, value: str | None, config_type: int) -> str | None:
    """What the console shows for one config value (None stays None: unset or hidden)."""
    if value is None:
        return None
    for suffix, raw, meaning in SPECIAL:
        if name.endswith(suffix) and value == raw:
            return meaning
    if config_type not in INTEGER_TYPES:
        return value
    try:
        number = int(value)
    except ValueError:
        return value
    if number == LONG_MAX or (number == INT_MAX and config_type != LONG):
        return "unlimited"
    last = name.rsplit(".", 1)[-1]
    if last in DURATION_UNITS and number >= 0:
        return duration(number * DURATION_UNITS[last])
    if name.endswith("bytes") and number >= 0:
        return size(number)
    return value
