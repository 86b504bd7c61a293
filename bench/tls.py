"""What TLS costs: the same librdkafka produce and consume load on a PLAINTEXT and an SSL listener of one
pybroker, side by side.

Why it matters here: over PLAINTEXT a fetch puts segment bytes on the socket with `os.sendfile`; over
TLS every byte is read into Python, encrypted and written, so consume pays the most. Certificates are
made with the `openssl` command for the run (EC P-256, TLS 1.3 with AES-GCM as negotiated by default).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from bench.load import Throughput, consume, create_topic, produce
from tests.certs import make_certs, openssl_available
from tests.integration.brokers import BrokerProcess, free_port

SIZES = (100, 1024)


class TwoListenerBroker(BrokerProcess):
    """PLAINTEXT on `port` (the readiness check uses it) and SSL on `ssl_port`."""

    def __init__(self, workdir: Path, overrides: dict[str, str]) -> None:
        super().__init__(workdir, overrides)
        self.ssl_port = free_port()

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[cmd.index("--listeners") + 1] = f"PLAINTEXT://{self.host}:{self.port},SSL://{self.host}:{self.ssl_port}"
        return cmd


@dataclass
class TlsResult:
    #: (listener, phase, size) -> figures
    figures: dict[tuple[str, str, int], Throughput]
    #: (listener, phase, size) -> the broker's CPU seconds (user + system) during the phase
    broker_cpu_s: dict[tuple[str, str, int], float]
    error: str = ""


def _cpu_seconds(pid: int | None) -> float:
    """User + system CPU of a process so far (Linux /proc): a client-bound phase hides the broker's cost
    in msgs/s, but not in the CPU the broker spent on it."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def _timed(result: TlsResult, key: tuple[str, str, int], pid: int | None, phase: Callable[[], Throughput]) -> None:
    before = _cpu_seconds(pid)
    result.figures[key] = phase()
    result.broker_cpu_s[key] = _cpu_seconds(pid) - before


def run(records: int, partitions: int = 1) -> TlsResult:
    result = TlsResult({}, {})
    if not openssl_available():
        result.error = "the openssl command is missing"
        return result
    with tempfile.TemporaryDirectory(prefix="pybroker-bench-tls-") as tmp:
        certs = make_certs(Path(tmp) / "certs")
        broker = TwoListenerBroker(Path(tmp) / "broker", {
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server_keystore)})
        tls: dict[str, Any] = {"security.protocol": "ssl", "ssl.ca.location": str(certs.ca)}
        try:
            broker.start()
            tag = uuid.uuid4().hex[:6]
            for size in SIZES:
                for listener, bootstrap, extra in (
                        ("PLAINTEXT", broker.bootstrap, {}),
                        ("SSL", f"{broker.host}:{broker.ssl_port}", tls)):
                    topic = f"bench-tls-{listener.lower()}-{size}b-{tag}"
                    create_topic(bootstrap, topic, partitions, extra)
                    produce(bootstrap, topic, partitions, 100, size, extra=extra)  # warm-up
                    print(f"  [tls] {listener}: produce and consume {records} x {size} B ...", flush=True)
                    _timed(result, (listener, "produce", size), broker.pid,
                           partial(produce, bootstrap, topic, partitions, records, size, extra=extra))
                    _timed(result, (listener, "consume", size), broker.pid,
                           partial(consume, bootstrap, topic, partitions, records + 100, size, extra=extra))
            broker.stop(expect_code=0)
        except Exception as exc:
            result.error = f"{exc!r}\n{broker.log_tail(20)}"
        finally:
            broker.close()
    return result


def print_table(result: TlsResult, ceilings: dict[int, float]) -> None:
    print("\n== pybroker over TLS vs PLAINTEXT (one broker, two listeners) ==")
    if result.error:
        print(f"  stopped early: {result.error}")
    print(f"  {'phase':<22}{'PLAINTEXT msgs/s':>18}{'SSL msgs/s':>14}{'SSL MB/s':>10}{'SSL/PLAIN':>11}"
          f"{'broker CPU us/msg PLAIN/SSL':>29}{'client ceiling':>16}")
    for phase in ("produce", "consume"):
        for size in SIZES:
            plain = result.figures.get(("PLAINTEXT", phase, size))
            tls = result.figures.get(("SSL", phase, size))
            if plain is None or tls is None:
                continue
            ratio = tls.msgs_per_s / plain.msgs_per_s if plain.msgs_per_s else float("nan")
            ceiling = f"{ceilings[size]:,.0f}" if phase == "produce" and size in ceilings else "-"
            notes = "; ".join(n for n in (plain.note, tls.note) if n)
            cpu = "/".join(f"{result.broker_cpu_s.get((listener, phase, size), float('nan')) / max(t.records, 1) * 1e6:.2f}"
                           for listener, t in (("PLAINTEXT", plain), ("SSL", tls)))
            print(f"  {phase + f' {size} B':<22}{plain.msgs_per_s:>18,.0f}{tls.msgs_per_s:>14,.0f}"
                  f"{tls.mb_per_s:>10.2f}{ratio:>10.2f}x{cpu:>29}{ceiling:>16}  {notes}")
