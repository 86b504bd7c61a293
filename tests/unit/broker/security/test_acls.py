"""Kafka's authorization rules (StandardAuthorizer), case by case, and the filters of Describe/DeleteAcls."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.broker.security.acl_store import AclStore
from pybroker.broker.security.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_problem,
    decide,
    parse_super_users,
    wire_filter,
)
from pybroker.broker.security.authorizer import Authorizer, host_of
from pybroker.storage.errors import StorageError

Op, RT, PT, Perm = AclOperation, ResourceType, PatternType, AclPermissionType
ALICE, BOB = "User:alice", "User:bob"


def acl(name: str = "orders", op: AclOperation = Op.READ, perm: AclPermissionType = Perm.ALLOW, *,
        principal: str = ALICE, host: str = "*", pattern: PatternType = PT.LITERAL,
        rtype: ResourceType = RT.TOPIC) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def allowed(acls: list[AclBinding], op: AclOperation = Op.READ, name: str = "orders", *, principal: str = ALICE,
            host: str = "10.0.0.1", rtype: ResourceType = RT.TOPIC, **kw: object) -> bool:
    return decide(acls, principal, host, op, rtype, name, **kw).allowed  # type: ignore[arg-type]


@pytest.mark.parametrize(("acls", "expected"), [
    ([acl()], True),                                           # literal match
    ([acl("other")], False),                                   # another topic's ACL
    ([acl("*")], True),                                        # the wildcard name
    ([acl("ord", pattern=PT.PREFIXED)], True),                 # a prefix of the name
    ([acl("orders-eu", pattern=PT.PREFIXED)], False),          # longer than the name
    ([acl("ord", pattern=PT.LITERAL)], False),                 # literal is not a prefix
    ([acl("*", pattern=PT.PREFIXED)], False),                  # '*' is only a wildcard when literal
    ([acl(principal="User:*")], True),                         # wildcard principal
    ([acl(principal=BOB)], False),                             # someone else's ACL
    ([acl(host="10.0.0.1")], True),                            # the caller's host
    ([acl(host="10.0.0.2")], False),                           # another host
    ([acl(op=Op.ALL)], True),                                  # ALL covers READ
    ([acl(op=Op.WRITE)], False),                               # WRITE does not imply READ
    ([acl(), acl(perm=Perm.DENY)], False),                     # DENY beats ALLOW
    ([acl(), acl("*", perm=Perm.DENY)], False),                # a wildcard DENY beats a literal ALLOW
    ([acl(), acl("o", perm=Perm.DENY, pattern=PT.PREFIXED)], False),
    ([acl(), acl(perm=Perm.DENY, principal="User:*")], False),
    ([acl(), acl(perm=Perm.DENY, op=Op.ALL)], False),
    ([acl(), acl(perm=Perm.DENY, host="10.0.0.2")], True),     # DENY for another host
    ([acl(), acl(perm=Perm.DENY, op=Op.WRITE)], True),         # DENY of another operation
    ([acl(rtype=RT.GROUP)], False),                            # another resource type
])
def test_matching_and_deny_over_allow(acls: list[AclBinding], expected: bool) -> None:
    assert allowed(acls) is expected


@pytest.mark.parametrize(("granted", "asked", "expected"), [
    (Op.READ, Op.DESCRIBE, True), (Op.WRITE, Op.DESCRIBE, True), (Op.DELETE, Op.DESCRIBE, True),
    (Op.ALTER, Op.DESCRIBE, True), (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, True),
    (Op.CREATE, Op.DESCRIBE, False), (Op.DESCRIBE, Op.READ, False), (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, False),
    (Op.ALTER_CONFIGS, Op.DESCRIBE, False),
])
def test_implied_operations(granted: AclOperation, asked: AclOperation, expected: bool) -> None:
    assert allowed([acl(op=granted)], asked) is expected


def test_implication_holds_only_for_allow() -> None:
    # a DENY of READ does not deny DESCRIBE (Kafka: implications widen ALLOWs only)
    assert allowed([acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=Perm.DENY)], Op.DESCRIBE)


def test_super_users_and_the_no_acl_default() -> None:
    supers = parse_super_users("User:admin; User:ops;")
    assert supers == {"User:admin", "User:ops"}
    deny_all = [acl("*", Op.ALL, Perm.DENY, principal="User:*")]
    assert allowed(deny_all, principal="User:admin", super_users=supers)
    assert not allowed(deny_all, principal=ALICE, super_users=supers)
    # no ACL names the resource: the default decides
    assert not allowed([])
    assert allowed([], allow_if_no_acl=True)
    assert allowed([acl("other")], allow_if_no_acl=True)
    # an ACL for someone else selects the resource: no longer "no ACL found"
    assert not allowed([acl(principal=BOB)], allow_if_no_acl=True)


def test_filters() -> None:
    lit, pre, star = acl(), acl("ord", pattern=PT.PREFIXED), acl("*")
    group = acl("g", rtype=RT.GROUP, principal=BOB, op=Op.DESCRIBE, perm=Perm.DENY)
    every = [lit, pre, star, group]

    def select(**kw: object) -> list[AclBinding]:
        return [b for b in every if AclFilter(**kw).matches(b)]  # type: ignore[arg-type]

    assert select(pattern_type=PT.ANY) == every
    assert select(pattern_type=PT.LITERAL) == [lit, star, group]
    assert select(pattern_type=PT.PREFIXED) == [pre]
    assert select(resource_name="orders", pattern_type=PT.ANY) == [lit]
    assert select(resource_name="orders", pattern_type=PT.MATCH) == [lit, pre, star]
    assert select(resource_name="orders", pattern_type=PT.MATCH, resource_type=RT.TOPIC) == [lit, pre, star]
    assert select(resource_type=RT.GROUP, pattern_type=PT.ANY) == [group]
    assert select(principal=BOB, pattern_type=PT.ANY) == [group]
    assert select(host="*", operation=Op.DESCRIBE, permission=Perm.DENY, pattern_type=PT.ANY) == [group]
    assert select(operation=Op.WRITE, pattern_type=PT.ANY) == []
    # codes a hostile client may send become UNKNOWN, which the filter refuses
    assert wire_filter(99, None, 3, None, None, 1, 1).problem() == "unknown resource type"
    assert wire_filter(1, None, 3, None, None, 1, 1).problem() is None


@pytest.mark.parametrize(("binding", "ok"), [
    (acl(), True),
    (acl(pattern=PT.MATCH), False), (acl(pattern=PT.ANY), False),
    (acl(op=Op.ANY), False), (acl(perm=Perm.ANY), False),
    (acl(rtype=RT.ANY), False), (acl(rtype=RT.DELEGATION_TOKEN), False),
    (acl(""), False), (acl(principal="alice"), False), (acl(host=""), False),
    (acl("kafka-cluster", Op.ALTER, rtype=RT.CLUSTER), True), (acl("other", Op.ALTER, rtype=RT.CLUSTER), False),
    (acl("alice", Op.DESCRIBE_TOKENS, rtype=RT.USER), True),
    (acl("tx-", Op.WRITE, rtype=RT.TRANSACTIONAL_ID, pattern=PT.PREFIXED), True),
])
def test_which_bindings_may_be_created(binding: AclBinding, ok: bool) -> None:
    assert (binding_problem(binding) is None) is ok


def test_store_round_trip_and_a_damaged_file(tmp_path: Path) -> None:
    store = AclStore(tmp_path)
    assert store.load() == set()
    bindings = {acl(), acl("ord", Op.WRITE, Perm.DENY, pattern=PT.PREFIXED, host="10.0.0.1"),
                acl("kafka-cluster", Op.ALTER, rtype=RT.CLUSTER, principal="User:*")}
    store.save(bindings)
    assert AclStore(tmp_path).load() == bindings
    store.path.write_text('{"version": 1, "acls": [{"resource_type": "TOPIC"}]}')
    with pytest.raises(StorageError, match="not an ACL file"):
        store.load()
    store.path.write_text("{not json")
    with pytest.raises(StorageError):
        store.load()


def test_authorizer_persists_changes_and_deletes_by_filter(tmp_path: Path) -> None:
    authorizer = Authorizer(tmp_path, "User:admin", allow_if_no_acl=False)
    authorizer.load()
    authorizer.create([acl(), acl("ord", pattern=PT.PREFIXED, op=Op.WRITE)])
    again = Authorizer(tmp_path, None, allow_if_no_acl=False)
    again.load()
    assert again.count() == 2
    assert again.allowed(ALICE, "h", Op.WRITE, RT.TOPIC, "orders-eu")
    assert again.allowed(ALICE, "h", Op.DESCRIBE, RT.TOPIC, "orders")
    assert not again.allowed(BOB, "h", Op.READ, RT.TOPIC, "orders")
    matched = again.delete([AclFilter(pattern_type=PT.PREFIXED), AclFilter(pattern_type=PT.ANY, operation=Op.WRITE)])
    assert matched == [[acl("ord", pattern=PT.PREFIXED, op=Op.WRITE)]] * 2
    third = Authorizer(tmp_path, None, allow_if_no_acl=False)
    third.load()
    assert third.bindings() == [acl()]


def test_host_of_peer() -> None:
    assert host_of("10.0.0.1:5555") == "10.0.0.1"
    assert host_of("::1:5555") == "::1"
    assert host_of("?") == "?"


_names = st.sampled_from(["orders", "orders-eu", "ord", "o", "*", "payments", "kafka-cluster"])
_bindings = st.builds(
    AclBinding, st.sampled_from([RT.TOPIC, RT.GROUP, RT.CLUSTER]), _names, st.sampled_from([PT.LITERAL, PT.PREFIXED]),
    st.sampled_from([ALICE, BOB, "User:*"]), st.sampled_from(["*", "10.0.0.1"]),
    st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS]),
    st.sampled_from([Perm.ALLOW, Perm.DENY]))


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(bindings=st.sets(_bindings, max_size=12), name=_names, rtype=st.sampled_from([RT.TOPIC, RT.GROUP]),
       op=st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS]), default=st.booleans())
def test_the_indexed_authorizer_decides_as_the_plain_rules(tmp_path: Path, bindings: set[AclBinding], name: str,
                                                           rtype: ResourceType, op: AclOperation,
                                                           default: bool) -> None:
    authorizer = Authorizer(tmp_path, None, allow_if_no_acl=default)
    authorizer._commit(bindings)
    expected = decide(bindings, ALICE, "10.0.0.1", op, rtype, name, allow_if_no_acl=default).allowed
    assert authorizer.allowed(ALICE, "10.0.0.1", op, rtype, name, log_denial=False) is expected


def test_denials_are_logged_rate_limited_and_counted(tmp_path: Path) -> None:
    from pybroker.broker.loggers.limiter import RateLimitedLog
    from pybroker.broker.metrics.authorization import AUTHORIZATION_DENIED

    lines: list[tuple[str, dict[str, object]]] = []

    class Logger:
        def warning(self, event: str, **context: object) -> None:
            lines.append((event, context))

    authorizer = Authorizer(tmp_path, None, allow_if_no_acl=False,
                            denial_log=RateLimitedLog(Logger(), lines=2, interval_s=60))
    authorizer.load()
    counter = AUTHORIZATION_DENIED.labels("WRITE", "TOPIC")
    before = counter._value.get()
    for _ in range(5):
        assert not authorizer.allowed(ALICE, "10.0.0.1", Op.WRITE, RT.TOPIC, "orders", api="Produce")
    assert not authorizer.allowed(ALICE, "10.0.0.1", Op.WRITE, RT.TOPIC, "orders", log_denial=False)
    assert counter._value.get() - before == 5
    assert lines == [("authorization denied", {"principal": ALICE, "operation": "WRITE", "resource_type": "TOPIC",
                                               "resource_name": "orders", "host": "10.0.0.1", "api": "Produce"})] * 2
