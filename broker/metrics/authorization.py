"""Authorization counters: denials by operation and resource type, and the ACLs held.

Incremented where a decision is made; a denial is a rare event worth counting, an allowed action is not
(it is every request).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

AUTHORIZATION_DENIED = Counter("pybroker_authorization_denied",
                               "Actions the authorizer refused, by operation and resource type.",
                               ["operation", "resource_type"])
ACLS = Gauge("pybroker_acls", "ACL bindings held by the authorizer.")
