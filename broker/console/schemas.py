"""The console's schema registry page: subjects with their versions, ids, types, compatibility and mode, and
one version's schema text, read from the registry the broker serves (`broker/schema_registry/`).

Authorizes as the registry does (`broker/schema_registry/access.py`): a subject is listed, and its schema
shown, only when the console's principal may DESCRIBE the topic the subject stands for.
Threads: the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.broker.console.params import ConsoleError
from pybroker.broker.schema_registry.access import Access
from pybroker.protocol.acl_codes import AclOperation

if TYPE_CHECKING:
    from pybroker.broker.console.local_client import LocalClient

#: subjects listed at most (the page says when there are more)
MAX_SUBJECTS = 1000


def _access(client: LocalClient) -> Access:
    return Access(client.principal, client.peer.rpartition(":")[0], client.state.authorizer)


async def subjects(client: LocalClient) -> Any:
    registry = client.state.schema_registry
    if registry is None:
        return {"enabled": False, "subjects": [], "more": False}
    access = _access(client)
    state = registry.state
    names = sorted(s for s in state.subjects if access.may(AclOperation.DESCRIBE, s))
    rows = []
    for subject in names[:MAX_SUBJECTS]:
        versions = state.live(subject, deleted=True)
        rows.append({"subject": subject, "compatibility": state.level(subject), "mode": state.mode(subject),
                     "versions": [{"version": v.version, "id": v.schema_id, "type": v.schema_type,
                                   "deleted": v.deleted, "references": len(v.references)} for v in versions]})
    return {"enabled": True, "subjects": rows, "more": len(names) > MAX_SUBJECTS,
            "compatibility": state.level(None), "mode": state.mode(None)}


async def schema(client: LocalClient, subject: str, version: int) -> Any:
    registry = client.state.schema_registry
    if registry is None:
        raise ConsoleError(404, "the broker serves no schema registry (schema.registry.port)")
    if not _access(client).may(AclOperation.DESCRIBE, subject):
        raise ConsoleError(403, "TOPIC_AUTHORIZATION_FAILED: DESCRIBE on the subject's topic is needed")
    found = registry.state.subjects.get(subject, {}).get(version)
    if found is None:
        raise ConsoleError(404, f"no version {version} of subject {subject}")
    return {**found.answer(), "schemaType": found.schema_type, "deleted": found.deleted,
            "referenced_by": registry.state.referenced_by(subject, version)}
