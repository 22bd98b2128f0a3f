"""Kafka's ACL model: bindings, filters and the authorization decision (AclAuthorizer semantics).

A binding is (resource type, resource name, pattern type, principal, host,
operation, permission), the codes of Kafka's ResourceType / PatternType /
AclOperation / AclPermissionType. Decision rules, as Kafka's authorizer applies them:
super users may do everything; a matching DENY wins over any ALLOW; DESCRIBE is
implied by READ, WRITE, DELETE or ALTER, DESCRIBE_CONFIGS by ALTER_CONFIGS; a
resource no ACL matches at all is open only with ``allow.everyone.if.no.acl.found``.
Pure functions: no I/O (the gateway's Authorizer keeps the bindings fresh).
"""
from __future__ import annotations

from typing import Iterable, NamedTuple, Sequence

# ResourceType
R_ANY, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 1, 2, 3, 4, 5, 6, 7
RESOURCE_TYPES = {"topic": TOPIC, "group": GROUP, "cluster": CLUSTER, "transactional_id": TRANSACTIONAL_ID}
# PatternType
P_ANY, P_MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
PATTERN_TYPES = {"literal": LITERAL, "prefixed": PREFIXED}
# AclOperation
O_ANY, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 1, 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
OPERATIONS = {"all": ALL, "read": READ, "write": WRITE, "create": CREATE, "delete": DELETE, "alter": ALTER,
              "describe": DESCRIBE, "cluster_action": CLUSTER_ACTION, "describe_configs": DESCRIBE_CONFIGS,
              "alter_configs": ALTER_CONFIGS, "idempotent_write": IDEMPOTENT_WRITE}
# AclPermissionType
PERM_ANY, DENY, ALLOW = 1, 2, 3
PERMISSIONS = {"allow": ALLOW, "deny": DENY}

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

#: Operations each resource type supports (Kafka's AclEntry.supportedOperations).
SUPPORTED = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE),
    TRANSACTIONAL_ID: (DESCRIBE, WRITE),
}
_IMPLIED = {DESCRIBE: (DESCRIBE, READ, WRITE, DELETE, ALTER), DESCRIBE_CONFIGS: (DESCRIBE_CONFIGS, ALTER_CONFIGS)}


class Binding(NamedTuple):
    resource_type: int
    name: str
    pattern: int
    principal: str
    host: str
    operation: int
    permission: int


class AclError(ValueError):
    """A binding Kafka would refuse (INVALID_REQUEST with this message)."""


def validate(b: Binding) -> None:
    if b.resource_type not in SUPPORTED:
        raise AclError(f"resource type {b.resource_type} cannot carry ACLs")
    if b.pattern not in (LITERAL, PREFIXED):
        raise AclError("ACLs need pattern type LITERAL or PREFIXED")
    if b.operation != ALL and b.operation not in SUPPORTED[b.resource_type]:
        raise AclError(f"operation {b.operation} does not apply to resource type {b.resource_type}")
    if b.permission not in (ALLOW, DENY):
        raise AclError("ACLs need permission ALLOW or DENY")
    if not b.name:
        raise AclError("the resource name must not be empty")
    if ":" not in b.principal or not b.principal.split(":", 1)[1]:
        raise AclError(f"principal {b.principal!r} is not TYPE:NAME")
    if not b.host:
        raise AclError("the host must not be empty (use * for any)")
    if b.resource_type == CLUSTER and b.name != CLUSTER_NAME:
        raise AclError(f"the cluster resource is named {CLUSTER_NAME}")


def resource_matches(b: Binding, resource_type: int, name: str) -> bool:
    """Does the binding's pattern cover this resource?"""
    if b.resource_type != resource_type:
        return False
    if b.pattern == LITERAL:
        return b.name == name or b.name == WILDCARD
    return b.pattern == PREFIXED and name.startswith(b.name)


