"""The authorizer's rules (Kafka's StandardAuthorizer) and the binding filters, without a
cluster: patterns, principals, hosts, DENY over ALLOW, implied operations, super users,
allow.everyone.if.no.acl.found, authorizeByResourceType and the cache."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaflite.cluster.acl import AclStore, Authorizer
from kaflite.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourceType,
    validate_binding,
    validate_filter,
)

Op, RT, PT, P = AclOperation, ResourceType, PatternType, AclPermissionType
ALICE, HOST = "User:alice", "10.0.0.1"


def acl(name: str, op: AclOperation = Op.READ, perm: AclPermissionType = P.ALLOW,
        pattern: PatternType = PT.LITERAL, principal: str = ALICE, host: str = "*",
        rt: ResourceType = RT.TOPIC) -> AclBinding:
    return AclBinding(rt, name, pattern, principal, host, op, perm)


def authorizer(*bindings: AclBinding, supers: frozenset[str] = frozenset(),
               allow_if_none: bool = False) -> Authorizer:
    store = AclStore()
    store.add(bindings)
    return Authorizer(store, supers, allow_if_none)


def test_literal_prefixed_and_wildcard_patterns() -> None:
    a = authorizer(acl("orders"), acl("log-", pattern=PT.PREFIXED), acl("*", op=Op.WRITE))
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "orders2")
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "log-app")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "lo")
    assert a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "anything")
    # another resource type with the same name is another resource
    assert not a.authorize(ALICE, HOST, Op.READ, RT.GROUP, "orders")


def test_principal_and_host_must_match() -> None:
    a = authorizer(acl("t", host="10.0.0.1"), acl("u", principal="User:*"))
    assert a.authorize(ALICE, "10.0.0.1", Op.READ, RT.TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.2", Op.READ, RT.TOPIC, "t")
    assert not a.authorize("User:bob", "10.0.0.1", Op.READ, RT.TOPIC, "t")
    assert a.authorize("User:bob", HOST, Op.READ, RT.TOPIC, "u")


def test_a_cidr_host_covers_the_addresses_in_its_block() -> None:
    """Kafka 4.4's authorizer (metadata.version 4.4-IV1 and later): an entry's host may be
    a CIDR block; a DENY for a block beats an ALLOW for every host."""
    a = authorizer(acl("t", host="10.0.0.0/8"), acl("u", host="2001:db8::/32"),
                   acl("v"), acl("v", perm=P.DENY, host="192.168.0.0/16"))
    assert a.authorize(ALICE, "10.20.30.40", Op.READ, RT.TOPIC, "t")
    assert not a.authorize(ALICE, "11.0.0.1", Op.READ, RT.TOPIC, "t")
    assert a.authorize(ALICE, "2001:db8::1", Op.READ, RT.TOPIC, "u")
    assert not a.authorize(ALICE, "10.0.0.1", Op.READ, RT.TOPIC, "u")
    assert a.authorize(ALICE, "10.0.0.1", Op.READ, RT.TOPIC, "v")
    assert not a.authorize(ALICE, "192.168.3.4", Op.READ, RT.TOPIC, "v")
    assert a.authorize_any(ALICE, "10.1.1.1", Op.READ, RT.TOPIC)


def test_deny_wins_over_allow_whatever_the_pattern() -> None:
    a = authorizer(acl("*", op=Op.ALL), acl("secret-", perm=P.DENY, pattern=PT.PREFIXED),
                   acl("audit", op=Op.WRITE, perm=P.DENY, principal="User:*"))
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "public")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "secret-plans")
    assert not a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "audit")
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "audit")    # only WRITE is denied


@pytest.mark.parametrize(("granted", "implied"), [
    (Op.READ, Op.DESCRIBE), (Op.WRITE, Op.DESCRIBE), (Op.DELETE, Op.DESCRIBE),
    (Op.ALTER, Op.DESCRIBE), (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS), (Op.ALL, Op.CREATE)])
def test_implied_operations(granted: AclOperation, implied: AclOperation) -> None:
    assert authorizer(acl("t", op=granted)).authorize(ALICE, HOST, implied, RT.TOPIC, "t")


def test_implication_is_not_reversed_and_deny_does_not_imply() -> None:
    assert not authorizer(acl("t", op=Op.DESCRIBE)).authorize(ALICE, HOST, Op.READ,
                                                              RT.TOPIC, "t")
    a = authorizer(acl("t", op=Op.DESCRIBE), acl("t", op=Op.READ, perm=P.DENY))
    assert a.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "t")    # DENY READ leaves DESCRIBE
    a = authorizer(acl("t", op=Op.DESCRIBE), acl("t", op=Op.ALL, perm=P.DENY))
    assert not a.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "t")


def test_super_users_and_allow_everyone_if_no_acl_found() -> None:
    a = authorizer(acl("t", perm=P.DENY), supers=frozenset({"User:admin"}))
    assert a.authorize("User:admin", HOST, Op.READ, RT.TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "free")   # default: false
    a = authorizer(acl("t", principal="User:bob"), allow_if_none=True)
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "free")     # no ACL on it at all
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")    # ACLs exist, not hers


def test_a_change_to_the_store_applies_to_the_next_decision() -> None:
    store = AclStore()
    a = Authorizer(store)
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    store.add([acl("t")])
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    store.remove([AclBindingFilter(resource_type=RT.TOPIC, name="t")])
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")


def test_authorize_by_resource_type() -> None:
    def any_write(*bindings: AclBinding) -> bool:
        return authorizer(*bindings).authorize_any(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert any_write(acl("t", op=Op.WRITE))
    assert not any_write(acl("t", op=Op.READ))
    assert not any_write(acl("t", op=Op.WRITE), acl("t", op=Op.WRITE, perm=P.DENY))
    assert not any_write(acl("t-1", op=Op.WRITE),
                         acl("t-", op=Op.WRITE, perm=P.DENY, pattern=PT.PREFIXED))
    assert any_write(acl("ab", op=Op.WRITE, pattern=PT.PREFIXED),
                     acl("abc", op=Op.WRITE, perm=P.DENY, pattern=PT.PREFIXED))
    assert not any_write(acl("x", op=Op.ALL), acl("*", op=Op.WRITE, perm=P.DENY))


def test_filters_any_match_and_exact_pattern_types() -> None:
    bindings = [acl("orders"), acl("ord", pattern=PT.PREFIXED), acl("*"),
                acl("orders", pattern=PT.PREFIXED, op=Op.WRITE), acl("g", rt=RT.GROUP)]

    def names(f: AclBindingFilter) -> list[tuple[str, str]]:
        return [(b.name, b.pattern_type.name) for b in bindings if f.matches(b)]
    assert len(names(AclBindingFilter())) == 5
    assert names(AclBindingFilter(RT.TOPIC, "orders", PT.ANY)) == [
        ("orders", "LITERAL"), ("orders", "PREFIXED")]
    assert names(AclBindingFilter(RT.TOPIC, "orders", PT.MATCH)) == [
        ("orders", "LITERAL"), ("ord", "PREFIXED"), ("*", "LITERAL"), ("orders", "PREFIXED")]
    assert names(AclBindingFilter(RT.TOPIC, "orders", PT.LITERAL)) == [("orders", "LITERAL")]
    assert names(AclBindingFilter(RT.ANY, None, PT.PREFIXED, operation=Op.WRITE)) == [
        ("orders", "PREFIXED")]
    assert names(AclBindingFilter(principal="User:bob")) == []


@pytest.mark.parametrize(("binding", "why"), [
    (AclBinding.of(99, "t", 3, ALICE, "*", 3, 3), "resourceType"),
    (AclBinding.of(2, "t", 1, ALICE, "*", 3, 3), "patternType"),
    (AclBinding.of(2, "t", 3, ALICE, "*", 1, 3), "operation"),
    (AclBinding.of(2, "t", 3, ALICE, "*", 3, 7), "permissionType"),
    (acl(""), "empty resource name"),
    (acl("*", pattern=PT.PREFIXED), "PREFIXED"),
    (acl("other", rt=RT.CLUSTER), "kafka-cluster"),
    (acl("t", principal=""), "principal"),
    (acl("t", principal="alice"), "principal"),
    (acl("t", principal="User:"), "principal"),
])
def test_invalid_bindings(binding: AclBinding, why: str) -> None:
    with pytest.raises(InvalidAcl, match=why):
        validate_binding(binding)


def test_invalid_filter() -> None:
    with pytest.raises(InvalidAcl):
        validate_filter(AclBindingFilter.of(1, None, 0, None, None, 1, 1))
    validate_filter(AclBindingFilter())


NAMES = st.text(alphabet="ab-*", min_size=1, max_size=4)


@given(st.lists(st.tuples(NAMES, st.sampled_from([PT.LITERAL, PT.PREFIXED]),
                          st.sampled_from([P.ALLOW, P.DENY])), max_size=6), NAMES)
def test_decisions_match_a_plain_reading_of_the_rules(
        rows: list[tuple[str, PatternType, AclPermissionType]], resource: str) -> None:
    bindings = [acl(n, pattern=pt, perm=perm) for n, pt, perm in rows
                if not (pt == PT.PREFIXED and n == "*")]

    def applies(b: AclBinding) -> bool:
        if b.pattern_type == PT.LITERAL:
            return b.name in (resource, "*")
        return resource.startswith(b.name)
    hits = [b for b in bindings if applies(b)]
    expected = bool(hits) and all(b.permission == P.ALLOW for b in hits)
    assert authorizer(*bindings).authorize(ALICE, HOST, Op.READ, RT.TOPIC, resource) == expected
