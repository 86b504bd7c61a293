"""A power-loss campaign: a busy broker on the lazy file system, cut again and again, checked after each.

One broker with two log dirs (both on one lazy mount) runs the workload of `tests/powerloss/workload.py`.
Each cut is either *random* (after a random time under load) or *targeted*: the mount is armed with a
trigger of `tests/powerloss/triggers.py` (a roll, an index resize, a cleaner swap, a checkpoint write, a
topic creation or deletion, a log-dir move, a producer snapshot, an internal-topic append) and the cut
comes exactly when the broker reaches that operation; a trigger that does not fire within the window
falls back to a random cut and is counted as missed. The cut: SIGKILL the broker, stop (or, frozen,
SIGKILL) the file system, drop everything that was not durable, mount again, start the broker, let the
idempotent producer resend what it had in flight, and run `tests/powerloss/checks.py`; with `check_log`,
also stop the broker cleanly and run `pybroker check-log` over both dirs.

Short campaigns run in `make test` (`tests/integration/test_power_loss_campaign.py`); the long one is
`make soak` (`python -m tests.powerloss.campaign --cuts 100`), which prints a summary table and fails
unless nothing acknowledged was lost, every target was cut at least once and acks=1 lost something.
Runs on the caller's (main) thread; the workload runs in its own threads.
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.integration.brokers import BrokerProcess
from tests.powerloss.checks import Findings, check_after_restart, check_log
from tests.powerloss.mount import LazyMount
from tests.powerloss.triggers import TARGETS, Trigger
from tests.powerloss.workload import (
    ACKS1,
    Acks1Stream,
    Churn,
    Committer,
    IdempotentStream,
    Ledger,
    Mover,
    Stream,
    Transactions,
    create_topics,
    stop_all,
)

OVERRIDES = {
    "log.segment.bytes": str(32 * 1024),
    "log.index.size.max.bytes": str(4 * 1024),  # indexes resized at every roll
    "log.index.interval.bytes": "512",
    "log.flush.offset.checkpoint.interval.ms": "300",
    "log.flush.start.offset.checkpoint.interval.ms": "300",
    "log.retention.check.interval.ms": "300",
    "log.segment.delete.delay.ms": "100",
    "log.cleaner.backoff.ms": "200",
    "log.cleaner.min.cleanable.ratio": "0.01",
    "offsets.topic.num.partitions": "2",
    "offsets.topic.segment.bytes": str(16 * 1024),
    "transaction.state.log.num.partitions": "2",
    "transaction.state.log.segment.bytes": str(16 * 1024),
    "group.initial.rebalance.delay.ms": "0",
    "replica.alter.log.dirs.io.max.bytes.per.second": str(2 * 1024 * 1024),
}
#: the load before a random cut, in seconds, and how long a trigger may take to fire
RANDOM_S = (0.3, 6.0)
TRIGGER_WINDOW_S = 20.0
#: the count a trigger waits for is drawn from 1..NTH_MAX, so the cut is not always at the first one
NTH_MAX = 6
SETTLE_S = 60.0
#: how long the workload's threads get to notice a stop (a client call blocked on the dead broker may
#: take longer: that thread finishes on its own)
STOP_S = 3.0


@dataclass
class Summary:
    """The figures of a campaign: what was acknowledged and lost per kind, and how each cut was made."""

    cuts: int = 0
    random_cuts: int = 0
    targeted: Counter[str] = field(default_factory=Counter)
    missed: Counter[str] = field(default_factory=Counter)
    acknowledged: Counter[str] = field(default_factory=Counter)
    lost: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    moves: int = 0
    seconds: float = 0.0

    def add(self, findings: Findings, cut: int) -> None:
        # acknowledgements are counted over the whole ledger (the last count is the campaign's); each loss
        # leaves the ledger once found, so losses add up
        self.acknowledged = findings.acknowledged
        self.lost += findings.lost
        self.violations += [f"after cut {cut}: {line}" for line in findings.violations]

    def table(self) -> str:
        rows = [("kind", "acknowledged", "lost")]
        rows += [(kind, str(self.acknowledged[kind]), str(self.lost[kind])) for kind in sorted(self.acknowledged)]
        rows += [("", "", ""), ("cut at", "cuts", "missed")]
        rows += [("random moment", str(self.random_cuts), "")]
        rows += [(name, str(self.targeted[name]), str(self.missed[name])) for name in TARGETS]
        width = [max(len(row[i]) for row in rows) for i in range(3)]
        lines = [f"power-loss campaign: {self.cuts} cuts in {self.seconds:.0f} s, {self.moves} log-dir moves, "
                 f"{len(self.violations)} violations"]
        lines += ["  ".join(cell.ljust(width[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
        return "\n".join(lines)

    def failures(self, *, all_targets: bool, acks1_must_lose: bool) -> list[str]:
        out = list(self.violations)
        if all_targets:
            out += [f"never cut at: {name}" for name in TARGETS if not self.targeted[name]]
        if acks1_must_lose and not self.lost[ACKS1]:
            out.append("acks=1 lost nothing over the campaign: the harness does not bite")
        return out


class Campaign:
    """One broker over one lazy mount in `workdir`, and the loop of cuts."""

    def __init__(self, workdir: Path, seed: int, *, check_log_every: int = 1,
                 say: Callable[[str], None] = print, verbose: bool = False,
                 stop_on_violation: bool = False) -> None:
        self.random = random.Random(seed)
        self.lazy = LazyMount(workdir / "backing", workdir / "mnt")
        self.log_dirs = [self.lazy.mountpoint / "d1", self.lazy.mountpoint / "d2"]
        self.broker = BrokerProcess(workdir / "broker", OVERRIDES, log_dirs=self.log_dirs)
        self.ledger = Ledger()
        self.summary = Summary()
        self.check_log_every = check_log_every
        self.say = say
        self.stop_on_violation = stop_on_violation
        self.survivors = workdir / "survived-last-cut"
        self.verbose = verbose
        self.idempotent: IdempotentStream | None = None
        self.streams: list[Stream] = []
        self._started = time.monotonic()

    # -- the loop --------------------------------------------------------------------------------------
    def run(self, cuts: int, plan: list[str | None] | None = None) -> Summary:
        """Make `cuts` cuts; `plan` names the target of each (None: random), else targets round-robin
        in a shuffled order with every third cut random."""
        self.begin()
        try:
            for target in (plan if plan is not None else self._plan(cuts))[:cuts]:
                findings = self.cut_and_check(target, cuts)
                if findings.violations and self.stop_on_violation:
                    self.say(f"stopped at the first violation: what survived the cut is in {self.survivors}")
                    break
        finally:
            self.close()
        return self.summary

    def begin(self) -> None:
        """Mount, start the broker, create the topics and start the workload."""
        self._started = time.monotonic()
        self.lazy.mount()
        self.broker.start()  # it makes its log dirs: their names must be made durable by the broker
        create_topics(self.broker.bootstrap)
        self._start_streams()

    def cut_and_check(self, target: str | None, of: int = 0) -> Findings:
        """One cut (at `target`, or at a random moment), the restart and every check; the workload runs
        again afterwards. The findings are added to the summary and returned."""
        cut = self.summary.cuts + 1
        self._cut(target)
        self.summary.cuts = cut
        self._keep_survivors()
        output_from = self.broker.log_path.stat().st_size
        self.broker.start()
        assert self.idempotent is not None
        unsettled = self.idempotent.settle(SETTLE_S)
        findings = check_after_restart(self.broker.bootstrap, self.ledger, self._output_since(output_from))
        if unsettled:
            findings.violations.append(f"{unsettled} idempotent records not acknowledged after the restart")
        if self.check_log_every and cut % self.check_log_every == 0:
            self.broker.stop()
            findings.violations += check_log(self.log_dirs)
            self.broker.start()
        self.summary.add(findings, cut)
        with self.ledger.lock:
            self.summary.moves = self.ledger.moves
        self.summary.seconds = time.monotonic() - self._started
        self.say(f"cut {cut}/{of or cut} at {target or 'a random moment'}: "
                 f"{sum(findings.lost.values()) - findings.lost[ACKS1]} acknowledged lost, "
                 f"{findings.lost[ACKS1]} acks=1 lost, {len(findings.violations)} violations")
        for line in findings.violations:
            self.say(f"  {line}")
        for stream in self.streams:
            if stream.last_error and self.verbose:
                self.say(f"  ({stream.name} ended with {stream.last_error})")
        self._restart_streams()
        return findings

    def _keep_survivors(self) -> None:
        """A copy of what survived the last cut, before the broker recovers it: the evidence a violation
        needs (`pybroker dump-log` reads it)."""
        shutil.rmtree(self.survivors, ignore_errors=True)
        shutil.copytree(self.lazy.backing, self.survivors, symlinks=True)

    def _plan(self, cuts: int) -> list[str | None]:
        names = list(TARGETS)
        self.random.shuffle(names)
        plan: list[str | None] = []
        targets = iter(names * (cuts // len(names) + 1))
        for i in range(cuts):
            plan.append(None if i % 3 == 2 else next(targets))
        return plan

    def _cut(self, target: str | None) -> None:
        """Let the workload run until the target's moment (or a random one), then cut the power."""
        if target is not None:
            trigger = TARGETS[target]
            self.lazy.arm(Trigger(trigger.kind, trigger.pattern, self.random.randint(1, NTH_MAX)))
            deadline = time.monotonic() + TRIGGER_WINDOW_S
            while self.lazy.fired() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.lazy.fired() is not None:
                self.summary.targeted[target] += 1
            else:
                self.summary.missed[target] += 1
                self.summary.random_cuts += 1
        else:
            time.sleep(self.random.uniform(*RANDOM_S))
            self.summary.random_cuts += 1
        self._power_cut()

    def _power_cut(self) -> None:
        """SIGKILL the broker (a frozen file system first releases the thread it holds), drop what was not
        durable, and mount again unarmed."""
        if self.broker.proc is not None and self.broker.proc.poll() is None:
            self.broker.proc.kill()
        self.lazy.kill_frozen()
        self.broker.kill9()
        self._stop_streams()
        self.lazy.cut()
        self.lazy.mount()

    # -- the workload ----------------------------------------------------------------------------------
    def _start_streams(self) -> None:
        seed = self.random.randrange(1 << 30)
        bootstrap = self.broker.bootstrap
        self.idempotent = IdempotentStream(bootstrap, self.ledger, seed)
        self.streams = [self.idempotent] + [cls(bootstrap, self.ledger, seed + i) for i, cls in
                                            enumerate((Acks1Stream, Transactions, Committer, Churn, Mover), 1)]
        for stream in self.streams:
            stream.start()

    def _restart_streams(self) -> None:
        for stream in self.streams:
            stream.start()

    def _stop_streams(self) -> None:
        stop_all(self.streams, STOP_S)

    def _output_since(self, offset: int) -> str:
        with open(self.broker.log_path, "rb") as out:
            out.seek(offset)
            return out.read().decode(errors="replace")

    def close(self) -> None:
        self._stop_streams()
        if self.idempotent is not None:
            self.idempotent.close()
        if self.broker.proc is not None and self.broker.proc.poll() is None:
            self.broker.proc.kill()
        self.lazy.kill_frozen()
        self.broker.close()
        self.lazy.unmount()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.powerloss.campaign", description=__doc__.split("\n")[0])
    parser.add_argument("--cuts", type=int, default=100)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--workdir", type=Path, required=True, help="an empty dir for the mount and the broker")
    parser.add_argument("--stop-on-violation", action="store_true", help="keep the evidence of the first one")
    parser.add_argument("--verbose", action="store_true", help="say how each workload thread's run ended")
    parser.add_argument("--check-log-every", type=int, default=1, help="stop cleanly and check-log every Nth cut")
    args = parser.parse_args(argv)
    # SIGTERM (a stopped `make soak`) unwinds like Ctrl-C, so the broker is killed and the mount let go
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"power-loss campaign: {args.cuts} cuts, seed {seed}, in {args.workdir}", flush=True)
    campaign = Campaign(args.workdir, seed, check_log_every=args.check_log_every,
                        say=lambda line: print(line, flush=True), verbose=args.verbose,
                        stop_on_violation=args.stop_on_violation)
    summary = campaign.run(args.cuts)
    print(summary.table(), flush=True)
    failures = summary.failures(all_targets=args.cuts >= 2 * len(TARGETS), acks1_must_lose=True)
    for line in failures:
        print(f"FAIL: {line}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
