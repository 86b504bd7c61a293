"""The error codes a response carries, for `pybroker_request_errors_total{api,error}`.

Kafka counts every error code in a response (top level, per topic, per partition). Responses are slotted
dataclasses, so each class gets a plan once: whether it has an `error_code` and which of its fields are
lists of nested structs. Walking a response is then a few attribute reads per element, with no
reflection per request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

#: class -> (has error_code, names of list fields that may hold structs)
_PLANS: dict[type, tuple[bool, tuple[str, ...]]] = {}


def _plan(cls: type) -> tuple[bool, tuple[str, ...]]:
    plan = _PLANS.get(cls)
    if plan is None:
        fields = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
        names = {f.name for f in fields}
        lists = tuple(f.name for f in fields if str(f.type).startswith("list[")
                      and str(f.type)[5:6].isupper())
        plan = ("error_code" in names, lists)
        _PLANS[cls] = plan
    return plan


def error_codes(response: Any) -> Iterator[int]:
    """Every non-zero error code in `response` and its nested structs."""
    has_code, lists = _plan(type(response))
    if has_code:
        code = response.error_code
        if code:
            yield code
    for name in lists:
        items = getattr(response, name)
        if items:
            for item in items:
                yield from error_codes(item)
