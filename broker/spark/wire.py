"""One blocking connection to one broker, speaking Kafka's protocol with pybroker's own codecs.

Why our own client here: the exactly-once sink needs KIP-939's InitProducerId v6 (`enable_2pc`,
`keep_prepared_txn`) and full control of transactional batches, which no Python Kafka client offers. A
Spark task is synchronous anyway (it iterates rows and returns), so one request at a time on a plain
socket is all it needs: no background threads, nothing to leak when Spark kills a task.

The codecs are `pybroker.protocol`'s (sans-I/O); this module adds the socket, correlation ids, the
ApiVersions handshake (the versions each side speaks) and two guards a client owes itself: a timeout on
every call, and a cap on the size a response may claim before anything is allocated for it.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from dataclasses import dataclass
from typing import Any

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.frame_codec import decode_response, encode_request
from pybroker.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

CLIENT_ID = "pybroker-spark-sink"
#: no answer the sink asks for comes near this; a larger size prefix is a broken or hostile peer
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
_SIZE = struct.Struct(">i")
_API_VERSIONS_VERSION = 3


class WireError(Exception):
    """The connection failed (refused, reset, timed out, or the peer sent something undecodable)."""


class BrokerError(Exception):
    """The broker answered with an error code."""

    def __init__(self, code: int, what: str, detail: str | None = None) -> None:
        self.code = code
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else f"error {code}"
        super().__init__(f"{what}: {name}" + (f" ({detail})" if detail else ""))


class Unsupported(Exception):
    """The broker does not speak a version of an API the sink needs."""


@dataclass(frozen=True, slots=True)
class Sent:
    """A request on its way: what `Connection.receive` needs to read and check its answer."""

    message_cls: Any
    version: int
    correlation: int


class Connection:
    """A socket to `host:port` and the API versions both sides speak; `request` is one round trip."""

    def __init__(self, host: str, port: int, *, timeout_s: float, client_id: str = CLIENT_ID) -> None:
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._correlation = 0
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise WireError(f"cannot connect to {self.address}: {exc}") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self.versions = self._handshake()
        except BaseException:
            self.close()
            raise

    def _handshake(self) -> dict[int, tuple[int, int]]:
        answer = self.request(ApiVersionsRequest(client_software_name="pybroker-spark",
                                                 client_software_version="1"), _API_VERSIONS_VERSION)
        assert isinstance(answer, ApiVersionsResponse)
        if answer.error_code != ErrorCode.NONE:
            raise BrokerError(answer.error_code, f"ApiVersions from {self.address}")
        return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}

    def version(self, message_cls: Any, *, minimum: int = 0, cap: int | None = None) -> int:
        """The highest version of `message_cls`'s API both sides speak, at most `cap` and at least `minimum`."""
        ours_max = message_cls.MAX_VERSION if cap is None else min(cap, message_cls.MAX_VERSION)
        theirs = self.versions.get(message_cls.API_KEY)
        name = message_cls.__name__.removesuffix("Request")
        if theirs is None:
            raise Unsupported(f"the broker at {self.address} does not serve {name}")
        best = min(ours_max, theirs[1])
        if best < max(minimum, theirs[0], message_cls.MIN_VERSION):
            raise Unsupported(f"the broker at {self.address} serves {name} v{theirs[0]}-{theirs[1]}; "
                              f"the sink needs v{minimum} or later")
        return best

    def supports(self, message_cls: Any, version: int) -> bool:
        theirs = self.versions.get(message_cls.API_KEY)
        return theirs is not None and theirs[0] <= version <= theirs[1]

    def request(self, message: Any, version: int) -> Any:
        """Send `message` as `version`, wait for its answer (at most `timeout_s`), and return it decoded."""
        return self.receive(self.send(message, version))

    def send(self, message: Any, version: int) -> Sent:
        """Send `message` as `version` without waiting: `receive` the answer later (the reader asks for its
        next Fetch before handing the last one's rows to Spark, so the broker works while Spark does)."""
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        frame = encode_request(message, version, self._correlation, self.client_id)
        try:
            self._sock.sendall(frame)
        except OSError as exc:
            self.close()
            raise WireError(f"{type(message).__name__} to {self.address} failed: {exc or type(exc).__name__}") \
                from None
        return Sent(type(message), version, self._correlation)

    def receive(self, sent: Sent) -> Any:
        """The answer to `sent` (the last request sent on this connection), decoded."""
        message = sent.message_cls
        api_key, version = message.API_KEY, sent.version
        try:
            size = _SIZE.unpack(self._read(4))[0]
            if not 4 <= size <= MAX_RESPONSE_BYTES:
                raise WireError(f"{self.address} sent a response size of {size} bytes")
            body = self._read(size)
        except (OSError, struct.error) as exc:
            self.close()
            raise WireError(f"{message.__name__} to {self.address} failed: {exc or type(exc).__name__}") \
                from None
        correlation = _SIZE.unpack_from(body)[0]  # every response header starts with it
        if correlation != sent.correlation:
            self.close()
            raise WireError(f"{self.address} answered correlation id {correlation}, not {sent.correlation}")
        try:
            _, answer = decode_response(body, api_key, version)
        except Exception as exc:  # a peer that is not a Kafka broker, or a codec disagreement
            self.close()
            raise WireError(f"undecodable {message.__name__} answer from {self.address}: {exc}") from None
        return answer

    def _read(self, n: int) -> bytearray:
        """Exactly `n` bytes, received in place (a Fetch answer of megabytes is neither joined nor copied)."""
        out = bytearray(n)
        with memoryview(out) as view:
            got = 0
            while got < n:
                chunk = self._sock.recv_into(view[got:], n - got)
                if not chunk:
                    raise WireError(f"{self.address} closed the connection")
                got += chunk
        return out

    @property
    def closed(self) -> bool:
        return self._sock.fileno() < 0

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
