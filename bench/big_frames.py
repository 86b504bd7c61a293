"""Broker memory under the big-frame attack: clients that start huge requests and never finish them.

Each attacker connection sends the size prefix of a 100 MB request (just under the default
`socket.request.max.bytes`) and then 95 MB of its body, and stops. A broker that buffers whatever it is
sent holds 8 x 95 MB (more with the copies of a growing buffer); one that caps the request bytes held
in memory (`queued.max.request.bytes`) pauses the attackers that do not fit and stays near its idle size.
Reported: the broker's RSS idle, at the peak of the attack, and after the attackers are gone; plus
whether a bystander's ApiVersions was answered throughout.

    .venv/bin/python bench/big_frames.py [--attackers N] [--frame-mb N] [--sent-mb N]
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.integration.brokers import BrokerProcess, kill_all  # noqa: E402
from tests.integration.hostile import Canary, rss_bytes  # noqa: E402

MB = 1_000_000
CHUNK = 1 << 20
SEND_TIMEOUT_S = 60.0


@dataclass
class AttackFigures:
    idle_rss: int
    peak_rss: int
    after_rss: int
    sent_bytes: int
    seconds: float
    canary: str

    def lines(self, attackers: int, frame_mb: int, sent_mb: int) -> list[str]:
        return [
            f"  attack: {attackers} connections x {sent_mb} MB of a {frame_mb} MB frame "
            f"({self.sent_bytes / MB:,.0f} MB accepted by the kernel in {self.seconds:.1f} s)",
            f"  broker RSS idle {self.idle_rss / MB:,.0f} MB, peak during the attack {self.peak_rss / MB:,.0f} MB, "
            f"after it {self.after_rss / MB:,.0f} MB",
            f"  bystander ApiVersions during the attack: {self.canary}",
        ]


def _attack(host: str, port: int, frame: int, sent: int, totals: list[int], index: int) -> None:
    """Send the prefix and `sent` bytes of the body; stop early when the broker stops reading."""
    chunk = b"\x00" * CHUNK
    with socket.create_connection((host, port), timeout=SEND_TIMEOUT_S) as sock:
        sock.settimeout(2.0)  # a paused connection stops taking bytes: give up after 2 s without progress
        try:
            sock.sendall(struct.pack(">i", frame))
            while totals[index] < sent:
                n = sock.send(chunk[: min(CHUNK, sent - totals[index])])
                totals[index] += n
        except OSError:
            pass  # timed out (the broker paused us) or closed by the broker
        _hold.wait()  # keep the connection (and whatever the broker buffered for it) until measured


_hold = threading.Event()


def measure(workdir: Path, attackers: int = 8, frame_mb: int = 100, sent_mb: int = 95,
            overrides: dict[str, str] | None = None) -> AttackFigures:
    broker = BrokerProcess(workdir, overrides)
    broker.start()
    try:
        pid = broker.pid
        assert pid is not None
        time.sleep(0.5)
        idle = rss_bytes(pid)
        totals = [0] * attackers
        _hold.clear()
        threads = [threading.Thread(target=_attack, args=(broker.host, broker.port, frame_mb * MB, sent_mb * MB,
                                                          totals, i), daemon=True) for i in range(attackers)]
        peak = idle
        started = time.monotonic()
        with Canary(broker.host, broker.port) as canary:
            for thread in threads:
                thread.start()
            # attackers stop when everything is sent or the broker stops reading them
            while time.monotonic() - started < SEND_TIMEOUT_S:
                peak = max(peak, rss_bytes(pid))
                if sum(totals) >= attackers * sent_mb * MB:
                    break
                before = sum(totals)
                time.sleep(0.5)
                if sum(totals) == before and time.monotonic() - started > 3:
                    break
            for _ in range(10):  # let the broker copy in what the kernel still holds
                peak = max(peak, rss_bytes(pid))
                time.sleep(0.2)
            seconds = time.monotonic() - started
        _hold.set()
        for thread in threads:
            thread.join(10)
        time.sleep(1.0)
        after = rss_bytes(pid)
        return AttackFigures(idle, peak, after, sum(totals), seconds, canary.summary())
    finally:
        _hold.set()
        broker.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--attackers", type=int, default=8)
    parser.add_argument("--frame-mb", type=int, default=100)
    parser.add_argument("--sent-mb", type=int, default=95)
    args = parser.parse_args(argv)
    print("== big-frame attack (default broker settings) ==", flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix="pybroker-bench-frames-") as tmp:
            figures = measure(Path(tmp), args.attackers, args.frame_mb, args.sent_mb)
    finally:
        kill_all()
    print("\n".join(figures.lines(args.attackers, args.frame_mb, args.sent_mb)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
