"""Kafka's ACL decisions: literal and prefixed patterns, deny over allow, implied DESCRIBE, super users."""
from __future__ import annotations

import pytest

from logan_ray.security import acl
from logan_ray.security.acl import ALLOW, DENY, LITERAL, PREFIXED, TOPIC, Binding, Decider


def b(name, op, perm=ALLOW, principal="User:alice", pattern=LITERAL, host="*", rtype=TOPIC):
    return Binding(rtype, name, pattern, principal, host, op, perm)


def test_literal_allow_is_for_that_topic_and_operation_only():
    d = Decider([b("orders", acl.WRITE)])
    assert d.allowed("User:alice", "1.2.3.4", acl.WRITE, TOPIC, "orders")
    assert not d.allowed("User:alice", "1.2.3.4", acl.READ, TOPIC, "orders")
    assert not d.allowed("User:bob", "1.2.3.4", acl.WRITE, TOPIC, "orders")
    assert not d.allowed("User:alice", "1.2.3.4", acl.WRITE, TOPIC, "orders2")


def test_prefixed_acl_grants_a_group_of_topics():
    d = Decider([b("sales-", acl.READ, pattern=PREFIXED)])
    assert d.allowed("User:alice", "h", acl.READ, TOPIC, "sales-eu")
    assert d.allowed("User:alice", "h", acl.READ, TOPIC, "sales-")
    assert not d.allowed("User:alice", "h", acl.READ, TOPIC, "sale")


def test_deny_overrides_allow():
    d = Decider([b("*", acl.ALL), b("secret", acl.READ, DENY)])
    assert d.allowed("User:alice", "h", acl.READ, TOPIC, "public")
    assert not d.allowed("User:alice", "h", acl.READ, TOPIC, "secret")
    assert d.allowed("User:alice", "h", acl.WRITE, TOPIC, "secret")
    d = Decider([b("x", acl.ALL), b("x", acl.ALL, DENY, principal="User:*", host="10.0.0.9")])
    assert d.allowed("User:alice", "10.0.0.1", acl.READ, TOPIC, "x")
    assert not d.allowed("User:alice", "10.0.0.9", acl.READ, TOPIC, "x")


def test_describe_is_implied_by_read_write_delete_alter():
    for op in (acl.READ, acl.WRITE, acl.DELETE, acl.ALTER):
        assert Decider([b("t", op)]).allowed("User:alice", "h", acl.DESCRIBE, TOPIC, "t")
    assert Decider([b("t", acl.ALTER_CONFIGS)]).allowed("User:alice", "h", acl.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not Decider([b("t", acl.DESCRIBE)]).allowed("User:alice", "h", acl.READ, TOPIC, "t")


def test_no_acl_found_and_super_users():
    assert not Decider([]).allowed("User:alice", "h", acl.READ, TOPIC, "t")
    assert Decider([], allow_if_no_acl=True).allowed("User:alice", "h", acl.READ, TOPIC, "t")
    # once any ACL matches the resource, allow.everyone.if.no.acl.found no longer applies
    assert not Decider([b("t", acl.READ, principal="User:bob")], allow_if_no_acl=True).allowed(
        "User:alice", "h", acl.READ, TOPIC, "t")
    assert Decider([b("t", acl.READ, DENY)], super_users=["User:alice"]).allowed("User:alice", "h", acl.READ,
                                                                                 TOPIC, "t")


def test_filters_of_describe_and_delete():
    bindings = [b("sales-", acl.READ, pattern=PREFIXED), b("sales-eu", acl.WRITE), b("other", acl.READ)]
    match = Binding(TOPIC, "sales-eu", acl.P_MATCH, None, None, acl.O_ANY, acl.PERM_ANY)
    assert [x.name for x in bindings if acl.filter_matches(match, x)] == ["sales-", "sales-eu"]
    literal = Binding(acl.R_ANY, None, LITERAL, None, None, acl.O_ANY, acl.PERM_ANY)
    assert [x.name for x in bindings if acl.filter_matches(literal, x)] == ["sales-eu", "other"]
    anything = Binding(acl.R_ANY, None, acl.P_ANY, "User:alice", None, acl.READ, acl.PERM_ANY)
    assert [x.name for x in bindings if acl.filter_matches(anything, x)] == ["sales-", "other"]


def test_invalid_bindings_are_refused():
    for bad in (b("t", acl.IDEMPOTENT_WRITE), b("", acl.READ), b("t", acl.READ, principal="alice"),
                b("t", acl.READ, pattern=acl.P_MATCH), b("other", acl.ALTER, rtype=acl.CLUSTER)):
        with pytest.raises(acl.AclError):
            acl.validate(bad)


def test_offset_fetch_hides_or_refuses_topics_the_principal_may_not_describe():
    from logan_ray.gateway.authz import _committed_topics

    d = Decider([b("mine", acl.READ)])

    def ok(op, rtype, name):
        return d.allowed("User:alice", "h", op, rtype, name)
    topics = [{"name": "mine", "partitions": [{"partition_index": 0, "committed_offset": 5, "error_code": 0}]},
              {"name": "theirs", "partitions": [{"partition_index": 0, "committed_offset": 7, "error_code": 0}]}]
    assert [t["name"] for t in _committed_topics(topics, False, ok)] == ["mine"]
    named = _committed_topics(topics, True, ok)
    assert named[1]["partitions"][0]["error_code"] == 29 and named[1]["partitions"][0]["committed_offset"] == -1
