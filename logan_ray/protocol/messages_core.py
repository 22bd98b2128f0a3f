"""Schemas of the data-path APIs: ApiVersions, Metadata, Produce, Fetch, ListOffsets, OffsetForLeaderEpoch.

Written from the facts of Apache Kafka's message definitions (field order, types,
version ranges, defaults, tags). Versions cover both the 3.x definitions (which
still list Produce v0-2, Fetch v0-3, ListOffsets v0 used by old clients) and the
additions of 4.x (Produce v12-13, Fetch v18, Metadata v13, ListOffsets v11).
Names are the upstream field names in snake_case.
"""
from __future__ import annotations

from .schema import BOOL, INT8, INT16, INT32, INT64, RECORDS, STRING, UUID, A, Api, F, S

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

API_VERSIONS = Api(
    18, "ApiVersions", "0-4", "3+",
    request=[
        F("client_software_name", STRING, "3+"),
        F("client_software_version", STRING, "3+"),
    ],
    response=[
        F("error_code", INT16),
        F("api_keys", A(S(
            F("api_key", INT16),
            F("min_version", INT16),
            F("max_version", INT16),
        ))),
        F("throttle_time_ms", INT32, "1+"),
        F("supported_features", A(S(
            F("name", STRING, "3+"),
            F("min_version", INT16, "3+"),
            F("max_version", INT16, "3+"),
        )), "3+", tag=0),
        F("finalized_features_epoch", INT64, "3+", tag=1, default=-1),
        F("finalized_features", A(S(
            F("name", STRING, "3+"),
            F("max_version_level", INT16, "3+"),
            F("min_version_level", INT16, "3+"),
        )), "3+", tag=2),
        F("zk_migration_ready", BOOL, "3+", tag=3, default=False),
    ],
)

METADATA = Api(
    3, "Metadata", "0-13", "9+",
    request=[
        F("topics", A(S(
            F("topic_id", UUID, "10+"),
            F("name", STRING, nullable="10+"),
        )), nullable="1+"),
        F("allow_auto_topic_creation", BOOL, "4+", default=True),
        F("include_cluster_authorized_operations", BOOL, "8-10"),
        F("include_topic_authorized_operations", BOOL, "8+"),
    ],
    response=[
        F("throttle_time_ms", INT32, "3+"),
        F("brokers", A(S(
            F("node_id", INT32),
            F("host", STRING),
            F("port", INT32),
            F("rack", STRING, "1+", nullable="1+", default=None),
        ))),
        F("cluster_id", STRING, "2+", nullable="2+", default=None),
        F("controller_id", INT32, "1+", default=-1),
        F("topics", A(S(
            F("error_code", INT16),
            F("name", STRING, nullable="12+"),
            F("topic_id", UUID, "10+"),
            F("is_internal", BOOL, "1+", default=False),
            F("partitions", A(S(
                F("error_code", INT16),
                F("partition_index", INT32),
                F("leader_id", INT32),
                F("leader_epoch", INT32, "7+", default=-1),
                F("replica_nodes", A(INT32)),
                F("isr_nodes", A(INT32)),
                F("offline_replicas", A(INT32), "5+"),
            ))),
            F("topic_authorized_operations", INT32, "8+", default=INT32_MIN),
        ))),
        F("cluster_authorized_operations", INT32, "8-10", default=INT32_MIN),
        F("error_code", INT16, "13+"),
    ],
)

_LEADER_ID_AND_EPOCH = S(
    F("leader_id", INT32, default=-1),
    F("leader_epoch", INT32, default=-1),
)

_NODE_ENDPOINT = S(
    F("node_id", INT32),
    F("host", STRING),
    F("port", INT32),
    F("rack", STRING, nullable="0+", default=None),
)

PRODUCE = Api(
    0, "Produce", "0-13", "9+",
    request=[
        F("transactional_id", STRING, "3+", nullable="3+", default=None),
        F("acks", INT16),
        F("timeout_ms", INT32),
        F("topic_data", A(S(
            F("name", STRING, "0-12"),
            F("topic_id", UUID, "13+"),
            F("partition_data", A(S(
                F("index", INT32),
                F("records", RECORDS, nullable="0+"),
            ))),
        ))),
    ],
    response=[
        F("responses", A(S(
            F("name", STRING, "0-12"),
            F("topic_id", UUID, "13+"),
            F("partition_responses", A(S(
                F("index", INT32),
                F("error_code", INT16),
                F("base_offset", INT64),
                F("log_append_time_ms", INT64, "2+", default=-1),
                F("log_start_offset", INT64, "5+", default=-1),
                F("record_errors", A(S(
                    F("batch_index", INT32, "8+"),
                    F("batch_index_error_message", STRING, "8+", nullable="8+", default=None),
                )), "8+"),
                F("error_message", STRING, "8+", nullable="8+", default=None),
                F("current_leader", _LEADER_ID_AND_EPOCH, "10+", tag=0),
            ))),
        ))),
        F("throttle_time_ms", INT32, "1+", default=0),
        F("node_endpoints", A(_NODE_ENDPOINT), "10+", tag=0),
    ],
)

