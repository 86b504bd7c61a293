"""Who may use the console, and the guards on its changes.

Authentication: when the broker authenticates its clients (a SASL listener) or authorizes them
(`authorizer.class.name` set), the console asks for HTTP Basic credentials and checks them against the
same users a Kafka client logs in as: the PLAIN users of the SASL listeners' JAAS configs, then the SCRAM
credentials (`pybroker users`, AlterUserScramCredentials), whose password is checked by deriving the
StoredKey as a SCRAM exchange would. Comparisons are constant-time (`hmac.compare_digest`), an unknown user
costs what a wrong password costs, and a successful check is remembered for `CACHE_S` under a hash of the
credentials (so the charts' polling does not run PBKDF2 every two seconds). At most `VERIFYING_AT_ONCE`
checks run at once, and a refusal waits `connection.failed.authentication.delay.ms` first, as a SASL
listener's does, so guessing through the console is no cheaper than through a listener. The console then acts as
`User:<name>`: every read and change goes through the ACL table as that principal. Without authentication
on the broker, the console acts as `User:ANONYMOUS`, as a PLAINTEXT client would.

CSRF: a change is a POST whose `X-Console-Token` header carries the token the page got from
`/console/api/session` (a random per-process value, unreadable from another origin), whose `Origin` (when
the browser sends one) is the console's own, and whose body is `application/json` (which a cross-site form
cannot send without a CORS preflight, which we never grant).

DNS rebinding: a console bound to a loopback address answers only requests whose `Host` is a loopback name,
so a hostile page that re-points its own name at 127.0.0.1 still cannot read or change anything.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import ipaddress
import secrets
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pybroker.broker.console.params import ConsoleError
from pybroker.protocol.scram_mechanisms import MECHANISMS as SCRAM_MECHANISMS

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState

ANONYMOUS = "User:ANONYMOUS"
REALM = 'Basic realm="pybroker console", charset="UTF-8"'
MAX_AUTH_HEADER = 4096
CACHE_S = 60.0
CACHE_ENTRIES = 64
_DUMMY = b"\x00" * 32
TOKEN_HEADER = "x-console-token"
#: password checks (a PBKDF2 each for SCRAM users) run at once, off the event loop
VERIFYING_AT_ONCE = 2


def authentication_required(state: BrokerState) -> bool:
    return bool(state.sasl_listeners) or state.authorizer is not None


def is_loopback_host(host: str) -> bool:
    name = host.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The host part of a `Host` header (`[::1]:80` -> `::1`)."""
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


class Unauthorized(ConsoleError):
    def __init__(self, message: str) -> None:
        super().__init__(401, message)


class ConsoleAuth:
    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self.csrf_token = secrets.token_urlsafe(32)
        self._cache: dict[bytes, tuple[str, float]] = {}
        self._verifying = asyncio.Semaphore(VERIFYING_AT_ONCE)
        self.failure_delay_s = int(state.config.get("connection.failed.authentication.delay.ms")) / 1000

    @property
    def required(self) -> bool:
        return authentication_required(self.state)

    async def principal(self, headers: Mapping[str, str]) -> str:
        """The principal a request acts as; `Unauthorized` when credentials are needed and wrong."""
        if not self.required:
            return ANONYMOUS
        header = headers.get("authorization", "")
        scheme, _, encoded = header.partition(" ")
        if not header or scheme.lower() != "basic" or len(header) > MAX_AUTH_HEADER:
            raise Unauthorized("log in with a broker user (SASL PLAIN or SCRAM)")
        try:
            user, sep, password = base64.b64decode(encoded.strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, ValueError):
            raise Unauthorized("the Authorization header is not valid Basic credentials") from None
        if not sep or not user:
            raise Unauthorized("the Authorization header is not valid Basic credentials")
        digest = hashlib.sha256(b"%s\x00%s" % (user.encode(), password.encode())).digest()
        cached = self._cache.get(digest)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        async with self._verifying:  # key derivations cost CPU: a flood of guesses waits its turn
            ok = await asyncio.to_thread(self.verify, user, password)
        if not ok:
            await asyncio.sleep(self.failure_delay_s)  # as a SASL listener delays its refusal
            raise Unauthorized("wrong user name or password")
        if len(self._cache) >= CACHE_ENTRIES:
            self._cache.clear()
        principal = f"User:{user}"
        self._cache[digest] = (principal, time.monotonic() + CACHE_S)
        return principal

    def verify(self, user: str, password: str) -> bool:
        """Whether `password` is `user`'s, as a PLAIN user or a SCRAM credential (constant time per check)."""
        given = password.encode()
        matched = False
        for sasl in self.state.sasl_listeners.values():
            if "PLAIN" not in sasl.mechanisms:
                continue
            expected = sasl.plain_users.get(user)
            same = hmac.compare_digest(expected.encode() if expected is not None else _DUMMY, given)
            matched |= expected is not None and same
        if matched:
            return True
        for mechanism in SCRAM_MECHANISMS.values():
            credential = self.state.scram.get(user, mechanism.name)
            if credential is None:
                continue
            salted = mechanism.salted_password(password, credential.salt, credential.iterations)
            stored = mechanism.hash(mechanism.hmac(salted, b"Client Key"))
            if hmac.compare_digest(stored, credential.stored_key):
                return True
        if not matched:  # an unknown user pays one derivation too, like a known one with a wrong password
            hashlib.pbkdf2_hmac("sha256", given, b"pybroker-console", 4096)
        return False

    def check_change(self, headers: Mapping[str, str]) -> None:
        """The CSRF guard of every POST (see the module docstring)."""
        token = headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(token.encode(), self.csrf_token.encode()):
            raise ConsoleError(403, "missing or wrong X-Console-Token (reload the page)")
        origin = headers.get("origin")
        host = headers.get("host", "")
        if origin is not None and origin not in (f"http://{host}", f"https://{host}"):
            raise ConsoleError(403, "cross-origin request refused")
        if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            raise ConsoleError(403, "cross-site request refused")
        if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            raise ConsoleError(415, "changes must be sent as application/json")
