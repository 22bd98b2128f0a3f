"""Authorized operations (KIP-430) are those Kafka reports when no authorizer is configured."""
from logan_ray.gateway.acl_ops import OMITTED, authorized_operations


def ops(bits: int) -> set[int]:
    return {i for i in range(32) if bits >> i & 1}


def test_not_requested_is_kafkas_omitted_marker():
    assert authorized_operations("cluster", False) == OMITTED == -(2**31)


def test_cluster_topic_and_group_get_every_operation_their_resource_supports():
    # AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
    # DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12 (AclEntry.supportedOperations)
    assert ops(authorized_operations("cluster", True)) == {5, 7, 8, 9, 10, 11, 12}
    assert ops(authorized_operations("topic", True)) == {3, 4, 5, 6, 7, 8, 10, 11}
    assert ops(authorized_operations("group", True)) == {3, 6, 8}
