"""A blocking Kafka client for the admin commands, built on the protocol package's own codecs.

One TCP connection to the bootstrap broker (a single node answers everything), ApiVersions first so
each request goes at the highest version both sides serve (capped per call where our tool only reads
the older layout). An unreachable broker or a broker that does not serve an API is a `WireError`
with a sentence an operator can act on; no traceback reaches the terminal.

With `--command-config`, the connection is wrapped in TLS (SSL, SASL_SSL) and the client authenticates
after ApiVersions (SaslHandshake v1, then SaslAuthenticate) with PLAIN or SCRAM (SASL_*), as a Kafka
client does.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import struct
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from pybroker.broker.admin.client_config import ClientSecurity
from pybroker.broker.security.sasl_client import ClientAuthError, client_mechanism
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.frame_codec import decode_response, encode_request
from pybroker.protocol.messages.api_versions import ApiVersionsRequest
from pybroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from pybroker.protocol.messages.sasl_handshake import SaslHandshakeRequest
from pybroker.protocol.primitives import DecodeError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CLIENT_ID = "pybroker-admin"
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


class WireError(Exception):
    """Anything that stops an admin command talking to the broker, said plainly.

    `kafka_error` is the broker's error name (UNKNOWN_TOPIC_OR_PARTITION, ...) when the broker refused."""

    def __init__(self, message: str, kafka_error: str | None = None) -> None:
        super().__init__(message)
        self.kafka_error = kafka_error


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


class WireClient:
    def __init__(self, bootstrap: str = DEFAULT_BOOTSTRAP, timeout: float = 10.0,
                 security: ClientSecurity | None = None) -> None:
        self.bootstrap = bootstrap
        self.security = security or ClientSecurity()
        self.addresses = parse_bootstrap_list(bootstrap)
        self.address = self.addresses[0]
        if not timeout > 0:
            raise WireError(f"the timeout must be a positive number of seconds, got {timeout}")
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.versions: dict[int, tuple[int, int]] = {}
        self._ids = itertools.count(1)
        #: the client id of every request (what groups describe shows of a member; quotas match on it)
        self.client_id = CLIENT_ID

    def __enter__(self) -> WireClient:
        self.connect()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def connect(self) -> None:
        """Connect to the first bootstrap address that accepts (a single node answers everything)."""
        failures = []
        for address in self.addresses:
            try:
                sock = socket.create_connection(address, timeout=self.timeout)
            except OSError as exc:
                failures.append(f"{address[0]}:{address[1]}: {exc.strerror or exc}")
                continue
            self.address = address
            self.bootstrap = f"{address[0]}:{address[1]}"
            break
        else:
            if len(failures) == 1:
                raise WireError(f"cannot reach the broker at {failures[0]}")
            raise WireError("cannot reach any broker of " + "; ".join(failures))
        self.sock = sock
        if self.security.tls:
            try:
                self.sock = self.security.ssl_context().wrap_socket(sock, server_hostname=self.address[0])
            except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                sock.close()
                self.sock = None
                raise WireError(f"TLS with the broker at {self.bootstrap} failed: {exc}") from None
        response = self._exchange(ApiVersionsRequest(), 0)
        if response.error_code:
            raise WireError(f"the broker at {self.bootstrap} refused ApiVersions (error {response.error_code})")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        if self.security.sasl:
            self._authenticate()

    def _authenticate(self) -> None:
        security = self.security
        assert security.username is not None and security.password is not None
        try:
            mechanism = client_mechanism(security.mechanism, security.username, security.password)
        except ValueError as exc:
            raise WireError(str(exc)) from None
        handshake = self._exchange(SaslHandshakeRequest(mechanism=security.mechanism), 1)
        if handshake.error_code:
            raise WireError(f"the broker at {self.bootstrap} does not offer SASL mechanism {security.mechanism} "
                            f"(it offers: {', '.join(handshake.mechanisms) or 'none'})")
        token: bytes | None = mechanism.first()
        try:
            while token is not None:
                answer = self._exchange(SaslAuthenticateRequest(auth_bytes=token), 1)
                if answer.error_code:
                    raise WireError(f"authentication failed at {self.bootstrap}: {answer.error_message}")
                token = mechanism.step(bytes(answer.auth_bytes))
        except ClientAuthError as exc:
            raise WireError(f"authentication failed at {self.bootstrap}: {exc}") from None

    @contextlib.contextmanager
    def waiting(self, seconds: float) -> Iterator[None]:
        """Allow one slow answer (a group join waits for the rebalance) without changing `--timeout`."""
        assert self.sock is not None, "not connected"
        self.sock.settimeout(max(seconds, self.timeout))
        try:
            yield
        finally:
            if self.sock is not None:
                self.sock.settimeout(self.timeout)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

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
        return self._exchange(request, self._version(request, max_version))

    def send_only(self, request: Any, max_version: int | None = None) -> None:
        """Send a request the broker does not answer (a Produce with acks=0)."""
        assert self.sock is not None, "not connected"
        try:
            self.sock.sendall(encode_request(request, self._version(request, max_version), next(self._ids),
                                             self.client_id))
        except OSError as exc:
            raise WireError(f"lost the connection to {self.bootstrap}: {exc.strerror or exc}") from None

    def _exchange(self, request: Any, version: int) -> Any:
        assert self.sock is not None, "not connected"
        correlation_id = next(self._ids)
        try:
            self.sock.sendall(encode_request(request, version, correlation_id, self.client_id))
            (size,) = struct.unpack(">i", self._read(4))
            if not 0 < size <= MAX_RESPONSE_BYTES:
                raise WireError(f"the broker at {self.bootstrap} sent a frame of {size} bytes")
            got, response = decode_response(self._read(size), type(request).API_KEY, version)
        except DecodeError as exc:
            raise WireError(f"the broker at {self.bootstrap} sent an answer that does not decode: {exc} "
                            "(is this a Kafka listener?)") from None
        except TimeoutError:
            raise WireError(f"the broker at {self.bootstrap} did not answer within {self.sock.gettimeout()}s "
                            "(see --timeout)") from None
        except OSError as exc:
            raise WireError(f"lost the connection to {self.bootstrap}: {exc.strerror or exc}") from None
        if got != correlation_id:
            raise WireError(f"the broker answered request {got}, expected {correlation_id}")
        return response

    def _read(self, n: int) -> bytes:
        assert self.sock is not None
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise WireError(f"the broker at {self.bootstrap} closed the connection")
            data += chunk
        return bytes(data)
