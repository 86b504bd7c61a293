"""The kernel buffers of accepted sockets: Kafka's `socket.{send,receive}.buffer.bytes`.

Why a module: a size is resolved against the kernel's cap before a socket gets it. Linux silently caps
an explicit size at `net.core.wmem_max` / `rmem_max` (and reports twice what it kept, for its own
bookkeeping), so a size above the cap would look applied and not be. An explicit size is applied as
Kafka applies it (the kernel keeps its cap), and the start logs a warning naming the cap. A default
above the cap (the send buffer's 512 KiB on a stock kernel, whose cap is 208 KiB) is not applied at all:
the OS's own sizing, which grows a buffer with the connection's rate, did better than a capped fixed
size (the figures are in the keys' descriptions). -1 always leaves a buffer to the OS.

Who calls what: `resolved_sizes` and `apply` on the loop's thread for each accepted socket
(`KafkaConnection.connection_made`), `capped_explicit_sizes` once at start (`BrokerApp.start`). The caps
are read once per process.
"""

from __future__ import annotations

import contextlib
import functools
import socket
from dataclasses import dataclass
from pathlib import Path

from pybroker.config.broker_config import BrokerConfig

#: (socket option, config key, the file holding the kernel's cap on an explicit size)
BUFFERS = (
    (socket.SO_SNDBUF, "socket.send.buffer.bytes", "/proc/sys/net/core/wmem_max"),
    (socket.SO_RCVBUF, "socket.receive.buffer.bytes", "/proc/sys/net/core/rmem_max"),
)


@dataclass(frozen=True, slots=True)
class CappedBuffer:
    """An explicit size the kernel will not grant: each socket gets `cap` instead."""

    key: str
    asked: int
    cap: int


@functools.cache
def kernel_cap(cap_file: str) -> int | None:
    """The kernel's cap on an explicit buffer size; None where it cannot be read (not Linux)."""
    try:
        return int(Path(cap_file).read_text())
    except (OSError, ValueError):
        return None


def resolved_sizes(config: BrokerConfig) -> tuple[tuple[int, int], ...]:
    """(option, size) of each buffer a socket is given: the explicit sizes, and the defaults the
    kernel grants whole. A buffer left to the OS is not listed."""
    sizes = []
    for option, key, cap_file in BUFFERS:
        size = int(config.get(key))
        if size <= 0:
            continue
        cap = kernel_cap(cap_file)
        if cap is not None and size > cap and key not in config.explicit:
            continue  # a default the kernel would cap: the OS's own sizing instead
        sizes.append((option, size))
    return tuple(sizes)


def apply(sock: socket.socket, sizes: tuple[tuple[int, int], ...]) -> None:
    """Give an accepted socket its buffers (a refusal leaves the OS's: never fatal)."""
    for option, size in sizes:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, option, size)


def capped_explicit_sizes(config: BrokerConfig) -> list[CappedBuffer]:
    """The explicit sizes above the kernel's cap, for a warning at start."""
    capped = []
    for _, key, cap_file in BUFFERS:
        if key not in config.explicit:
            continue
        asked, cap = int(config.get(key)), kernel_cap(cap_file)
        if cap is not None and asked > cap:
            capped.append(CappedBuffer(key, asked, cap))
    return capped
