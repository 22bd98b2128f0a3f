"""Authorized operations (KIP-430) as a broker without an authorizer reports them.

logan-ray has no ACLs, so every client may do everything; Kafka answers that
case with every operation the resource type supports (AclEntry.supportedOperations),
packed as bits ``1 << AclOperation.code``. When the request did not ask for them
the field carries Kafka's "omitted" marker, INT32_MIN.
"""
from __future__ import annotations

OMITTED = -(2**31)

# AclOperation codes (org.apache.kafka.common.acl.AclOperation)
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12

_SUPPORTED = {
    "topic": (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    "cluster": (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE),
    "group": (READ, DESCRIBE, DELETE),
}


def authorized_operations(resource: str, requested: bool) -> int:
    """The bit field for ``resource`` ("topic", "cluster", "group"), or OMITTED when not requested."""
    if not requested:
        return OMITTED
    bits = 0
    for op in _SUPPORTED[resource]:
        bits |= 1 << op
    return bits
