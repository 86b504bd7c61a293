"""What the authorization rules of the member-protocol groups share (KIP-848's consumer groups and KIP-932's
share groups, whose heartbeat and describe APIs Kafka checks alike):

| piece | check | denial |
| --- | --- | --- |
| `heartbeat_denial` | READ on the group; DESCRIBE on every subscribed topic name | (GROUP_ or TOPIC_AUTHORIZATION_FAILED, why), for the whole request |
| `describe_groups` | DESCRIBE on each group id; then the API's own screen of each answered group | GROUP_AUTHORIZATION_FAILED per refused group, appended to the answer |

Each API's rule (`authorization_consumer_groups`, `authorization_share_groups`) builds its own response
types around these. Runs on the event loop, inside `authorization.call`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pybroker.broker.security.authorization_check import (
    GROUP,
    GROUP_DENIED,
    TOPIC,
    TOPIC_DENIED,
    Check,
    Merge,
    Op,
    split_by,
)

#: how many refused topic names a heartbeat's error message lists
MAX_NAMED_TOPICS = 20


def heartbeat_denial(check: Check, group_id: str, subscribed: list[str] | None) -> tuple[int, str] | None:
    """None when the member may heartbeat, else the error code and message of the refusal."""
    if not check.ok(Op.READ, GROUP, group_id):
        return GROUP_DENIED, "not authorized to read the group"
    denied = [t for t in dict.fromkeys(subscribed or []) if not check.ok(Op.DESCRIBE, TOPIC, t)]
    if denied:
        return TOPIC_DENIED, f"Topics not authorized: {', '.join(sorted(denied)[:MAX_NAMED_TOPICS])}"
    return None


def describe_groups(check: Check, group_ids: list[str], include_operations: bool,
                    refused: Callable[[str], Any], screen: Callable[[Any], None] | None = None
                    ) -> tuple[list[str], Merge]:
    """(the group ids the principal may describe, the merge of the answer): the merge screens each
    answered group (`screen`, which may turn it into a TOPIC_AUTHORIZATION_FAILED), fills in the
    authorized operations when asked (not for a group the screen refused), and appends `refused(id)` for
    every group id that was not asked."""
    kept, denied = split_by(group_ids, lambda g: check.ok(Op.DESCRIBE, GROUP, g))

    def merge(response: Any) -> Any:
        if screen is not None:
            for group in response.groups:
                screen(group)
        if include_operations:
            for group in response.groups:
                if group.error_code != TOPIC_DENIED:
                    group.authorized_operations = check.operations(GROUP, group.group_id)
        response.groups.extend(refused(g) for g in denied)
        return response
    return kept, merge
