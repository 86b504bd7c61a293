"""Rows out: an aligned table for people, or JSON for scripts (`--json`)."""

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