FETCH = Api(
    1, "Fetch", "0-18", "12+",
    request=[
        F("cluster_id", STRING, "12+", nullable="12+", tag=0, default=None),
        F("replica_id", INT32, "0-14", default=-1),
        F("replica_state", S(
            F("replica_id", INT32, "15+", default=-1),
            F("replica_epoch", INT64, "15+", default=-1),
        ), "15+", tag=1),
        F("max_wait_ms", INT32),
        F("min_bytes", INT32),
        F("max_bytes", INT32, "3+", default=INT32_MAX),
        F("isolation_level", INT8, "4+", default=0),
        F("session_id", INT32, "7+", default=0),
        F("session_epoch", INT32, "7+", default=-1),
        F("topics", A(S(
            F("topic", STRING, "0-12"),
            F("topic_id", UUID, "13+"),
            F("partitions", A(S(
                F("partition", INT32),
                F("current_leader_epoch", INT32, "9+", default=-1),
                F("fetch_offset", INT64),
                F("last_fetched_epoch", INT32, "12+", default=-1),
                F("log_start_offset", INT64, "5+", default=-1),
                F("partition_max_bytes", INT32),
                F("replica_directory_id", UUID, "17+", tag=0),
                F("high_watermark", INT64, "18+", tag=1, default=INT64_MAX),
            ))),
        ))),
        F("forgotten_topics_data", A(S(
            F("topic", STRING, "7-12"),
            F("topic_id", UUID, "13+"),
            F("partitions", A(INT32), "7+"),
        )), "7+"),
        F("rack_id", STRING, "11+", default=""),
    ],
    response=[
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "7+"),
        F("session_id", INT32, "7+", default=0),
        F("responses", A(S(
            F("topic", STRING, "0-12"),
            F("topic_id", UUID, "13+"),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("error_code", INT16),
                F("high_watermark", INT64),
                F("last_stable_offset", INT64, "4+", default=-1),
                F("log_start_offset", INT64, "5+", default=-1),
                F("diverging_epoch", S(
                    F("epoch", INT32, "12+", default=-1),
                    F("end_offset", INT64, "12+", default=-1),
                ), "12+", tag=0),
                F("current_leader", _LEADER_ID_AND_EPOCH, "12+", tag=1),
                F("snapshot_id", S(
                    F("end_offset", INT64, default=-1),
                    F("epoch", INT32, default=-1),
                ), "12+", tag=2),
                F("aborted_transactions", A(S(
                    F("producer_id", INT64, "4+"),
                    F("first_offset", INT64, "4+"),
                )), "4+", nullable="4+"),
                F("preferred_read_replica", INT32, "11+", default=-1),
                F("records", RECORDS, nullable="0+"),
            ))),
        ))),
        F("node_endpoints", A(_NODE_ENDPOINT), "16+", tag=0),
    ],
)

LIST_OFFSETS = Api(
    2, "ListOffsets", "0-11", "6+",
    request=[
        F("replica_id", INT32),
        F("isolation_level", INT8, "2+"),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("current_leader_epoch", INT32, "4+", default=-1),
                F("timestamp", INT64),
                F("max_num_offsets", INT32, "0", default=1),
            ))),
        ))),
        F("timeout_ms", INT32, "10+"),
    ],
    response=[
        F("throttle_time_ms", INT32, "2+"),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("error_code", INT16),
                F("old_style_offsets", A(INT64), "0"),
                F("timestamp", INT64, "1+", default=-1),
                F("offset", INT64, "1+", default=-1),
                F("leader_epoch", INT32, "4+", default=-1),
            ))),
        ))),
    ],
)

OFFSET_FOR_LEADER_EPOCH = Api(
    23, "OffsetForLeaderEpoch", "0-4", "4+",
    request=[
        F("replica_id", INT32, "3+", default=-2),
        F("topics", A(S(
            F("topic", STRING),
            F("partitions", A(S(
                F("partition", INT32),
                F("current_leader_epoch", INT32, "2+", default=-1),
                F("leader_epoch", INT32),
            ))),
        ))),
    ],
    response=[
        F("throttle_time_ms", INT32, "2+"),
        F("topics", A(S(
            F("topic", STRING),
            F("partitions", A(S(
                F("error_code", INT16),
                F("partition", INT32),
                F("leader_epoch", INT32, "1+", default=-1),
                F("end_offset", INT64, default=-1),
            ))),
        ))),
    ],
)

APIS = (API_VERSIONS, METADATA, PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH)