def filter_matches(f: Binding, b: Binding) -> bool:
    """DescribeAcls / DeleteAcls filters: ANY and None match everything; MATCH matches patterns covering the name."""
    if f.resource_type != R_ANY and f.resource_type != b.resource_type:
        return False
    if f.name is not None:
        if f.pattern == P_MATCH:
            if not (b.name == f.name or (b.pattern == LITERAL and b.name == WILDCARD)
                    or (b.pattern == PREFIXED and f.name.startswith(b.name))):
                return False
        elif f.pattern == P_ANY:
            if b.name != f.name:
                return False
        elif b.name != f.name or b.pattern != f.pattern:
            return False
    elif f.pattern not in (P_ANY, P_MATCH) and f.pattern != b.pattern:
        return False
    if f.principal is not None and f.principal != b.principal:
        return False
    if f.host is not None and f.host != b.host:
        return False
    if f.operation != O_ANY and f.operation != b.operation:
        return False
    return f.permission == PERM_ANY or f.permission == b.permission


class Decider:
    """Authorization decisions over one snapshot of the bindings."""

    def __init__(self, bindings: Iterable[Sequence], super_users: Iterable[str] = (),
                 allow_if_no_acl: bool = False) -> None:
        self.bindings = [Binding(*b) for b in bindings]
        self.super_users = set(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._by_type: dict[int, list[Binding]] = {}
        for b in self.bindings:
            self._by_type.setdefault(b.resource_type, []).append(b)

    def allowed(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = [b for b in self._by_type.get(resource_type, ()) if resource_matches(b, resource_type, name)]
        if not acls:
            return self.allow_if_no_acl
        mine = [b for b in acls if b.principal in (principal, WILDCARD_PRINCIPAL) and b.host in (host, WILDCARD)]
        if any(b.permission == DENY and b.operation in (operation, ALL) for b in mine):
            return False
        ops = _IMPLIED.get(operation, (operation,))
        return any(b.permission == ALLOW and (b.operation in ops or b.operation == ALL) for b in mine)

    def any_allowed(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Kafka's authorizeByResourceType: could ``operation`` be allowed on some resource of the type?

        Used where Kafka accepts "WRITE on any topic" (InitProducerId without IDEMPOTENT_WRITE).
        A DENY of any pattern type must win where it covers what an ALLOW grants, or a principal
        denied everything by a PREFIXED rule would still pass: a wildcard DENY denies at once; an
        ALLOW is spoiled by a LITERAL DENY of the same name or by a PREFIXED DENY whose prefix
        starts the ALLOW's name (literal or prefix). Operations match exactly or through ALL, as
        in Kafka (no implied DESCRIBE here).
        """
        if principal in self.super_users:
            return True
        bindings = self._by_type.get(resource_type, ())
        deny_literal: set[str] = set()
        deny_prefixed: list[str] = []
        grants: list[Binding] = []
        for b in bindings:
            if b.principal not in (principal, WILDCARD_PRINCIPAL) or b.host not in (host, WILDCARD) \
                    or b.operation not in (operation, ALL):
                continue
            if b.permission == DENY:
                if b.pattern == LITERAL and b.name == WILDCARD:
                    return False
                if b.pattern == LITERAL:
                    deny_literal.add(b.name)
                else:
                    deny_prefixed.append(b.name)
            elif b.permission == ALLOW:
                grants.append(b)
        for g in grants:
            if g.pattern == LITERAL and g.name == WILDCARD:
                return True
        for g in grants:
            if g.pattern == LITERAL and g.name in deny_literal:
                continue
            if not any(g.name.startswith(prefix) for prefix in deny_prefixed):
                return True
        return self.allow_if_no_acl and not bindings

    def operations(self, principal: str, host: str, resource_type: int, name: str) -> int:
        """KIP-430 authorized operations bit field."""
        bits = 0
        for op in SUPPORTED[resource_type]:
            if self.allowed(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits
