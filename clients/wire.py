"""The one blocking Kafka client that pybroker's own tools use: the admin commands and the Spark connector.

Why our own client: the admin commands must run with nothing but this package installed, and the Spark
sink needs KIP-939's InitProducerId v6 (`enable_2pc`, `keep_prepared_txn`) and full control of
transactional batches, which no Python Kafka client offers. Both are synchronous (a command runs one step
after another; a Spark task iterates rows and returns), so one request at a time on a plain socket is all
they need: no background threads, nothing to leak when Spark kills a task.

- `Connection`: one socket to one broker. TLS and SASL (PLAIN, SCRAM) when a `ClientSecurity` asks for
  them, the ApiVersions handshake (the versions each side speaks), correlation ids, a timeout on every
  call, and a cap on the size an answer may claim before anything is allocated for it. Answers are
  received in place (a Fetch answer of megabytes is neither joined nor copied).
- `WireClient`: what the admin commands hold: a `--bootstrap-server` list tried in order, every failure
  said as one sentence an operator can act on (no traceback reaches the terminal).

The codecs are `pybroker.protocol`'s (sans-I/O). Not thread-safe: one thread uses a connection at a time.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from pybroker.clients.client_config import ClientSecurity
from pybroker.clients.sasl import ClientAuthError, client_mechanism
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.frame_codec import decode_response, encode_request
from pybroker.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from pybroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from pybroker.protocol.messages.sasl_handshake import SaslHandshakeRequest

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CLIENT_ID = "pybroker-admin"
#: how the admin commands name themselves in ApiVersions (the Spark connector names itself)
SOFTWARE = ("pybroker-admin", "1")
#: the largest answer an admin command accepts (a Fetch of the console consumer, a big Metadata)
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
_SIZE = struct.Struct(">i")


class WireError(Exception):
    """Anything that stops a client talking to the broker, said plainly (refused, reset, timed out, or the
    peer sent something undecodable).

    `kafka_error` is the broker's error name (UNKNOWN_TOPIC_OR_PARTITION, ...) when the broker refused."""

    def __init__(self, message: str, kafka_error: str | None = None) -> None:
        super().__init__(message)
        self.kafka_error = kafka_error


class Unreachable(WireError):
    """Nothing accepted the connection; `reason` is the system's word for why."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class ConnectionLost(WireError):
    """The connection broke mid-call: `reason` is the system's word, or "closed" when the peer closed it."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class WireTimeout(WireError):
    """The broker did not answer within the connection's timeout."""

    def __init__(self, message: str, seconds: float | None) -> None:
        super().__init__(message)
        self.seconds = seconds


