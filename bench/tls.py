"""What TLS costs: the same librdkafka produce and consume load on a PLAINTEXT and an SSL listener of one
pybroker, side by side.

Why it matters here: over PLAINTEXT a fetch puts segment bytes on the socket with `os.sendfile`; over
TLS every byte is read into Python, encrypted and written, so consume pays the most. Certificates are
made with the `openssl` command for the run (EC P-256, TLS 1.3 with AES-GCM as negotiated by default).
"""

from __future__ import annotations

import tempfile
import uuid
from dataclasses import dataclass
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
    error: str = ""


def run(records: int, partitions: int = 1) -> TlsResult:
    result = TlsResult({})
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
                    result.figures[(listener, "produce", size)] = produce(
                        bootstrap, topic, partitions, records, size, extra=extra)
                    result.figures[(listener, "consume", size)] = consume(
                        bootstrap, topic, partitions, records + 100, size, extra=extra)
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
          f"{'client ceiling':>16}")
    for phase in ("produce", "consume"):
        for size in SIZES:
            plain = result.figures.get(("PLAINTEXT", phase, size))
            tls = result.figures.get(("SSL", phase, size))
            if plain is None or tls is None:
                continue
            ratio = tls.msgs_per_s / plain.msgs_per_s if plain.msgs_per_s else float("nan")
            ceiling = f"{ceilings[size]:,.0f}" if phase == "produce" and size in ceilings else "-"
            notes = "; ".join(n for n in (plain.note, tls.note) if n)
            print(f"  {phase + f' {size} B':<22}{plain.msgs_per_s:>18,.0f}{tls.msgs_per_s:>14,.0f}"
                  f"{tls.mb_per_s:>10.2f}{ratio:>10.2f}x{ceiling:>16}  {notes}")
