"""Kafka's SCRAM mechanisms (its ScramMechanism enum) as both sides need them: names, type ids, hashes, bounds.

The broker's server side (`pybroker.broker.security.scram`), the user-credential APIs and the clients'
SASL side (`pybroker.clients.sasl`) all take the mechanisms from this one table. Pure functions of bytes:
no I/O, callable from any thread.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

#: Kafka's bounds on a credential's iteration count (ScramMechanism)
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str
    #: the mechanism's number in AlterUserScramCredentials / DescribeUserScramCredentials
    type_id: int
    hash_name: str

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """RFC 5802's Hi(): PBKDF2 with HMAC over the mechanism's hash, one block."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)


MECHANISMS: dict[str, ScramMechanism] = {
    m.name: m for m in (ScramMechanism("SCRAM-SHA-256", 1, "sha256"), ScramMechanism("SCRAM-SHA-512", 2, "sha512"))
}
BY_TYPE: dict[int, ScramMechanism] = {m.type_id: m for m in MECHANISMS.values()}