class Undecodable(WireError):
    """The peer's answer does not decode (a peer that is not a Kafka broker, or a codec disagreement)."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


class BrokerError(Exception):
    """The broker answered with an error code."""

    def __init__(self, code: int, what: str, detail: str | None = None) -> None:
        self.code = code
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else f"error {code}"
        super().__init__(f"{what}: {name}" + (f" ({detail})" if detail else ""))


class Unsupported(Exception):
    """The broker does not speak a version of an API the caller needs."""


#: the first four bytes of an HTTP answer, read as a Kafka size prefix they would claim 1213486160 bytes
HTTP_PREFIX = b"HTTP"

@dataclass(frozen=True, slots=True)
class Sent:
    """A request on its way: what `Connection.receive` needs to read and check its answer."""

    message_cls: Any
    version: int
    correlation: int


def parse_bootstrap(text: str) -> tuple[str, int]:
    host, colon, port = text.strip().rpartition(":")
    if not colon or not port.isdigit() or not host or int(port) > 65535:
        raise WireError(f"--bootstrap-server expects HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def parse_bootstrap_list(text: str) -> list[tuple[str, int]]:
    """`host:port,host:port`: every address, in order (a client tries each until one answers)."""
    items = [item for item in text.split(",") if item.strip()]
    if not items:
        raise WireError(f"--bootstrap-server expects HOST:PORT, got {text!r}")
    return [parse_bootstrap(item) for item in items]


class Connection:
    """A socket to `host:port` and the API versions both sides speak; `request` is one round trip.

    `software` names the client in the ApiVersions v3 handshake (`client_software_name`, `_version`),
    which a broker shows in its client metrics."""

    def __init__(self, host: str, port: int, *, timeout_s: float, client_id: str = CLIENT_ID,
                 security: ClientSecurity | None = None, software: tuple[str, str] = SOFTWARE,
                 max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes
        self._correlation = 0
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise Unreachable(f"cannot connect to {self.address}: {exc}", str(exc.strerror or exc)) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        security = security or ClientSecurity()
        if security.tls:
            try:
                self._sock = security.ssl_context().wrap_socket(sock, server_hostname=host)
            except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                sock.close()
                raise WireError(f"TLS with the broker at {self.address} failed: {exc}") from None
        try:
            self.versions = self._handshake(software)
            if security.sasl:
                self._authenticate(security)
        except BaseException:
            self.close()
            raise

    def _handshake(self, software: tuple[str, str]) -> dict[int, tuple[int, int]]:
        answer = self.request(ApiVersionsRequest(client_software_name=software[0],
                                                 client_software_version=software[1]), 3)
        assert isinstance(answer, ApiVersionsResponse)
        if answer.error_code != ErrorCode.NONE:
            raise BrokerError(answer.error_code, f"ApiVersions from {self.address}")
        return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}

    def _authenticate(self, security: ClientSecurity) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the mechanism has nothing more to send."""
        assert security.username is not None and security.password is not None
        try:
            mechanism = client_mechanism(security.mechanism, security.username, security.password)
        except ValueError as exc:
            raise WireError(str(exc)) from None
        handshake = self.request(SaslHandshakeRequest(mechanism=security.mechanism), 1)
        if handshake.error_code:
            raise WireError(f"the broker at {self.address} does not offer SASL mechanism {security.mechanism} "
                            f"(it offers: {', '.join(handshake.mechanisms) or 'none'})")
        token: bytes | None = mechanism.first()
        try:
            while token is not None:
                answer = self.request(SaslAuthenticateRequest(auth_bytes=token), 1)
                if answer.error_code:
                    raise WireError(f"authentication failed at {self.address}: {answer.error_message}")
                token = mechanism.step(bytes(answer.auth_bytes))
        except ClientAuthError as exc:
            raise WireError(f"authentication failed at {self.address}: {exc}") from None

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
        return int(best)

    def supports(self, message_cls: Any, version: int) -> bool:
        theirs = self.versions.get(message_cls.API_KEY)
        return theirs is not None and theirs[0] <= version <= theirs[1]

    def request(self, message: Any, version: int) -> Any:
        """Send `message` as `version`, wait for its answer (at most `timeout_s`), and return it decoded."""
        return self.receive(self.send(message, version))

    def send(self, message: Any, version: int) -> Sent:
        """Send `message` as `version` without waiting: `receive` the answer later (the Spark reader asks for
        its next Fetch before handing the last one's rows to Spark, so the broker works while Spark does); a
        request the broker does not answer (Produce with acks=0) is only sent."""
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        frame = encode_request(message, version, self._correlation, self.client_id)
        try:
            self._sock.sendall(frame)
        except OSError as exc:
            self.close()
            raise ConnectionLost(f"{type(message).__name__} to {self.address} failed: "
                                 f"{exc or type(exc).__name__}", str(exc.strerror or exc)) from None
        return Sent(type(message), version, self._correlation)

    def receive(self, sent: Sent) -> Any:
        """The answer to `sent` (the last request sent on this connection), decoded."""
        message = sent.message_cls
        try:
            prefix = self._read(4)
            if prefix == HTTP_PREFIX:  # "HTTP/1.1 400 ...": a web server (a metrics or console port?)
                self.close()
                raise WireError(f"{self.address} is an HTTP server, not a Kafka broker (a metrics or console port? "
                                "the broker's listener is another port)")
            size = _SIZE.unpack(prefix)[0]
            if not 4 <= size <= self.max_response_bytes:
                self.close()
                raise WireError(f"the broker at {self.address} sent a response size of {size} bytes")
            body = self._read(size)
        except TimeoutError as exc:
            seconds = self._sock.gettimeout()
            self.close()
            raise WireTimeout(f"{message.__name__} to {self.address} failed: {exc or 'timed out'}", seconds) \
                from None
        except OSError as exc:
            self.close()
            raise ConnectionLost(f"{message.__name__} to {self.address} failed: {exc or type(exc).__name__}",
                                 str(exc.strerror or exc)) from None
        except ConnectionLost:
            self.close()
            raise
        correlation = _SIZE.unpack_from(body)[0]  # every response header starts with it
        if correlation != sent.correlation:
            self.close()
            raise WireError(f"{self.address} answered correlation id {correlation}, not {sent.correlation}")
        try:
            _, answer = decode_response(body, message.API_KEY, sent.version)
        except Exception as exc:  # a peer that is not a Kafka broker, or a codec disagreement
            self.close()
            raise Undecodable(f"undecodable {message.__name__} answer from {self.address}: {exc}", str(exc)) \
                from None
        return answer

    def _read(self, n: int) -> bytearray:
        """Exactly `n` bytes, received in place."""
        out = bytearray(n)
        with memoryview(out) as view:
            got = 0
            while got < n:
                chunk = self._sock.recv_into(view[got:], n - got)
                if not chunk:
                    raise ConnectionLost(f"{self.address} closed the connection", "closed")
                got += chunk
        return out

    def settimeout(self, seconds: float) -> None:
        self._sock.settimeout(seconds)

    @property
    def closed(self) -> bool:
        return self._sock.fileno() < 0

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()


