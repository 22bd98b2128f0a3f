"""Schemas of the consumer-group APIs (classic group protocol) and FindCoordinator.

Facts from Apache Kafka's message definitions (3.x for the oldest versions, 4.x for
the newest); names are the upstream field names in snake_case. Group member metadata
and assignments stay opaque ``bytes`` here: their inner "consumer protocol" layout
is the group coordinator's business, not the wire codec's.
"""
from __future__ import annotations

from .schema import BOOL, BYTES, INT8, INT16, INT32, INT64, STRING, UUID, A, Api, F, S

INT32_MIN = -(2**31)

FIND_COORDINATOR = Api(
    10, "FindCoordinator", "0-6", "3+",
    request=[
        F("key", STRING, "0-3"),
        F("key_type", INT8, "1+", default=0),
        F("coordinator_keys", A(STRING), "4+"),
    ],
    response=[
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "0-3"),
        F("error_message", STRING, "1-3", nullable="1-3"),
        F("node_id", INT32, "0-3"),
        F("host", STRING, "0-3"),
        F("port", INT32, "0-3"),
        F("coordinators", A(S(
            F("key", STRING, "4+"),
            F("node_id", INT32, "4+"),
            F("host", STRING, "4+"),
            F("port", INT32, "4+"),
            F("error_code", INT16, "4+"),
            F("error_message", STRING, "4+", nullable="4+"),
        )), "4+"),
    ],
)

JOIN_GROUP = Api(
    11, "JoinGroup", "0-9", "6+",
    request=[
        F("group_id", STRING),
        F("session_timeout_ms", INT32),
        F("rebalance_timeout_ms", INT32, "1+", default=-1),
        F("member_id", STRING),
        F("group_instance_id", STRING, "5+", nullable="5+", default=None),
        F("protocol_type", STRING),
        F("protocols", A(S(
            F("name", STRING),
            F("metadata", BYTES),
        ))),
        F("reason", STRING, "8+", nullable="8+", default=None),
    ],
    response=[
        F("throttle_time_ms", INT32, "2+"),
        F("error_code", INT16),
        F("generation_id", INT32, default=-1),
        F("protocol_type", STRING, "7+", nullable="7+", default=None),
        F("protocol_name", STRING, nullable="7+"),
        F("leader", STRING),
        F("skip_assignment", BOOL, "9+", default=False),
        F("member_id", STRING),
        F("members", A(S(
            F("member_id", STRING),
            F("group_instance_id", STRING, "5+", nullable="5+", default=None),
            F("metadata", BYTES),
        ))),
    ],
)

SYNC_GROUP = Api(
    14, "SyncGroup", "0-5", "4+",
    request=[
        F("group_id", STRING),
        F("generation_id", INT32),
        F("member_id", STRING),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
        F("protocol_type", STRING, "5+", nullable="5+", default=None),
        F("protocol_name", STRING, "5+", nullable="5+", default=None),
        F("assignments", A(S(
            F("member_id", STRING),
            F("assignment", BYTES),
        ))),
    ],
    response=[
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
        F("protocol_type", STRING, "5+", nullable="5+", default=None),
        F("protocol_name", STRING, "5+", nullable="5+", default=None),
        F("assignment", BYTES),
    ],
)

HEARTBEAT = Api(
    12, "Heartbeat", "0-4", "4+",
    request=[
        F("group_id", STRING),
        F("generation_id", INT32),
        F("member_id", STRING),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
    ],
    response=[
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
    ],
)

LEAVE_GROUP = Api(
    13, "LeaveGroup", "0-5", "4+",
    request=[
        F("group_id", STRING),
        F("member_id", STRING, "0-2"),
        F("members", A(S(
            F("member_id", STRING, "3+"),
            F("group_instance_id", STRING, "3+", nullable="3+", default=None),
            F("reason", STRING, "5+", nullable="5+", default=None),
        )), "3+"),
    ],
    response=[
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
        F("members", A(S(
            F("member_id", STRING, "3+"),
            F("group_instance_id", STRING, "3+", nullable="3+"),
            F("error_code", INT16, "3+"),
        )), "3+"),
    ],
)

OFFSET_COMMIT = Api(
    8, "OffsetCommit", "0-10", "8+",
    request=[
        F("group_id", STRING),
        F("generation_id_or_member_epoch", INT32, "1+", default=-1),
        F("member_id", STRING, "1+"),
        F("group_instance_id", STRING, "7+", nullable="7+", default=None),
        F("retention_time_ms", INT64, "2-4", default=-1),
        F("topics", A(S(
            F("name", STRING, "0-9"),
            F("topic_id", UUID, "10+"),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("committed_offset", INT64),
                F("committed_leader_epoch", INT32, "6+", default=-1),
                F("commit_timestamp", INT64, "1", default=-1),
                F("committed_metadata", STRING, nullable="0+"),
            ))),
        ))),
    ],
    response=[
        F("throttle_time_ms", INT32, "3+"),
        F("topics", A(S(
            F("name", STRING, "0-9"),
            F("topic_id", UUID, "10+"),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("error_code", INT16),
            ))),
        ))),
    ],
)

