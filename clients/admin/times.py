"""Times and durations on the command line, as click parameter types.

- `DATETIME`: ISO 8601 (`2024-05-01T12:00:00`, with `.sss`, with a zone: `Z`, `+02:00`, `+0200`; or a
  date alone), UTC when no zone is given (Kafka's tools take the same form), or epoch milliseconds.
  The value is epoch milliseconds.
- `DURATION`: ISO 8601 as Kafka's `--by-duration` takes it (`PT15M`, `P1DT2H`, `PT0.5S`) or a short
  form (`15m`, `2h`, `90s`, `1d`, `500ms`). The value is milliseconds.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import click

_ISO_DURATION = re.compile(r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
                           re.IGNORECASE)
_SHORT_DURATION = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>ms|s|m|h|d)$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_datetime_ms(text: str) -> int:
    text = text.strip()
    if text.isdigit():
        return int(text)
    moment = datetime.fromisoformat(text)  # ValueError for anything else
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def parse_duration_ms(text: str) -> int:
    text = text.strip()
    short = _SHORT_DURATION.match(text)
    if short:
        return int(float(short["n"]) * _UNIT_MS[short["unit"].lower()])
    iso = _ISO_DURATION.match(text)
    if not iso or text.upper() in ("P", "PT") or text.upper().endswith("T"):
        raise ValueError(text)
    parts = {k: float(v) if v else 0.0 for k, v in iso.groupdict().items()}
    return int(((parts["d"] * 24 + parts["h"]) * 60 + parts["m"]) * 60_000 + parts["s"] * 1000)


class _DateTime(click.ParamType):
    name = "DATETIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_datetime_ms(str(value))
        except ValueError:
            self.fail(f"{value!r} is not a date and time: use YYYY-MM-DDTHH:MM:SS[.sss][Z|+HH:MM] "
                      "(UTC without a zone) or epoch milliseconds", param, ctx)


class _Duration(click.ParamType):
    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_duration_ms(str(value))
        except ValueError:
            self.fail(f"{value!r} is not a duration: use ISO 8601 (PT15M, P1DT2H) or 15m, 2h, 90s, 1d", param, ctx)


DATETIME = _DateTime()
DURATION = _Duration()
