"""Run a fuzzing campaign, or replay a saved input.

    python -m tests.fuzz.run --inputs 1000000 --jobs 2            # `make fuzz`: a new seed, printed
    python -m tests.fuzz.run --seed 42 --start 350000 --inputs 1000000   # resume seed 42 at input 350000
    python -m tests.fuzz.run --replay tests/fixtures/fuzz-crashes/hang-42-1234.bin
    python -m tests.fuzz.run --seed 42 --index 1234               # rebuild and run input 1234 of seed 42

Input i of seed s is always the same bytes (`Mutator.input(s, i)`), so (seed, index) is a complete
reproducer; the saved `.bin` is the same input for when the golden seeds have changed since. With
`--jobs N`, job j takes the indices i with i % N == j. A progress line goes to stderr every few seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.fuzz.known import known_finding, known_rule
from tests.fuzz.mutate import FuzzInput, Mutator
from tests.fuzz.seeds import load_seeds
from tests.fuzz.target import Finding, FuzzTarget, replay_bytes

CRASH_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "fuzz-crashes"
PROGRESS_EVERY_S = 10.0


@dataclass(slots=True)
class Result:
    seed: int
    first: int
    next_index: int = 0
    inputs: int = 0
    seconds: float = 0.0
    findings: list[dict[str, object]] = field(default_factory=list)
    keys_fed: set[str] = field(default_factory=set)  # "k00v07": the (api, version) of every seed fed
    stats: dict[str, object] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.inputs / self.seconds if self.seconds else 0.0


def signature(finding: Finding) -> str:
    """Findings that differ only in ids and sizes count once."""
    head = finding.detail.split(":")[0]
    return f"{finding.kind}:{''.join(c for c in head if not c.isdigit())[:80]}"


def save(finding: Finding, directory: Path = CRASH_DIR) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    together = f"-{finding.input.connections}conn" if finding.input.connections > 1 else ""
    path = directory / f"{finding.kind}-{finding.input.seed}-{finding.input.index}{together}.bin"
    path.write_bytes(finding.input.data)
    path.with_suffix(".txt").write_text(
        f"{finding.kind}: {finding.detail}\nframes: {', '.join(finding.input.sources)}\n"
        f"replay: {replay_command(finding, path)}\n")
    return path


def replay_command(finding: Finding, path: Path | None = None) -> str:
    where = f"--replay {path}" if path else f"--seed {finding.input.seed} --index {finding.input.index}"
    return f"python -m tests.fuzz.run {where}   (or --seed {finding.input.seed} --index {finding.input.index})"


async def campaign(seed: int, indices: range, *, deadline: float | None = None, save_dir: Path | None = CRASH_DIR,
                   progress: Callable[[Result, FuzzTarget], None] | None = None,
                   known: bool = True) -> Result:
    """Feed inputs `indices` of `seed` to one target until done or `deadline` (monotonic) passes."""
    mutator = Mutator(load_seeds())
    result = Result(seed, indices.start, indices.start)
    seen: set[str] = set()
    first_since_reset = indices.start  # where a replay of the broker's whole life up to a finding starts
    started = last = time.monotonic()
    async with FuzzTarget(known=known_rule if known else None) as target:
        for index in indices:
            if deadline is not None and time.monotonic() > deadline:
                break
            resets = target.stats.resets
            item = mutator.input(seed, index)
            result.keys_fed.update(item.sources)
            finding = await target.run(item)
            result.inputs += 1
            result.next_index = index + indices.step
            if finding is not None and signature(finding) not in seen:
                seen.add(signature(finding))
                known_as = known_finding(finding.kind, finding.detail)
                # a known finding already has its reproducer in test_findings.py
                path = save(finding, save_dir) if save_dir and not known_as else None
                replay = (f"{replay_command(finding, path)}; with the broker's state before it: python -m "
                          f"tests.fuzz.run --seed {seed} --start {first_since_reset} "
                          f"--inputs {(index - first_since_reset) // indices.step + 1}"
                          + (f" --stride {indices.step}" if indices.step > 1 else ""))
                result.findings.append({"kind": finding.kind, "detail": finding.detail[:500], "known": known_as,
                                        "index": index, "file": str(path) if path else None, "replay": replay})
                print(f"{'KNOWN ' if known_as else ''}FINDING {finding.kind} at seed {seed} index {index}: {finding.detail[:300]}\n"
                      f"  replay: {replay}", file=sys.stderr, flush=True)
            if target.stats.resets != resets:
                first_since_reset = index + indices.step
            now = time.monotonic()
            if progress is not None and now - last >= PROGRESS_EVERY_S:
                last = now
                result.seconds = now - started
                progress(result, target)
        result.seconds = time.monotonic() - started
        result.stats = asdict(target.stats)
    return result


def _progress_line(label: str) -> Callable[[Result, FuzzTarget], None]:
    def show(result: Result, target: FuzzTarget) -> None:
        s = target.stats
        print(f"[{label}] seed {result.seed} next index {result.next_index}: {result.inputs} inputs, "
              f"{result.rate:.0f}/s, {len(result.findings)} findings, {s.answered} answers, "
              f"{s.closed} closed, {s.skipped_known} known-skipped, RSS {s.rss_last_mb:.0f} MB "
              f"(peak {s.rss_peak_mb:.0f})", file=sys.stderr, flush=True)
    return show


def _job(args: tuple[int, int, int, int, float | None, Path]) -> Result:
    seed, start, stop, step, seconds, save_dir = args
    deadline = time.monotonic() + seconds if seconds else None
    label = f"job {start % step}/{step}" if step > 1 else "fuzz"
    return asyncio.run(campaign(seed, range(start, stop, step), deadline=deadline, save_dir=save_dir,
                                progress=_progress_line(label)))


async def replay(item: FuzzInput) -> Finding | None:
    async with FuzzTarget() as target:  # known rules off: a replay runs what it is given
        return await target.run(item)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=None, help="campaign seed (default: a new one, printed)")
    parser.add_argument("--start", type=int, default=0, help="first input index (resume a campaign)")
    parser.add_argument("--inputs", type=int, default=1_000_000, help="inputs to run from --start")
    parser.add_argument("--jobs", type=int, default=1, help="processes, each taking every N-th index")
    parser.add_argument("--stride", type=int, default=1, help="run every N-th index only (replays a job's span)")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long")
    parser.add_argument("--save-dir", type=Path, default=CRASH_DIR, help="where findings' inputs are saved")
    parser.add_argument("--replay", type=Path, nargs="*", help="run saved inputs and report what they find")
    parser.add_argument("--index", type=int, default=None, help="with --seed: run that one input")
    args = parser.parse_args(argv)

    if args.replay:
        status = 0
        for path in args.replay:
            connections = 2 if path.stem.endswith("-2conn") else 1  # dealt to two connections, as found
            finding = asyncio.run(replay(replay_bytes(path.read_bytes(), connections=connections)))
            print(f"{path}: {'no finding' if finding is None else f'{finding.kind}: {finding.detail}'}")
            status |= finding is not None
        return status
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    if args.index is not None:
        item = Mutator(load_seeds()).input(seed, args.index)
        finding = asyncio.run(replay(item))
        print(f"seed {seed} index {args.index}: {'no finding' if finding is None else f'{finding.kind}: {finding.detail}'}")
        return int(finding is not None)

    stride = args.stride * args.jobs
    stop = args.start + args.inputs * args.stride
    print(f"fuzzing seed {seed}, inputs {args.start}..{stop - 1}, {args.jobs} job(s); resume with "
          f"--seed {seed} --start <next index>", file=sys.stderr, flush=True)
    jobs = [(seed, args.start + j * args.stride, stop, stride, args.seconds, args.save_dir) for j in range(args.jobs)]
    if args.jobs == 1:
        results = [_job(jobs[0])]
    else:
        with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
            results = pool.map(_job, jobs)
    total = sum(r.inputs for r in results)
    seconds = max(r.seconds for r in results)
    findings = [f for r in results for f in r.findings]
    print(f"done: seed {seed}, {total} inputs in {seconds:.0f}s ({total / max(seconds, 1e-9):.0f}/s), "
          f"{len(findings)} findings ({sum(1 for f in findings if not f['known'])} new); resume with --seed {seed} --start {min(r.next_index for r in results)}",
          file=sys.stderr)
    for r in results:
        print(f"  job from {r.first}: {r.inputs} inputs, stats {r.stats}", file=sys.stderr)
    for f in findings:
        known = f" (known: {f['known']})" if f["known"] else ""
        print(f"  {f['kind']} at index {f['index']}{known}: {f['detail']}\n    {f['replay']}", file=sys.stderr)
    return 1 if any(not f["known"] for f in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
