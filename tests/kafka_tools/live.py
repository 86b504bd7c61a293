"""A console consumer kept running on each broker, so a group has a live member while a test looks at it.

`live_consumers` starts `kafka-console-consumer` in a group on both brokers, produces one record to each
so that the consumer's first read proves it joined and owns its partitions, and stops both at the end.
A reader thread per process collects its stdout lines (a pipe read must not block the test's thread).
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.kafka_tools.runner import BOOTSTRAP, Targets, run, start

JOIN_TIMEOUT = 90.0


class _Lines:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        assert proc.stdout is not None
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._thread.join(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@contextmanager
def live_consumers(targets: Targets, topic: str, group: str) -> Iterator[None]:
    readers = [_Lines(start("kafka-console-consumer", bootstrap, "--bootstrap-server", BOOTSTRAP, "--topic", topic,
                            "--group", group, "--from-beginning"))
               for bootstrap in (targets.ours, targets.kafkas)]
    try:
        deadline = time.monotonic() + JOIN_TIMEOUT
        for reader, bootstrap in zip(readers, (targets.ours, targets.kafkas), strict=True):
            while not reader.lines:
                # produce until the consumer reads: a record sent before it owns the partition is read too
                run("kafka-console-producer", bootstrap, "--bootstrap-server", BOOTSTRAP, "--topic", topic,
                    stdin="joined\n").check()
                wait_until = time.monotonic() + 10
                while not reader.lines and time.monotonic() < wait_until and reader.proc.poll() is None:
                    time.sleep(0.2)
                assert reader.proc.poll() is None, f"console consumer exited {reader.proc.returncode}"
                assert time.monotonic() < deadline, f"console consumer on {bootstrap} read nothing"
        yield
    finally:
        for reader in readers:
            reader.stop()
