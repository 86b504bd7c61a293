"""DescribeUserScramCredentials (key 50) 0 and AlterUserScramCredentials (key 51) 0: SCRAM users at runtime.

Kafka authorizes Describe with DESCRIBE on the CLUSTER and Alter with ALTER on the CLUSTER (the ACL work
adds those checks); without an authorizer anyone who reaches the broker may use them, as in Kafka.

Alter: the client sends the salt, iterations and salted password (never the password); the broker keeps
only StoredKey and ServerKey (`broker/security/scram_store.py`), writes the file once per request, off
the loop, and answers once it is durable. Errors are Kafka's, per user: an unknown mechanism is
UNSUPPORTED_SASL_MECHANISM, a user named twice is DUPLICATE_RESOURCE, deleting what does not exist is
RESOURCE_NOT_FOUND, iterations outside 4096..16384 (or an empty name, salt or salted password of the
wrong size) UNACCEPTABLE_CREDENTIAL; a user with any error has none of its changes applied. The broker
keeps at most MAX_USERS users (a new one past that is UNACCEPTABLE_CREDENTIAL), as every change rewrites
the credential file whole.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_check import Op
from pybroker.broker.security.authorization_cluster import (
    alter_scram_refusal,
    cluster_only,
    top_level_refusal,
)
from pybroker.broker.security.scram import ScramCredential, credential_from_salted
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from pybroker.protocol.messages.describe_user_scram_credentials import (
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from pybroker.protocol.scram_mechanisms import BY_TYPE, MAX_ITERATIONS, MIN_ITERATIONS

#: longest salt accepted (clients send 32 to 64 bytes)
MAX_SALT_BYTES = 1024
#: most SCRAM users the broker keeps: the file is rewritten whole on every change, so it must stay small
MAX_USERS = 100_000
#: longest user name accepted
MAX_NAME_CHARS = 1024


@handler(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, versions=(0, 0),
         authorize=cluster_only(Op.DESCRIBE, top_level_refusal(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)))
def handle_describe(ctx: RequestContext, request: DescribeUserScramCredentialsRequest) -> Any:
    users = ctx.state.scram.users()
    names = [u.name for u in request.users] if request.users else sorted(users)
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            results.append(DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.DUPLICATE_RESOURCE,
                error_message=f"Cannot describe SCRAM credentials for the same user twice in a single "
                              f"request: {name}"))
        elif name not in users:
            results.append(DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                error_message=f"Attempt to describe a user credential that does not exist: {name}"))
        else:
            infos = [CredentialInfo(mechanism=spec.type_id, iterations=users[name][spec.name].iterations)
                     for spec in BY_TYPE.values() if spec.name in users[name]]
            results.append(DescribeUserScramCredentialsResult(user=name, credential_infos=infos))
    return DescribeUserScramCredentialsResponse(results=results)


def _upsert_problem(upsertion: Any) -> tuple[ErrorCode, str] | None:
    spec = BY_TYPE.get(upsertion.mechanism)
    if spec is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if upsertion.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if upsertion.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not upsertion.salt or len(upsertion.salt) > MAX_SALT_BYTES:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt must hold 1 to 1024 bytes"
    if len(upsertion.salted_password) != len(spec.hash(b"")):
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Salted password must be a {spec.name} digest"
    return None


@handler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, versions=(0, 0),
         authorize=cluster_only(Op.ALTER, alter_scram_refusal))
def handle_alter(ctx: RequestContext, request: AlterUserScramCredentialsRequest) -> Any:
    store = ctx.state.scram
    problems: dict[str, tuple[ErrorCode, str]] = {}
    seen: Counter[tuple[str, int]] = Counter()
    order: list[str] = []
    changes: list[ScramCredentialDeletion | ScramCredentialUpsertion] = [*request.deletions, *request.upsertions]
    for change in changes:
        seen[(change.name, change.mechanism)] += 1
        order.append(change.name)
    for (name, _), count in seen.items():
        if count > 1:
            problems.setdefault(name, (ErrorCode.DUPLICATE_RESOURCE,
                                       "A user credential cannot be altered twice in the same request"))
    for deletion in request.deletions:
        spec = BY_TYPE.get(deletion.mechanism)
        if not deletion.name:
            problems.setdefault(deletion.name, (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"))
        elif spec is None:
            problems.setdefault(deletion.name, (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"))
        elif store.get(deletion.name, spec.name) is None:
            problems.setdefault(deletion.name, (ErrorCode.RESOURCE_NOT_FOUND,
                                                "Attempt to delete a user credential that does not exist"))
    known = store.users()
    new_names: set[str] = set()
    for upsertion in request.upsertions:
        problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty") if not upsertion.name \
            else (ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Username longer than {MAX_NAME_CHARS} characters") \
            if len(upsertion.name) > MAX_NAME_CHARS else _upsert_problem(upsertion)
        if problem is None and upsertion.name not in known and upsertion.name not in new_names:
            new_names.add(upsertion.name)
            if len(known) + len(new_names) > MAX_USERS:
                problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many SCRAM users (at most {MAX_USERS})")
        if problem is not None:
            problems.setdefault(upsertion.name, problem)
    upserts: list[tuple[str, str, ScramCredential]] = []
    for u in request.upsertions:
        if u.name not in problems:
            spec = BY_TYPE[u.mechanism]
            upserts.append((u.name, spec.name,
                            credential_from_salted(spec, bytes(u.salt), bytes(u.salted_password), u.iterations)))
    deletes = [(d.name, BY_TYPE[d.mechanism].name) for d in request.deletions if d.name not in problems]

    def build() -> AlterUserScramCredentialsResponse:
        return AlterUserScramCredentialsResponse(results=[
            AlterUserScramCredentialsResult(user=name, error_code=problems[name][0], error_message=problems[name][1])
            if name in problems else AlterUserScramCredentialsResult(user=name)
            for name in dict.fromkeys(order)])

    if not upserts and not deletes:
        return build()

    async def apply() -> AlterUserScramCredentialsResponse:
        await asyncio.to_thread(store.apply, upserts, deletes)
        return build()

    return apply()