class WireClient:
    """The admin commands' client: the first `--bootstrap-server` address that answers (a single node
    answers everything), each request at the best version both sides serve, every failure a `WireError`
    worded for the command line."""

    def __init__(self, bootstrap: str = DEFAULT_BOOTSTRAP, timeout: float = 10.0,
                 security: ClientSecurity | None = None) -> None:
        self.bootstrap = bootstrap
        self.security = security or ClientSecurity()
        self.addresses = parse_bootstrap_list(bootstrap)
        self.address = self.addresses[0]
        if not timeout > 0:
            raise WireError(f"the timeout must be a positive number of seconds, got {timeout}")
        self.timeout = timeout
        self.connection: Connection | None = None
        self.versions: dict[int, tuple[int, int]] = {}
        #: the client id of every request (what groups describe shows of a member; quotas match on it)
        self.client_id = CLIENT_ID

    def __enter__(self) -> WireClient:
        self.connect()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def connect(self) -> None:
        """Connect to the first bootstrap address that accepts."""
        failures = []
        for host, port in self.addresses:
            try:
                with self._worded():
                    connection = Connection(host, port, timeout_s=self.timeout, client_id=self.client_id,
                                            security=self.security)
            except Unreachable as exc:
                failures.append(f"{host}:{port}: {exc.reason}")
                continue
            except BrokerError as exc:
                raise WireError(f"the broker at {host}:{port} refused ApiVersions (error {exc.code})") from None
            self.address = (host, port)
            self.bootstrap = f"{host}:{port}"
            self.connection = connection
            self.versions = connection.versions
            return
        if len(failures) == 1:
            raise WireError(f"cannot reach the broker at {failures[0]}")
        raise WireError("cannot reach any broker of " + "; ".join(failures))

    @contextlib.contextmanager
    def waiting(self, seconds: float) -> Iterator[None]:
        """Allow one slow answer (a group join waits for the rebalance) without changing `--timeout`."""
        assert self.connection is not None, "not connected"
        self.connection.settimeout(max(seconds, self.timeout))
        try:
            yield
        finally:
            if self.connection is not None and not self.connection.closed:
                self.connection.settimeout(self.timeout)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def serves(self, api_key: int) -> bool:
        return api_key in self.versions

    def _version(self, request: Any, max_version: int | None) -> int:
        cls = type(request)
        served = self.versions.get(cls.API_KEY)
        if served is None:
            raise WireError(f"the broker at {self.bootstrap} does not serve {ApiKey(cls.API_KEY).name}")
        version = min(served[1], cls.MAX_VERSION, max_version if max_version is not None else cls.MAX_VERSION)
        if version < max(served[0], cls.MIN_VERSION):
            raise WireError(f"no common version of {ApiKey(cls.API_KEY).name} with the broker")
        return int(version)

    def call(self, request: Any, max_version: int | None = None) -> Any:
        """Send `request` at the best common version (at most `max_version`) and return the response."""
        connection = self._connected()
        version = self._version(request, max_version)
        with self._worded():
            return connection.request(request, version)

    def send_only(self, request: Any, max_version: int | None = None) -> None:
        """Send a request the broker does not answer (a Produce with acks=0)."""
        connection = self._connected()
        version = self._version(request, max_version)
        with self._worded():
            connection.send(request, version)

    def _connected(self) -> Connection:
        assert self.connection is not None, "not connected"
        connection = self.connection
        connection.client_id = self.client_id
        return connection

    @contextlib.contextmanager
    def _worded(self) -> Iterator[None]:
        """The connection's failures, said for the command line (which flag to change, what to suspect)."""
        try:
            yield
        except WireTimeout as exc:
            raise WireError(f"the broker at {self.bootstrap} did not answer within {exc.seconds}s "
                            "(see --timeout)") from None
        except Undecodable as exc:
            raise WireError(f"the broker at {self.bootstrap} sent an answer that does not decode: {exc.detail} "
                            "(is this a Kafka listener?)") from None
        except ConnectionLost as exc:
            if exc.reason == "closed":
                raise WireError(f"the broker at {self.bootstrap} closed the connection") from None
            raise WireError(f"lost the connection to {self.bootstrap}: {exc.reason}") from None
