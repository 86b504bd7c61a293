"""Value types of config entries: how text becomes a value, how a value is checked, how it reads back.

Kafka's config types (INT, LONG, DOUBLE, BOOLEAN, STRING, LIST, PASSWORD) are a closed set, so each is one
row in `PARSERS`; validators are small callables that return an error message or None.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """A config key has a value we refuse; ``key`` names it so the message can too."""

    def __init__(self, key: str, message: str) -> None:
        # Kafka's "Invalid value X for configuration KEY: ..." names the key already
        super().__init__(message if f"configuration {key}:" in message else f"{key}: {message}")
        self.key = key
        self.message = message


def _parse_int(text: str, lo: int, hi: int) -> int:
    value = int(text.strip())
    if not lo <= value <= hi:  # as Kafka's parse of a number too big for its type: not a number of the type
        raise ValueError(f"{value} is out of range")
    return value


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"expected true or false, got {text!r}")
    return lowered == "true"


def _parse_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


#: type name -> (parser from text, Kafka's DescribeConfigs config_type code)
PARSERS: dict[str, tuple[Callable[[str], Any], int]] = {
    "boolean": (_parse_bool, 1),
    "string": (str.strip, 2),
    "int": (lambda t: _parse_int(t, -(2**31), INT_MAX), 3),
    "short": (lambda t: _parse_int(t, -(2**15), 2**15 - 1), 4),
    "long": (lambda t: _parse_int(t, -(2**63), LONG_MAX), 5),
    "double": (lambda t: float(t.strip()), 6),
    "list": (_parse_list, 7),
    "class": (str.strip, 8),
    "password": (str.strip, 9),
}


def render(type_name: str, value: Any) -> str | None:
    """The text Kafka would show for a value (DescribeConfigs, the docs, `server.properties`)."""
    if value is None:
        return None
    if type_name == "boolean":
        return "true" if value else "false"
    if type_name == "list":
        return ",".join(value)
    return str(value)


Validator = Callable[[Any], str | None]


def at_least(lo: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if value is None or value >= lo else f"must be at least {lo}"

    check.__doc__ = f"[{lo},...]"
    return check


def between(lo: float, hi: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if value is None or lo <= value <= hi else f"must be between {lo} and {hi}"

    check.__doc__ = f"[{lo},...,{hi}]"
    return check


def one_of(*choices: str) -> Validator:
    def check(value: Any) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}"

    check.__doc__ = f"[{', '.join(choices)}]"
    return check


def each_of(*choices: str) -> Validator:
    """For list values such as cleanup.policy=compact,delete."""

    def check(value: Sequence[str]) -> str | None:
        bad = [item for item in value if item not in choices]
        return None if not bad else f"{', '.join(bad)} not in {', '.join(choices)}"

    check.__doc__ = f"[{', '.join(choices)}]"
    return check
