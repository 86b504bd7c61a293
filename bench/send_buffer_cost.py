"""What a byte sent from the page cache costs the kernel, by the sender's socket buffer size.

Why: consuming is mostly the kernel's work (the broker splices a segment's pages to the socket; on
loopback the same call also runs the receiver's side of TCP), and how much of it the broker pays depends
on how much its socket holds. This measures that alone, with no broker and no Kafka client: one process
splices a file in the page cache to a TCP socket over loopback, through a 1 MiB pipe as pybroker's
`SendQueue` does, waiting in `epoll` whenever the socket is full; another reads it into one 1 MiB buffer.
The figures are each side's user and system CPU seconds per GB (`getrusage`) and the rate, for each
SO_SNDBUF asked for (-1: the OS grows it with the connection's rate), runs alternated so a slower minute
of the machine falls on every size. It is why `socket.send.buffer.bytes` is 512 KiB by default.

    .venv/bin/python -m bench.send_buffer_cost [--gigabytes G] [--repeats N] [--sizes -1,524288]

Linux caps an explicit size at `net.core.wmem_max` and reports twice what it kept; the table shows what
the socket got.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import resource
import select
import socket
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

MIB = 1 << 20
FILE_BYTES = 256 * MIB  # sent over and over: stays in the page cache
PIPE_BYTES = MIB  # as broker/splice_pipes.py
F_SETPIPE_SZ = 1031
SIZES = (-1, 212_992, 524_288, 1_048_576)


@dataclass
class SendCost:
    asked: int
    granted: int
    gb_per_s: float
    sender_user: float
    sender_system: float
    receiver_user: float
    receiver_system: float
    waits_per_gb: float

    @property
    def sender_total(self) -> float:
        return self.sender_user + self.sender_system


def _reader(port: int, total: int, report: int) -> None:
    """The receiving process: read `total` bytes, write its CPU s/GB (user, system) to `report`."""
    with socket.create_connection(("127.0.0.1", port)) as conn:
        buffer = memoryview(bytearray(MIB))
        start = resource.getrusage(resource.RUSAGE_SELF)
        got = 0
        while got < total:
            n = conn.recv_into(buffer)
            if not n:
                break
            got += n
        end = resource.getrusage(resource.RUSAGE_SELF)
    os.write(report, f"{end.ru_utime - start.ru_utime} {end.ru_stime - start.ru_stime}".encode())


def measure(path: Path, asked: int, total: int) -> SendCost:
    """Splice `total` bytes of `path` to a reader over loopback with SO_SNDBUF `asked` (-1: the OS's)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    report_r, report_w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child process
        try:
            listener.close()
            _reader(port, total, report_w)
        finally:
            os._exit(0)
    os.close(report_w)
    conn, _ = listener.accept()
    listener.close()
    if asked > 0:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, asked)
    conn.setblocking(False)
    file_fd = os.open(path, os.O_RDONLY)
    pipe_r, pipe_w = os.pipe2(os.O_NONBLOCK)
    poller = select.epoll()
    try:
        fcntl.fcntl(pipe_w, F_SETPIPE_SZ, PIPE_BYTES)
        poller.register(conn.fileno(), select.EPOLLOUT)
        start = resource.getrusage(resource.RUSAGE_SELF)
        began = time.perf_counter()
        sent = held = position = waits = 0
        while sent < total:
            try:
                if not held:
                    offset = position % FILE_BYTES
                    held = os.splice(file_fd, pipe_w, min(PIPE_BYTES, FILE_BYTES - offset), offset_src=offset)
                    position += held
                took = os.splice(pipe_r, conn.fileno(), held)
                held -= took
                sent += took
            except BlockingIOError:
                waits += 1
                poller.poll()
        seconds = time.perf_counter() - began
        end = resource.getrusage(resource.RUSAGE_SELF)
        granted = conn.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    finally:
        poller.close()
        for fd in (file_fd, pipe_r, pipe_w):
            os.close(fd)
        conn.close()
    os.waitpid(child, 0)
    with os.fdopen(report_r) as report:
        fields = report.read().split()
    receiver_user, receiver_system = (float(f) for f in fields) if len(fields) == 2 else (float("nan"),) * 2
    gb = total / 1e9
    return SendCost(asked, granted, gb / seconds, (end.ru_utime - start.ru_utime) / gb,
                    (end.ru_stime - start.ru_stime) / gb, receiver_user / gb, receiver_system / gb, waits / gb)


def write_file(path: Path, size: int = FILE_BYTES) -> None:
    """A file of `size` random bytes, read once so it is in the page cache."""
    with path.open("wb") as out:
        for _ in range(size // MIB):
            out.write(os.urandom(MIB))
    path.read_bytes()


def run(sizes: tuple[int, ...], gigabytes: float, repeats: int, directory: Path) -> dict[int, list[SendCost]]:
    path = directory / "pages"
    write_file(path)
    total = int(gigabytes * 1e9)
    results: dict[int, list[SendCost]] = {size: [] for size in sizes}
    for _ in range(repeats):
        for size in sizes:  # alternated: a slower minute of the machine falls on every size
            results[size].append(measure(path, size, total))
    return results


def report(results: dict[int, list[SendCost]]) -> list[str]:
    lines = ["SO_SNDBUF asked  granted   GB/s  sender user+sys s/GB  receiver user+sys s/GB  waits/GB  (medians)"]
    for asked, costs in results.items():
        def median(attr: str, runs: list[SendCost] = costs) -> float:
            return statistics.median(getattr(cost, attr) for cost in runs)
        lines.append(f"{asked:>15,}  {costs[0].granted:>7,}  {median('gb_per_s'):5.2f}  "
                     f"{median('sender_user'):8.3f}+{median('sender_system'):.3f}         "
                     f"{median('receiver_user'):8.3f}+{median('receiver_system'):.3f}        "
                     f"{median('waits_per_gb'):8,.0f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--gigabytes", type=float, default=2.0, help="bytes sent per run, in GB")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each size, alternated")
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES),
                        help="SO_SNDBUF sizes asked for, comma separated (-1: the OS's)")
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(","))
    with tempfile.TemporaryDirectory(prefix="pybroker-bench-send-") as tmp:
        results = run(sizes, args.gigabytes, args.repeats, Path(tmp))
    print("\n".join(report(results)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
