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

from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.java_hash_order import hash_map_order
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
    repeated: dict[str, bool] = {}
    for name in names:
        repeated[name] = name in repeated
    results = []
    for name in hash_map_order(repeated):  # Kafka answers in its HashMap's order of the names
        if repeated[name]:
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


def _name_problem(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in BY_TYPE:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _upsert_problem(upsertion: Any) -> tuple[ErrorCode, str] | None:
    """Kafka's checks, in its order, then this broker's own bounds (a name, salt or digest a client could
    make the credential file carry)."""
    problem = _name_problem(upsertion.name, upsertion.mechanism)
    if problem is not None:
        return problem
    spec = BY_TYPE[upsertion.mechanism]
    if upsertion.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if upsertion.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if len(upsertion.name) > MAX_NAME_CHARS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Username longer than {MAX_NAME_CHARS} characters"
    if not upsertion.salt or len(upsertion.salt) > MAX_SALT_BYTES:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt must hold 1 to 1024 bytes"
    if len(upsertion.salted_password) != len(spec.hash(b"")):
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Salted password must be a {spec.name} digest"
    return None


DUPLICATE = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")


@handler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, versions=(0, 0),
         authorize=cluster_only(Op.ALTER, alter_scram_refusal))
def handle_alter(ctx: RequestContext, request: AlterUserScramCredentialsRequest) -> Any:
    """Kafka's controller's rules: one change per user and request (a second one, whatever its mechanism,
    makes the user DUPLICATE_RESOURCE and drops its first), deletions looked at before upsertions, each
    user keeping its first error; the answer lists the deletions done, the upsertions done, then the
    errors, each in the order of Kafka's HashMap of them."""
    store = ctx.state.scram
    problems: dict[str, tuple[ErrorCode, str]] = {}
    deleting: dict[str, ScramCredentialDeletion] = {}
    upserting: dict[str, ScramCredentialUpsertion] = {}
    peak_deleting = peak_upserting = 0
    for deletion in request.deletions:
        if deletion.name in problems:
            continue
        if deleting.pop(deletion.name, None) is not None:
            problems[deletion.name] = DUPLICATE
            continue
        problem = _name_problem(deletion.name, deletion.mechanism)
        if problem is None and store.get(deletion.name, BY_TYPE[deletion.mechanism].name) is None:
            problem = (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
        if problem is not None:
            problems[deletion.name] = problem
        else:
            deleting[deletion.name] = deletion
            peak_deleting = max(peak_deleting, len(deleting))
    known = store.users()
    for upsertion in request.upsertions:
        if upsertion.name in problems:
            continue
        if deleting.pop(upsertion.name, None) is not None or upserting.pop(upsertion.name, None) is not None:
            problems[upsertion.name] = DUPLICATE
            continue
        problem = _upsert_problem(upsertion)
        if problem is None and upsertion.name not in known and \
                len(known) + sum(1 for n in upserting if n not in known) >= MAX_USERS:
            problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many SCRAM users (at most {MAX_USERS})")
        if problem is not None:
            problems[upsertion.name] = problem
        else:
            upserting[upsertion.name] = upsertion
            peak_upserting = max(peak_upserting, len(upserting))
    upserts: list[tuple[str, str, ScramCredential]] = []
    for u in upserting.values():
        spec = BY_TYPE[u.mechanism]
        upserts.append((u.name, spec.name,
                        credential_from_salted(spec, bytes(u.salt), bytes(u.salted_password), u.iterations)))
    deletes = [(d.name, BY_TYPE[d.mechanism].name) for d in deleting.values()]
    done = [*hash_map_order(deleting, peak_deleting), *hash_map_order(upserting, peak_upserting)]

    def build() -> AlterUserScramCredentialsResponse:
        return AlterUserScramCredentialsResponse(results=[
            *(AlterUserScramCredentialsResult(user=name) for name in done),
            *(AlterUserScramCredentialsResult(user=name, error_code=problems[name][0], error_message=problems[name][1])
              for name in hash_map_order(problems))])

    if not upserts and not deletes:
        return build()

    async def apply() -> AlterUserScramCredentialsResponse:
        await ctx.state.detached.run(store.apply, upserts, deletes)
        return build()

    return apply()
