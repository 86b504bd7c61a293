"""Where pybroker's time goes under the benchmark's multi-process load: py-spy on the broker, summarised.

Why: the throughput grid says how fast; this says why. A fresh broker takes the fleet's produce (or
consume) load of one record size and partition count, over and over, while `py-spy record` samples the
broker process (with `--native`, C frames too: uvloop, the kernel calls' wrappers, compiled codecs); the
collapsed stacks are then summed per function: self time (the frame on top) and inclusive time (anywhere
on the stack), as shares of the busy samples (py-spy leaves idle ones out).

Needs py-spy (`.venv/bin/pip install py-spy`) and the right to ptrace the broker (root, or
kernel.yama.ptrace_scope=0).

    .venv/bin/python -m bench.profile_broker --phase produce --size 1024 [--partitions 1] [--seconds 20]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.fleet import Fleet  # noqa: E402
from bench.grid import create_topic  # noqa: E402
from tests.integration.brokers import BrokerProcess, kill_all  # noqa: E402

_LINE = re.compile(r" \(([^)]*?)(?::\d+)?\)$")


def function_of(frame: str) -> str:
    """'encode_v9 (pybroker/protocol/messages/produce.py:123)' -> 'encode_v9 (protocol/messages/produce.py)'."""
    match = _LINE.search(frame)
    if not match:
        return frame
    where = match.group(1)
    for marker in ("/site-packages/", "/lib/python3.11/", str(REPO_ROOT) + "/"):
        if marker in where:
            where = where.split(marker, 1)[1]
    return f"{frame[:match.start()]} ({where})"


#: a sample whose stack holds one of these is a thread waiting, not working (py-spy's --native counts it)
WAITING = ("Condition.wait", "PyThread_acquire_lock_timed", "epoll_pwait", "epoll_wait", "Queue.get",
           "SimpleQueue.get", "select (", "poll (")
PROJECT = ("(broker/", "(storage/", "(protocol/", "(config/")
EVENT_LOOP = "uv_run ("  # the event loop's thread: everything the broker does on its one interpreter thread


def summarise(collapsed: Path, top: int) -> str:
    """Per function, self and inclusive shares of the event loop's busy samples; then the other threads'."""
    loop_self: Counter[str] = Counter()
    loop_inclusive: Counter[str] = Counter()
    others: Counter[str] = Counter()
    loop_busy = loop_idle = other_busy = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [function_of(f) for f in stack.split(";")]
        waiting = any(w in f for f in frames[-6:] for w in WAITING)
        if any(EVENT_LOOP in f for f in frames):
            if waiting:
                loop_idle += count
                continue
            loop_busy += count
            python = [f for f in frames if ".py)" in f]
            # C time (memcpy, write, CRC, compiled codecs) is charged to the Python function that called it
            leaf = frames[-1] if ".py)" in frames[-1] else f"{python[-1] if python else '?'} > {frames[-1]}"
            loop_self[leaf] += count
            for name in set(python):
                if any(p in name for p in PROJECT) and "(broker/cli.py)" not in name:
                    loop_inclusive[name] += count
        elif not waiting:
            other_busy += count
            python = [f for f in frames if ".py)" in f]
            others[f"{frames[-1]}  <- {python[-1] if python else '?'}"] += count
    total = loop_busy or 1
    lines = [f"event loop thread: {loop_busy:,} busy samples, {loop_idle:,} waiting "
             f"({100 * loop_busy / max(1, loop_busy + loop_idle):.0f}% busy); other threads: {other_busy:,} busy",
             f"-- event loop, self (top {top}) --"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in loop_self.most_common(top)]
    lines.append(f"-- event loop, inclusive: the broker's own functions (top {top}) --")
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in loop_inclusive.most_common(top)]
    lines.append("-- other threads' busy samples, by leaf (share of the event loop's busy samples) --")
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in others.most_common(10)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--phase", choices=("produce", "consume"), default="produce")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0, help="how long py-spy samples")
    parser.add_argument("--records", type=int, default=0, help="records per round (default ~100 MB of payload)")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", type=Path, help="keep the collapsed stacks here")
    args = parser.parse_args(argv)
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    records = args.records or max(args.processes, 100_000_000 // args.size)
    fleet = Fleet(args.processes)
    try:
        with tempfile.TemporaryDirectory(prefix="pybroker-profile-") as tmp:
            broker = BrokerProcess(Path(tmp) / "broker")
            broker.start()
            try:
                return profile(args, fleet, broker, records, Path(tmp), py_spy)
            finally:
                broker.close()
    finally:
        fleet.close()
        kill_all()


def profile(args: argparse.Namespace, fleet: Fleet, broker: BrokerProcess, records: int, tmp: Path,
            py_spy: str) -> int:
    """Load the broker in rounds while py-spy samples it, then print the summary."""
    topic = f"profile-{args.size}-{args.partitions}"
    create_topic(broker.bootstrap, topic, args.partitions)
    ends: dict[int, int] = {}
    if args.phase == "consume":
        ends = fleet.produce(broker.bootstrap, topic, args.partitions, records, args.size).per_partition
    out = args.out or Path(tmp) / "stacks.txt"
    spy = subprocess.Popen([py_spy, "record", "--pid", str(broker.pid), "--native", "--rate", "250",
                            "--format", "raw", "--duration", str(int(args.seconds)),
                            "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    rounds = 0
    started = time.monotonic()
    while spy.poll() is None:
        if args.phase == "produce":
            result = fleet.produce(broker.bootstrap, topic, args.partitions, records, args.size)
        else:
            result = fleet.consume(broker.bootstrap, topic, ends)
        rounds += 1
        print(f"  round {rounds}: {result.msgs_per_s:,.0f} msgs/s, {result.mb_per_s:,.1f} MB/s "
              f"{'; '.join(result.notes)}", flush=True)
    _, err = spy.communicate()
    print(f"{args.phase} {args.size} B over {args.partitions} partition(s), {args.processes} client "
          f"processes, {time.monotonic() - started:.0f} s sampled")
    if not out.exists():
        print(f"py-spy wrote nothing: {err.decode(errors='replace')[-500:]}")
        return 1
    print(summarise(out, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
