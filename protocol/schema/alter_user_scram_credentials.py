"""AlterUserScramCredentials (key 51), version 0; flexible. Mechanism 1 is SCRAM-SHA-256, 2 SCRAM-SHA-512.

The client salts and hashes the password itself: an upsertion carries the salt, the iteration count and
the salted password (Hi(password, salt, i)), never the password.
"""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("AlterUserScramCredentialsRequest", 51, "request", "0", "0+", [
    F("deletions", "[]ScramCredentialDeletion", fields=[
        F("name", "string"),
        F("mechanism", "int8"),
    ]),
    F("upsertions", "[]ScramCredentialUpsertion", fields=[
        F("name", "string"),
        F("mechanism", "int8"),
        F("iterations", "int32"),
        F("salt", "bytes"),
        F("salted_password", "bytes"),
    ]),
])

RESPONSE = M("AlterUserScramCredentialsResponse", 51, "response", "0", "0+", [
    F("throttle_time_ms", "int32"),
    F("results", "[]AlterUserScramCredentialsResult", fields=[
        F("user", "string"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
    ]),
])
