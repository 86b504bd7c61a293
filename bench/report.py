"""What `make bench` prints of the throughput grid, of each broker, and of the goals; and the JSON it leaves.

The grid: one block per (kind, size, partitions), one row per target (pybroker, Kafka's two profiles, Tansu,
the null broker) with msgs/s and MB/s, pybroker's ratio to it, the ceiling that bounds it there and the share
of that ceiling it reached, its CPU seconds per GB and RSS. Then one row per broker: start-to-ready, peak RSS,
end-to-end p50/p99 at 1,000 msgs/s, consumer-group join. Then the goals (`bench/goals.py` judges them):
each throughput goal by cell, met or not, against the lower of the goal and the ceiling; then the bounds
(CPU per GB, peak RSS, start-to-ready, p99).
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.goals import (
    NEAR_CEILING,
    OURS,
    Limit,
    Verdict,
    client_ceiling,
    size_label,
    target_ceiling,
)
from bench.grid import CEILING, Cell
from bench.load import LatencyWindows

RESULTS_DIR = Path(__file__).resolve().parent / "results"
#: the order targets are printed in; any other after them
ORDER = (OURS, "kafka", "kafka-fsync", "tansu", CEILING)
LABELS = {CEILING: "null (clients)"}


def _n(value: float | None, digits: int = 0, suffix: str = "") -> str:
    return "-" if value is None or value != value else f"{value:,.{digits}f}{suffix}"


def met_text(met: bool | None) -> str:
    return "-" if met is None else ("yes" if met else "NO")


def ordered(targets: list[str] | set[str] | Mapping[str, Any]) -> list[str]:
    names = list(targets)
    return [t for t in ORDER if t in names] + sorted(t for t in names if t not in ORDER)


def cell_rows(cell: Cell, disk: Mapping[int, float]) -> list[str]:
    """One cell's block: a heading, then one row per target."""
    lines = [f"  {cell.kind} {size_label(cell.size)} x{cell.partitions}p"]
    for target in ordered(cell.runs):
        ceiling = target_ceiling(cell, target, disk)
        ours = cell.median(target)
        share = ours / ceiling.msgs_per_s if ceiling.msgs_per_s == ceiling.msgs_per_s and ceiling.msgs_per_s else float("nan")
        ratio = cell.ratio(OURS, target) if target != OURS else float("nan")
        notes = cell.notes(target)
        if target == OURS and cell.kind == "consume":
            sendfile = cell.median(OURS, "sendfile_share")
            if sendfile == sendfile:
                notes = [f"sendfile {100 * sendfile:.1f}%", *notes]
        ceiling_text = "" if target == CEILING else ceiling.short + _n(ceiling.msgs_per_s)
        lines.append(f"    {LABELS.get(target, target):<16}{_n(ours):>11}{_n(cell.median(target, 'mb_per_s'), 1):>9}"
                     f"{_n(ratio, 2, 'x'):>10}{ceiling_text:>13}"
                     f"{('' if target == CEILING else _n(100 * share, 0, '%')):>7}"
                     f"{_n(cell.median(target, 'cpu_s_per_gb'), 1):>10}{_n(cell.median(target, 'rss_mb')):>8}"
                     f"  {'; '.join(notes)}".rstrip())
    return lines


def grid_text(cells: list[Cell], processes: int, repeats: int, disk: Mapping[int, float]) -> str:
    lines = [f"\n== throughput: {processes} client processes, median of {repeats} repetition(s) ==",
             "  pyb/this: pybroker's msgs/s over this target's (median of per-repetition ratios);",
             "  ceiling: what bounds this target here: 'c' the clients' (the same client processes against the null "
             "broker, which answers at once and stores nothing; '>=c': a broker beat it, so at least that),",
             "  'd' the disk's (the MB/s the disk alone made durable, written the way pybroker writes that many "
             "partitions, over the record size: for the targets that fsync, pybroker and kafka-fsync);",
             "  share: msgs/s over that ceiling; CPU s/GB: the broker's CPU seconds (children included) per GB of "
             "payload; RSS: after the phase",
             f"  {'phase / target':<20}{'msgs/s':>11}{'MB/s':>9}{'pyb/this':>10}{'ceiling':>13}{'share':>7}"
             f"{'CPU s/GB':>10}{'RSS MB':>8}  notes"]
    for cell in sorted(cells, key=lambda c: (c.kind != "produce", c.partitions, c.size)):
        if cell.runs:
            lines += cell_rows(cell, disk)
    return "\n".join(lines)


