"""Rows out: an aligned table for people, or JSON for scripts (`--json`).

Byte counts are humanized only in tables (`human_bytes`); `--json` keeps the exact numbers, so scripts never
parse a unit."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click


def emit(rows: Sequence[dict[str, Any]], columns: Sequence[str], as_json: bool, *, empty: str = "") -> None:
    if as_json:
        click.echo(json.dumps(list(rows), indent=2, default=str))
        return
    if not rows:
        if empty:
            click.echo(empty)
        return
    cells = [[_text(row.get(column)) for column in columns] for row in rows]
    headers = [column.upper().replace("_", "-") for column in columns]
    widths = [max(len(header), *(len(line[i]) for line in cells)) for i, header in enumerate(headers)]
    click.echo("  ".join(header.ljust(width) for header, width in zip(headers, widths, strict=True)).rstrip())
    for line in cells:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def human_bytes(value: int | None) -> str | None:
    """A byte count as a person reads it: `512 B`, `1.5 KiB`, `17.2 GiB` (powers of 1024, as `df -h`); None
    (unknown) stays None, which a table shows as `-`."""
    if value is None:
        return None
    if abs(value) < 1024:
        return f"{value} B"
    scaled = float(value)
    for unit in _UNITS:
        scaled /= 1024
        if abs(scaled) < 1024 or unit == _UNITS[-1]:
            break
    return f"{scaled:.1f} {unit}"
