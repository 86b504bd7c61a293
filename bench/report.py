"""What `make bench` prints of the throughput grid, the goals of issue 14, and the JSON it leaves behind.

One table: every (kind, size, partitions) with pybroker, Tansu, their ratio, the goal and whether it is
met, and beside them the client-only ceiling (the same client processes against the null broker), the
brokers' CPU seconds per GB moved and RSS, and pybroker's sendfile share. A pybroker figure within 20% of
its ceiling is marked: there the clients, not the broker, set the pace.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.grid import CEILING, Cell
from bench.load import Latency

#: (kind, record size) -> the least pybroker/Tansu ratio the issue asks for
GOALS = {("produce", 1024): 2.0, ("produce", 10240): 3.0, ("consume", 1024): 2.0, ("consume", 10240): 3.0}
LATENCY_P99_GOAL_MS = 5.0
NEAR_CEILING = 0.8
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _n(value: float, digits: int = 0, suffix: str = "") -> str:
    return "-" if value != value else f"{value:,.{digits}f}{suffix}"


def _size(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


def met(ratio: float, goal: float) -> str:
    return "-" if ratio != ratio else ("yes" if ratio >= goal else "NO")


def ceiling_of(cell: Cell) -> tuple[float, bool]:
    """The client-only ceiling of a cell: the null broker's figure, or where a broker beat it (the null
    broker writes fetched bytes from memory, slower than sendfile) the best figure reached: the clients
    did at least that. The flag says it is such a lower bound."""
    null = cell.median(CEILING)
    best = max((v for v in (cell.median("pybroker"), cell.median("tansu")) if v == v), default=float("nan"))
    if best == best and (null != null or best > null):
        return best, True
    return null, False


def print_grid(cells: list[Cell], processes: int, repeats: int, disk: dict[int, float]) -> None:
    print(f"\n== throughput: {processes} client processes, median of {repeats} repetition(s); "
          "ratio = pybroker / Tansu msgs/s (median of per-repetition ratios) ==")
    print("  ceiling: the same client processes against the null broker (answers at once, stores nothing); "
          "'>=': a broker beat the null broker, the ceiling is at least its figure;\n"
          "  CPU s/GB: broker CPU seconds per GB of payload; '*' = pybroker within 20% of the ceiling;\n"
          "  disk: MB/s the disk alone took at the start of the run, written and fsynced the way pybroker writes "
          "(one file per partition, no broker): pybroker's produce ceiling")
    head = (f"  {'phase':<24}{'pybroker':>11}{'MB/s':>8}{'disk':>7}{'tansu':>11}{'ratio':>8}{'goal':>7}{'met':>5}"
            f"{'ceiling':>11}{'pyb CPU':>9}{'tansu CPU':>10}{'sendfile':>10}{'pyb RSS':>9}  notes")
    print(head)
    print(f"  {'':<24}{'msgs/s':>11}{'':>8}{'MB/s':>7}{'msgs/s':>11}{'':>8}{'':>7}{'':>5}{'msgs/s':>11}{'s/GB':>9}{'s/GB':>10}"
          f"{'':>10}{'MB':>9}")
    for cell in sorted(cells, key=lambda c: (c.kind != "produce", c.partitions, c.size)):
        ours, theirs = cell.median("pybroker"), cell.median("tansu")
        ceiling, beaten = ceiling_of(cell)
        ratio = cell.ratio()
        goal = GOALS.get((cell.kind, cell.size))
        mark = "*" if ours == ours and ceiling == ceiling and ours >= NEAR_CEILING * ceiling else " "
        share = cell.median("pybroker", "sendfile_share")
        notes = "; ".join(f"{t}: {n}" for t in ("pybroker", "tansu", CEILING) for n in cell.notes(t))
        phase = f"{cell.kind} {_size(cell.size)} x{cell.partitions}p"
        ceiling_mb = _n(disk.get(cell.partitions, float("nan"))) if cell.kind == "produce" else ""
        print(f"  {phase:<24}{_n(ours):>10}{mark}{_n(cell.median('pybroker', 'mb_per_s'), 1):>8}{ceiling_mb:>7}"
              f"{_n(theirs):>11}"
              f"{_n(ratio, 2, 'x'):>8}{(f'{goal:g}x' if goal else ''):>7}{(met(ratio, goal) if goal else ''):>5}"
              f"{('>=' if beaten else '') + _n(ceiling):>11}{_n(cell.median('pybroker', 'cpu_s_per_gb'), 1):>9}"
              f"{_n(cell.median('tansu', 'cpu_s_per_gb'), 1):>10}"
              f"{(_n(100 * share, 1, '%') if cell.kind == 'consume' else ''):>10}"
              f"{_n(cell.median('pybroker', 'rss_mb')):>9}  {notes}")


def print_goals(cells: list[Cell], latency: dict[str, Latency], disk: dict[int, float]) -> list[dict[str, Any]]:
    """The issue's goals, one line each, with the ratio at every partition count measured."""
    counts = sorted({c.partitions for c in cells})
    by_key = {(c.kind, c.size, c.partitions): c for c in cells}
    print("\n== goals of issue 14 (pybroker / Tansu, same run, same machine) ==")
    print(f"  {'goal':<30}" + "".join(f"{f'{n} partition(s)':>20}" for n in counts))
    summary: list[dict[str, Any]] = []
    for (kind, size), goal in GOALS.items():
        line = f"  {f'{kind} {_size(size)} >= {goal:g}x':<30}"
        for n in counts:
            cell = by_key.get((kind, size, n))
            ratio = cell.ratio() if cell else float("nan")
            line += f"{_n(ratio, 2, 'x') + ' ' + met(ratio, goal):>20}"
            summary.append({"goal": f"{kind} {size} B >= {goal:g}x Tansu", "partitions": n, "ratio": ratio,
                            "met": ratio == ratio and ratio >= goal})
        print(line)
    for note in beyond_the_disk(cells, disk) + beyond_the_clients(cells):
        print(f"    {note}")
    ours = latency.get("pybroker")
    if ours is not None:
        p99 = ours.percentile(0.99)
        theirs = latency.get("tansu")
        them = f" (Tansu {_n(theirs.percentile(0.99), 2)} ms)" if theirs is not None else ""
        print(f"  {f'end-to-end p99 <= {LATENCY_P99_GOAL_MS:g} ms':<30}{_n(p99, 2) + ' ms ' + met(-p99, -5.0):>20}"
              f"  at {ours.rate} msgs/s, p50 {_n(ours.percentile(0.5), 2)} ms{them} {ours.note}")
        summary.append({"goal": f"end-to-end p99 <= {LATENCY_P99_GOAL_MS:g} ms", "p99_ms": p99,
                        "met": p99 == p99 and p99 <= LATENCY_P99_GOAL_MS})
    return summary