def print_grid(cells: list[Cell], processes: int, repeats: int, disk: Mapping[int, float]) -> None:
    print(grid_text(cells, processes, repeats, disk), flush=True)


def brokers_text(start_s: Mapping[str, float], rss_mb: Mapping[str, float], latency: Mapping[str, LatencyWindows],
                 joins: Mapping[str, float | None], storage: Mapping[str, str],
                 start_cpu_s: Mapping[str, float] | None = None) -> str:
    """One row per broker: what it costs to run, not to move data. `start_cpu_s`: CPU seconds at ready (a
    start's cost; on a loaded machine the wall time also says how many threads competed for the cores)."""
    targets = ordered([t for t in {**start_s, **rss_mb, **latency} if t != CEILING])
    cpu = start_cpu_s or {}
    lines = ["\n== per broker (x pybroker: this broker's figure over pybroker's) ==",
             f"  {'target':<14}{'start-to-ready':>15}{'x pyb':>8}{'start CPU':>11}{'peak RSS':>12}{'x pyb':>8}"
             f"{'e2e p50':>14}{'e2e p99':>14}{'group join':>12}  storage"]
    for t in targets:
        lat = latency.get(t)
        join = joins.get(t)
        start, rss = start_s.get(t, float("nan")), rss_mb.get(t, float("nan"))
        start_x = "" if t == OURS else _n(_over(start, start_s.get(OURS)), 1, "x")
        rss_x = "" if t == OURS else _n(_over(rss, rss_mb.get(OURS)), 1, "x")
        lines.append(f"  {t:<14}{_n(start, 2, ' s'):>15}{start_x:>8}{_n(cpu.get(t), 2, ' s'):>11}"
                     f"{_n(rss, 0, ' MB'):>12}{rss_x:>8}"
                     f"{_n(lat.percentile(0.5) if lat else None, 2, ' ms'):>14}"
                     f"{_n(lat.percentile(0.99) if lat else None, 2, ' ms'):>14}"
                     + (f"{_n(join, 3, ' s'):>12}  {storage.get(t, '')}"
                      + (f" ({lat.note})" if lat and lat.note else "")).rstrip())
    return "\n".join(lines)


def _over(value: float, base: float | None) -> float:
    return value / base if base and base == base and value == value else float("nan")


def verdict_text(v: Verdict) -> str:
    """'1.62x yes', or where the goal is beyond the ceiling '0.80x 95%d yes' (the share of the ceiling)."""
    text = _n(v.ratio, 2, "x")
    if v.beyond_ceiling:
        text += f" {_n(100 * v.share_of_ceiling, 0, '%')}{v.ceiling.short}"
    return f"{text} {met_text(v.met)}"


