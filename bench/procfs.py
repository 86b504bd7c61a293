"""What the bench reads of other processes in `/proc` (Linux): a process's stat fields, its worker processes."""

from __future__ import annotations

import os


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of `/proc/<pid>/stat` after the command name (the state is [0]); None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def descendants(pid: int) -> list[int]:
    """The live processes below `pid` (its worker processes), from every process's parent in `/proc`."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := stat_fields(entry)) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
