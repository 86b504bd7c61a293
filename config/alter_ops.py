"""IncrementalAlterConfigs' four operations on a resource's set of overrides, as a table.

Overrides are text (as they persist and as DescribeConfigs shows them). SET replaces a key, DELETE
removes it (the value falls back to the next layer), APPEND and SUBTRACT add or remove items of a list
value, starting from the effective value when the key has no override, as Kafka does. Checking the
resulting values against the config table is the caller's job (topic and broker keys differ).

A topic's DELETE of a key we do not know is a no-op, as on Kafka (which refuses only a SET of an unknown
topic key): MirrorMaker 2 resets every config its source reports at its default by DELETE, including Kafka's
keys pybroker lacks (remote storage, share-group dead-letter queues), and their defaults are what pybroker does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from pybroker.config.definitions import ConfigDef
from pybroker.config.types import ConfigError

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

#: current override (or None), the effective value as text, the operand -> the new override (None: remove)
Operation = Callable[[str | None, str | None, str | None], str | None]


def _items(text: str | None) -> list[str]:
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def _append(current: str | None, effective: str | None, operand: str | None) -> str:
    items = _items(current if current is not None else effective)
    return ",".join(items + [item for item in _items(operand) if item not in items])


def _subtract(current: str | None, effective: str | None, operand: str | None) -> str:
    removed = set(_items(operand))
    return ",".join(item for item in _items(current if current is not None else effective) if item not in removed)


OPERATIONS: dict[int, tuple[str, Operation, bool]] = {
    # code: (name, function, only for list values)
    SET: ("SET", lambda current, effective, operand: operand, False),
    DELETE: ("DELETE", lambda current, effective, operand: None, False),
    APPEND: ("APPEND", _append, True),
    SUBTRACT: ("SUBTRACT", _subtract, True),
}


def apply_operations(overrides: Mapping[str, str], changes: Iterable[tuple[str, int, str | None]],
                     definitions: Mapping[str, ConfigDef], effective: Callable[[str], str | None],
                     *, unknown_delete_ok: bool = False) -> dict[str, str]:
    """The overrides after `changes` ((key, operation, value) each); `ConfigError` names a bad one.
    `unknown_delete_ok` (topics) lets a DELETE of an unknown key pass and do nothing."""
    result = dict(overrides)
    seen: set[str] = set()
    for key, code, operand in changes:
        if key in seen:
            raise ConfigError(key, "appears more than once in the request")
        seen.add(key)
        definition = definitions.get(key)
        if definition is None:
            if unknown_delete_ok and code == DELETE:
                result.pop(key, None)
                continue
            raise ConfigError(key, "unknown config")
        row = OPERATIONS.get(code)
        if row is None:
            raise ConfigError(key, f"unknown operation {code}")
        name, operation, lists_only = row
        if lists_only and definition.type != "list":
            raise ConfigError(key, f"{name} is only allowed for list configs, and {key} is a {definition.type}")
        if code == SET and operand is None:
            raise ConfigError(key, "SET needs a value")
        new = operation(result.get(key), effective(key), operand)
        if new is None:
            result.pop(key, None)
        else:
            result[key] = new
    return result