def goals_text(verdicts: list[Verdict], limits: list[Limit], counts: list[int]) -> str:
    lines = ["\n== goals (pybroker / peer msgs/s, same run, same machine) ==",
             f"  a cell whose goal asks for more than its ceiling ('c' the clients', 'd' the disk's) is judged "
             f"against the ceiling: met at {NEAR_CEILING:.0%} of it, the share shown",
             f"  {'goal':<40}{'size':>8}" + "".join(f"{f'{n} partition(s)':>20}" for n in counts)]
    rows: dict[tuple[str, int], dict[int, Verdict]] = {}
    for v in verdicts:
        rows.setdefault((f"[{v.goal.issue}] {v.goal.kind} >= {v.goal.ratio:g}x {v.goal.peer}", v.size), {})[
            v.partitions] = v
    for (label, size), by_count in rows.items():
        lines.append(f"  {label:<40}{size_label(size):>8}"
                     + "".join(f"{(verdict_text(by_count[n]) if n in by_count else ''):>20}" for n in counts))
    cpu = [lim for lim in limits if lim.name.startswith("CPU")]
    if cpu:
        failed = [lim for lim in cpu if lim.met is False]
        lines.append(f"  [34] broker CPU s/GB <= Kafka's (each profile, every cell): met in "
                     f"{sum(lim.met is True for lim in cpu)} of {len(cpu)}"
                     + ("" if not failed else "; not met: " + ", ".join(
                         f"{lim.name.removeprefix('CPU s/GB ')} ({lim.value:.1f} > {lim.limit:.1f})" for lim in failed)))
    for lim in limits:
        if not lim.name.startswith("CPU"):
            lines.append(f"  [34] {lim.name:<38}{_n(lim.value, 2)} {lim.unit} <= {_n(lim.limit, 2)} {lim.unit}"
                         f"  {met_text(lim.met)}" + (f"  ({lim.basis})" if lim.basis else ""))
    return "\n".join(lines)


def print_goals(verdicts: list[Verdict], limits: list[Limit], counts: list[int]) -> None:
    print(goals_text(verdicts, limits, counts), flush=True)


def _finite(value: Any) -> Any:
    """NaN (a figure that could not be had) as null: JSON has no NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def write_json(settings: dict[str, Any], cells: list[Cell], latency: dict[str, LatencyWindows],
               verdicts: list[Verdict], limits: list[Limit], extra: dict[str, Any]) -> Path:
    """bench/results/<UTC time>.json (git-ignored) and latest.json beside it: the figures for a closing note."""
    RESULTS_DIR.mkdir(exist_ok=True)
    disk = settings.get("disk_ceiling_mb_per_s", {})
    doc = {
        "when_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"arch": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
                    "load_average_end": os.getloadavg()},
        "settings": settings,
        "cells": [{"kind": c.kind, "size": c.size, "partitions": c.partitions,
                   "median_msgs_per_s": {t: c.median(t) for t in c.runs},
                   "median_mb_per_s": {t: c.median(t, "mb_per_s") for t in c.runs},
                   "median_cpu_s_per_gb": {t: c.median(t, "cpu_s_per_gb") for t in c.runs},
                   "ratio_pybroker_to": {t: c.ratio(OURS, t) for t in c.runs if t != OURS},
                   "ceiling_msgs_per_s": {t: target_ceiling(c, t, disk).msgs_per_s for t in c.runs if t != CEILING},
                   "client_ceiling_msgs_per_s": client_ceiling(c)[0], "ceiling_is_lower_bound": client_ceiling(c)[1],
                   "runs": {t: [asdict(p) for p in runs] for t, runs in c.runs.items()}} for c in cells],
        "latency": {name: {"rate": lat.rate, "p50_ms": lat.percentile(0.5), "p99_ms": lat.percentile(0.99),
                           "samples": lat.samples, "note": lat.note,
                           "windows": [{"p50_ms": w.percentile(0.5), "p99_ms": w.percentile(0.99),
                                        "max_ms": max(w.samples_ms, default=float("nan")),
                                        "samples": len(w.samples_ms), "loop_stalls": w.loop_stalls}
                                       for w in lat.windows]}
                    for name, lat in latency.items()},
        "goals": [v.as_dict() for v in verdicts],
        "bounds": [lim.as_dict() for lim in limits],
        **extra,
    }
    text = json.dumps(_finite(doc), indent=1, default=lambda v: None)
    path = RESULTS_DIR / f"bench-{doc['when_utc'].replace(':', '')}.json"
    path.write_text(text)
    (RESULTS_DIR / "latest.json").write_text(text)
    return path
