"""Who may do what in the registry: authentication with the broker's own users, authorization with its ACLs.

Authentication: when the broker authenticates its clients (a SASL listener) or authorizes them (an
authorizer configured), the registry asks for HTTP Basic credentials and checks them as the console does
(`broker/console/auth.py`: the PLAIN users of the SASL listeners, then the SCRAM credentials; constant-time
comparisons, a delayed refusal, remembered for a minute under a hash). Otherwise every request acts as
`User:ANONYMOUS`.

Authorization (Kafka has no resource type for subjects, so this is the rule): a subject is authorized as
the TOPIC its name stands for under Confluent's TopicNameStrategy, the subject without its `-key` or
`-value` suffix (a subject without either suffix: the topic of that very name; so `orders-value` is
`Topic:orders`, `com.acme.Order` is `Topic:com.acme.Order`). Reading a subject, its versions or a schema id
it holds needs DESCRIBE on that topic (lists show only such subjects); registering needs WRITE; deleting
needs DELETE; a subject's config or mode needs ALTER_CONFIGS; the global config and mode need
ALTER_CONFIGS on the CLUSTER; reading the global config, mode and schema types needs only authentication.
Super users may do everything, as with Kafka requests.

Threads: the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pybroker.broker.schema_registry.errors import RegistryError
from pybroker.protocol.acl_codes import AclOperation, ResourceType

if TYPE_CHECKING:
    from pybroker.broker.security.authorizer import Authorizer

CLUSTER_NAME = "kafka-cluster"
SUFFIXES = ("-key", "-value")


def topic_of(subject: str) -> str:
    """The topic a subject is authorized as (TopicNameStrategy read backwards)."""
    for suffix in SUFFIXES:
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject


@dataclass(slots=True)
class Access:
    """One request's principal and the broker's authorizer (None: everything is allowed)."""

    principal: str
    host: str
    authorizer: Authorizer | None

    def may(self, operation: AclOperation, subject: str) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.allowed(self.principal, self.host, operation, ResourceType.TOPIC,
                                       topic_of(subject), log_denial=False, api="SchemaRegistry")

    def require(self, operation: AclOperation, subject: str) -> None:
        if self.authorizer is None:
            return
        if not self.authorizer.allowed(self.principal, self.host, operation, ResourceType.TOPIC, topic_of(subject),
                                       api="SchemaRegistry"):
            raise RegistryError(40301, f"User is denied operation {operation.name} on subject {subject} "
                                       f"(Topic:{topic_of(subject)})")

    def require_cluster(self, operation: AclOperation) -> None:
        if self.authorizer is None:
            return
        if not self.authorizer.allowed(self.principal, self.host, operation, ResourceType.CLUSTER, CLUSTER_NAME,
                                       api="SchemaRegistry"):
            raise RegistryError(40301, f"User is denied operation {operation.name} on the cluster")
