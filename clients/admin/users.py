"""`pybroker users`: SCRAM credentials over the wire (DescribeUserScramCredentials, AlterUserScramCredentials).

The password never leaves this process: it is salted and hashed here (RFC 5802's Hi with a fresh random
salt) and only the salted password travels, as Kafka's kafka-configs.sh --alter --add-config
'SCRAM-SHA-512=[password=...]' sends it.
"""

from __future__ import annotations

import secrets
from typing import Any

from pybroker.clients.wire import WireClient, WireError
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from pybroker.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from pybroker.protocol.scram_mechanisms import BY_TYPE, MECHANISMS

SALT_BYTES = 32


def _error(code: int, message: str | None) -> str:
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    return f"{name}: {message}" if message else name


def list_users(client: WireClient, names: list[str] | None = None) -> list[dict[str, Any]]:
    response = client.call(DescribeUserScramCredentialsRequest(
        users=[UserName(name=n) for n in names] if names else None))
    if response.error_code:
        raise WireError(_error(response.error_code, response.error_message))
    rows = []
    for result in response.results:
        if result.error_code:
            raise WireError(f"user {result.user}: {_error(result.error_code, result.error_message)}")
        for info in result.credential_infos:
            spec = BY_TYPE.get(info.mechanism)
            rows.append({"user": result.user, "mechanism": spec.name if spec else f"unknown({info.mechanism})",
                         "iterations": info.iterations})
    return rows


def _alter(client: WireClient, request: AlterUserScramCredentialsRequest) -> None:
    for result in client.call(request).results:
        if result.error_code:
            raise WireError(f"user {result.user}: {_error(result.error_code, result.error_message)}")


def add_user(client: WireClient, name: str, mechanism: str, password: str, iterations: int) -> None:
    spec = MECHANISMS[mechanism]
    salt = secrets.token_bytes(SALT_BYTES)
    _alter(client, AlterUserScramCredentialsRequest(upsertions=[ScramCredentialUpsertion(
        name=name, mechanism=spec.type_id, iterations=iterations, salt=salt,
        salted_password=spec.salted_password(password, salt, iterations))]))


def delete_user(client: WireClient, name: str, mechanism: str) -> None:
    _alter(client, AlterUserScramCredentialsRequest(deletions=[
        ScramCredentialDeletion(name=name, mechanism=MECHANISMS[mechanism].type_id)]))