def beyond_the_disk(cells: list[Cell], disk: dict[int, float]) -> list[str]:
    """Produce goals that ask for more fsynced MB/s than the disk alone took: goal x Tansu's MB/s (Tansu
    keeps records in memory) against the disk-only ceiling for that many partitions (`disk`)."""
    notes = []
    for cell in sorted(cells, key=lambda c: (c.size, c.partitions)):
        goal = GOALS.get((cell.kind, cell.size))
        needed = goal * cell.median("tansu", "mb_per_s") if goal and cell.kind == "produce" else float("nan")
        ceiling = disk.get(cell.partitions, float("nan"))
        if needed == needed and ceiling == ceiling and needed > ceiling:
            notes.append(f"produce {_size(cell.size)} x{cell.partitions}p: {goal:g}x Tansu is {_n(needed)} MB/s "
                         f"written and fsynced; the disk alone takes {_n(ceiling)} MB/s (pybroker: "
                         f"{_n(cell.median('pybroker', 'mb_per_s'))} MB/s)")
    return notes


def beyond_the_clients(cells: list[Cell]) -> list[str]:
    """Goals that ask for more msgs/s than the same clients reach against the null broker (it answers at
    once and stores nothing): a pybroker as fast as that ceiling would still miss them in this run. Only a
    null-broker figure counts here (where a broker beat it, the ceiling is unknown); the null broker is a
    Python program too, so this says where the bench's ceiling lies, not that no client could go faster."""
    notes = []
    for cell in sorted(cells, key=lambda c: (c.kind != "produce", c.size, c.partitions)):
        goal = GOALS.get((cell.kind, cell.size))
        needed = goal * cell.median("tansu") if goal else float("nan")
        ceiling, beaten = ceiling_of(cell)
        if needed == needed and ceiling == ceiling and not beaten and needed > ceiling:
            notes.append(f"{cell.kind} {_size(cell.size)} x{cell.partitions}p: {goal:g}x Tansu is {_n(needed)} msgs/s; "
                         f"the clients reach {_n(ceiling)} msgs/s against the null broker (pybroker: "
                         f"{_n(cell.median('pybroker'))})")
    return notes


def _finite(value: Any) -> Any:
    """NaN (a figure that could not be had) as null: JSON has no NaN."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def write_json(settings: dict[str, Any], cells: list[Cell], latency: dict[str, Latency],
               goals: list[dict[str, Any]], extra: dict[str, Any]) -> Path:
    """bench/results/<UTC time>.json (git-ignored) and latest.json beside it: the figures for a closing note."""
    RESULTS_DIR.mkdir(exist_ok=True)
    doc = {
        "when_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"arch": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
                    "load_average_end": os.getloadavg()},
        "settings": settings,
        "cells": [{"kind": c.kind, "size": c.size, "partitions": c.partitions,
                   "median_msgs_per_s": {t: c.median(t) for t in c.runs},
                   "median_mb_per_s": {t: c.median(t, "mb_per_s") for t in c.runs},
                   "median_cpu_s_per_gb": {t: c.median(t, "cpu_s_per_gb") for t in c.runs},
                   "ratio_pybroker_tansu": c.ratio(),
                   "client_ceiling_msgs_per_s": ceiling_of(c)[0], "ceiling_is_lower_bound": ceiling_of(c)[1],
                   "runs": {t: [asdict(p) for p in runs] for t, runs in c.runs.items()}} for c in cells],
        "latency": {name: {"rate": lat.rate, "p50_ms": lat.percentile(0.5), "p99_ms": lat.percentile(0.99),
                           "samples": len(lat.samples_ms), "note": lat.note} for name, lat in latency.items()},
        "goals": goals,
        "beyond_the_disk": beyond_the_disk(cells, settings.get("disk_ceiling_mb_per_s", {})),
        "beyond_the_clients": beyond_the_clients(cells),
        **extra,
    }
    text = json.dumps(_finite(doc), indent=1, default=lambda v: None)
    path = RESULTS_DIR / f"bench-{doc['when_utc'].replace(':', '')}.json"
    path.write_text(text)
    (RESULTS_DIR / "latest.json").write_text(text)
    return path
