"""What the acks=1 window costs: acks=1 produce throughput and broker CPU with the window off, 1 s, 100 ms.

Why: the window (`flush.ms`, `storage/flush_window.py`) fsyncs acks=0/1 data a bounded time after its
first append, so a power cut on one node loses at most that much; each fsync costs the disk and the
broker's flusher threads, and more partitions mean more fsyncs per window. The default is chosen from
these figures (README, "The acks=1 window").

Each setting runs `bench.request_cost`'s cases with acks=1 (pre-encoded frames over plain sockets, so
the client costs almost nothing; the broker's user and system CPU from `/proc/<pid>/stat`) on a fresh
broker. The machine is shared, so the settings are alternated (off, 1000, 100, off, 1000, 100, ...)
rather than run one after another, and each figure is the median over the repeats; the load average
before each run is printed, since it says how much the host was doing besides.

    .venv/bin/python -m bench.acks1_window [--repeats 3] [--requests 6000] [--windows off,1000,100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import request_cost  # noqa: E402
from tests.integration.brokers import kill_all  # noqa: E402

OFF = str(2**63 - 1)
#: request_cost's cases (one partition, the grid's 1,024 partitions, 1 MB requests over 16), and small
#: requests over 1,024 partitions: each partition is written several times a second, so a shorter window
#: means more fsyncs, not the same one sooner
CASES = (*request_cost.CASES, (1024, 16, 1024))


def _overrides(window: str) -> dict[str, str]:
    return {"log.flush.interval.ms": OFF if window == "off" else window}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each setting, alternated")
    parser.add_argument("--requests", type=int, default=request_cost.REQUESTS, help="requests per case")
    parser.add_argument("--windows", default="off,1000,100", help="flush.ms settings, comma-separated")
    parser.add_argument("--cases", default=",".join(f"{s}:{r}:{p}" for s, r, p in CASES),
                        help="record bytes:records per request:partitions, comma-separated")
    args = parser.parse_args(argv)
    windows = args.windows.split(",")
    cases = tuple(tuple(int(n) for n in case.split(":")) for case in args.cases.split(","))
    runs: dict[str, list[list[request_cost.RequestCost]]] = {w: [] for w in windows}
    loads: list[float] = []
    try:
        for repeat in range(args.repeats):
            for window in windows:
                load = os.getloadavg()[0]
                loads.append(load)
                print(f"  [acks=1 window {window}] run {repeat + 1}/{args.repeats}, load average {load:.1f}",
                      flush=True)
                runs[window].append(request_cost.run(requests=args.requests, cases=cases, acks=1,  # type: ignore[arg-type]
                                                     overrides=_overrides(window)))
    finally:
        kill_all()
    print(f"\n== acks=1 produce with the acks=1 window (flush.ms): medians of {args.repeats} alternated runs; "
          f"{request_cost.CONNECTIONS} connections x {request_cost.WINDOW} in flight; broker process CPU; "
          f"load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores ==")
    print(f"  {'request':<26}{'flush.ms':>9}{'req/s':>8}{'MB/s':>7}{'user us/req':>13}{'sys us/req':>12}"
          f"{'CPU us/req':>12}")
    for index, (size, records, partitions) in enumerate(cases):
        for window in windows:
            results = [run[index] for run in runs[window]]
            rate = statistics.median(r.requests / r.seconds for r in results)
            mbps = statistics.median(r.payload_gb * 1000 / r.seconds for r in results)
            user = statistics.median(r.per_request_us(r.user_s) for r in results)
            system = statistics.median(r.per_request_us(r.system_s) for r in results)
            total = statistics.median(r.per_request_us(r.user_s + r.system_s) for r in results)
            case = f"{records} x {size} B, {partitions}p"
            print(f"  {case:<26}{window:>9}{rate:>8,.0f}{mbps:>7,.0f}{user:>13,.0f}{system:>12,.0f}{total:>12,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
