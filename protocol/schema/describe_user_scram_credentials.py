"""DescribeUserScramCredentials (key 50), version 0; flexible. A null user list describes every user."""

from pybroker.protocol.schema.dsl import F, M

REQUEST = M("DescribeUserScramCredentialsRequest", 50, "request", "0", "0+", [
    F("users", "[]UserName", nullable="0+", default=None, fields=[
        F("name", "string"),
    ]),
])

RESPONSE = M("DescribeUserScramCredentialsResponse", 50, "response", "0", "0+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("results", "[]DescribeUserScramCredentialsResult", fields=[
        F("user", "string"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("credential_infos", "[]CredentialInfo", fields=[
            F("mechanism", "int8"),
            F("iterations", "int32"),
        ]),
    ]),
])