OFFSET_FETCH = Api(
    9, "OffsetFetch", "0-10", "6+",
    request=[
        F("group_id", STRING, "0-7"),
        F("topics", A(S(
            F("name", STRING, "0-7"),
            F("partition_indexes", A(INT32), "0-7"),
        )), "0-7", nullable="2-7"),
        F("groups", A(S(
            F("group_id", STRING, "8+"),
            F("member_id", STRING, "9+", nullable="9+", default=None),
            F("member_epoch", INT32, "9+", default=-1),
            F("topics", A(S(
                F("name", STRING, "8-9"),
                F("topic_id", UUID, "10+"),
                F("partition_indexes", A(INT32), "8+"),
            )), "8+", nullable="8+"),
        )), "8+"),
        F("require_stable", BOOL, "7+", default=False),
    ],
    response=[
        F("throttle_time_ms", INT32, "3+"),
        F("topics", A(S(
            F("name", STRING, "0-7"),
            F("partitions", A(S(
                F("partition_index", INT32, "0-7"),
                F("committed_offset", INT64, "0-7"),
                F("committed_leader_epoch", INT32, "5-7", default=-1),
                F("metadata", STRING, "0-7", nullable="0-7"),
                F("error_code", INT16, "0-7"),
            )), "0-7"),
        )), "0-7"),
        F("error_code", INT16, "2-7", default=0),
        F("groups", A(S(
            F("group_id", STRING, "8+"),
            F("topics", A(S(
                F("name", STRING, "8-9"),
                F("topic_id", UUID, "10+"),
                F("partitions", A(S(
                    F("partition_index", INT32, "8+"),
                    F("committed_offset", INT64, "8+"),
                    F("committed_leader_epoch", INT32, "8+", default=-1),
                    F("metadata", STRING, "8+", nullable="8+"),
                    F("error_code", INT16, "8+"),
                )), "8+"),
            )), "8+"),
            F("error_code", INT16, "8+", default=0),
        )), "8+"),
    ],
)

LIST_GROUPS = Api(
    16, "ListGroups", "0-5", "3+",
    request=[
        F("states_filter", A(STRING), "4+"),
        F("types_filter", A(STRING), "5+"),
    ],
    response=[
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
        F("groups", A(S(
            F("group_id", STRING),
            F("protocol_type", STRING),
            F("group_state", STRING, "4+"),
            F("group_type", STRING, "5+"),
        ))),
    ],
)

DESCRIBE_GROUPS = Api(
    15, "DescribeGroups", "0-6", "5+",
    request=[
        F("groups", A(STRING)),
        F("include_authorized_operations", BOOL, "3+"),
    ],
    response=[
        F("throttle_time_ms", INT32, "1+"),
        F("groups", A(S(
            F("error_code", INT16),
            F("error_message", STRING, "6+", nullable="6+", default=None),
            F("group_id", STRING),
            F("group_state", STRING),
            F("protocol_type", STRING),
            F("protocol_data", STRING),
            F("members", A(S(
                F("member_id", STRING),
                F("group_instance_id", STRING, "4+", nullable="4+", default=None),
                F("client_id", STRING),
                F("client_host", STRING),
                F("member_metadata", BYTES),
                F("member_assignment", BYTES),
            ))),
            F("authorized_operations", INT32, "3+", default=INT32_MIN),
        ))),
    ],
)

DELETE_GROUPS = Api(
    42, "DeleteGroups", "0-2", "2+",
    request=[
        F("groups_names", A(STRING)),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("results", A(S(
            F("group_id", STRING),
            F("error_code", INT16),
        ))),
    ],
)

OFFSET_DELETE = Api(
    47, "OffsetDelete", "0", "none",
    request=[
        F("group_id", STRING),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
            ))),
        ))),
    ],
    response=[
        F("error_code", INT16),
        F("throttle_time_ms", INT32),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("error_code", INT16),
            ))),
        ))),
    ],
)

APIS = (
    FIND_COORDINATOR,
    JOIN_GROUP,
    SYNC_GROUP,
    HEARTBEAT,
    LEAVE_GROUP,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    LIST_GROUPS,
    DESCRIBE_GROUPS,
    DELETE_GROUPS,
    OFFSET_DELETE,
)
