"""pybroker's start-up alone: CPU seconds spent by its first Metadata answer, and the wall time to it.

Why: the grid measures start-to-ready once per run, beside Kafka, on a machine that other work loads; a
change to start-up (say, to what importing the codecs costs) needs medians of many starts, and the CPU
the broker spent by then (user + sys from `/proc`, every thread), which a loaded machine does not
stretch as it stretches the wall time. Each start is the grid's (`bench.run.start_brokers`): a fresh
log dir, the metrics port, `group.initial.rebalance.delay.ms=0`.

To compare two trees, alternate their runs (one start each) and take the medians of both: a tree is
chosen by `PYTHONPATH` (a folder holding `pybroker/` ahead of the installed one), which the broker's
process inherits.

    .venv/bin/python -m bench.start_cost [--starts N] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.grid import cpu_seconds, start_to_ready  # noqa: E402
from bench.readiness import PybrokerTarget  # noqa: E402


def one_start(workdir: Path) -> tuple[float, float]:
    """(CPU seconds at the first Metadata answer, seconds from spawn to it) of one fresh broker."""
    broker = PybrokerTarget(workdir, {"group.initial.rebalance.delay.ms": "0"})
    try:
        broker.start()
        wall = start_to_ready(broker)
        cpu = cpu_seconds(broker.pid)
    finally:
        broker.close()
    return cpu, wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5, help="starts to take the medians of (default 5)")
    parser.add_argument("--json", action="store_true", help="one JSON object: every start's figures")
    args = parser.parse_args(argv)
    cpus: list[float] = []
    walls: list[float] = []
    for i in range(max(1, args.starts)):
        with tempfile.TemporaryDirectory(prefix="pybroker-start-") as tmp:
            cpu, wall = one_start(Path(tmp) / str(i))
        cpus.append(cpu)
        walls.append(wall)
    if args.json:
        print(json.dumps({"cpu_s": cpus, "ready_s": walls}))
    else:
        print(f"{len(cpus)} starts: CPU at ready median {statistics.median(cpus):.3f} s "
              f"(min {min(cpus):.3f}), start-to-ready median {statistics.median(walls):.3f} s "
              f"(min {min(walls):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
