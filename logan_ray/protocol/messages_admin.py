"""Schemas of the admin APIs: topics, partitions, configs, records, producer ids, cluster.

Facts from Apache Kafka's message definitions (3.x for the oldest versions, 4.x for
the newest); names are the upstream field names in snake_case.
"""
from __future__ import annotations

from .schema import BOOL, INT8, INT16, INT32, INT64, STRING, UUID, A, Api, F, S

INT32_MIN = -(2**31)

CREATE_TOPICS = Api(
    19, "CreateTopics", "0-7", "5+",
    request=[
        F("topics", A(S(
            F("name", STRING),
            F("num_partitions", INT32),
            F("replication_factor", INT16),
            F("assignments", A(S(
                F("partition_index", INT32),
                F("broker_ids", A(INT32)),
            ))),
            F("configs", A(S(
                F("name", STRING),
                F("value", STRING, nullable="0+"),
            ))),
        ))),
        F("timeout_ms", INT32, default=60000),
        F("validate_only", BOOL, "1+", default=False),
    ],
    response=[
        F("throttle_time_ms", INT32, "2+"),
        F("topics", A(S(
            F("name", STRING),
            F("topic_id", UUID, "7+"),
            F("error_code", INT16),
            F("error_message", STRING, "1+", nullable="0+"),
            F("topic_config_error_code", INT16, "5+", tag=0),
            F("num_partitions", INT32, "5+", default=-1),
            F("replication_factor", INT16, "5+", default=-1),
            F("configs", A(S(
                F("name", STRING, "5+"),
                F("value", STRING, "5+", nullable="5+"),
                F("read_only", BOOL, "5+"),
                F("config_source", INT8, "5+", default=-1),
                F("is_sensitive", BOOL, "5+"),
            )), "5+", nullable="5+"),
        ))),
    ],
)

DELETE_TOPICS = Api(
    20, "DeleteTopics", "0-6", "4+",
    request=[
        F("topics", A(S(
            F("name", STRING, "6+", nullable="6+", default=None),
            F("topic_id", UUID, "6+"),
        )), "6+"),
        F("topic_names", A(STRING), "0-5"),
        F("timeout_ms", INT32),
    ],
    response=[
        F("throttle_time_ms", INT32, "1+"),
        F("responses", A(S(
            F("name", STRING, nullable="6+"),
            F("topic_id", UUID, "6+"),
            F("error_code", INT16),
            F("error_message", STRING, "5+", nullable="5+", default=None),
        ))),
    ],
)

CREATE_PARTITIONS = Api(
    37, "CreatePartitions", "0-3", "2+",
    request=[
        F("topics", A(S(
            F("name", STRING),
            F("count", INT32),
            F("assignments", A(S(
                F("broker_ids", A(INT32)),
            )), nullable="0+"),
        ))),
        F("timeout_ms", INT32),
        F("validate_only", BOOL),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("results", A(S(
            F("name", STRING),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
        ))),
    ],
)

DESCRIBE_CONFIGS = Api(
    32, "DescribeConfigs", "0-4", "4+",
    request=[
        F("resources", A(S(
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("configuration_keys", A(STRING), nullable="0+"),
        ))),
        F("include_synonyms", BOOL, "1+", default=False),
        F("include_documentation", BOOL, "3+", default=False),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("results", A(S(
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+"),
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("configs", A(S(
                F("name", STRING),
                F("value", STRING, nullable="0+"),
                F("read_only", BOOL),
                F("is_default", BOOL, "0"),
                F("config_source", INT8, "1+", default=-1),
                F("is_sensitive", BOOL),
                F("synonyms", A(S(
                    F("name", STRING, "1+"),
                    F("value", STRING, "1+", nullable="0+"),
                    F("source", INT8, "1+"),
                )), "1+"),
                F("config_type", INT8, "3+", default=0),
                F("documentation", STRING, "3+", nullable="0+"),
            ))),
        ))),
    ],
)

_ALTER_CONFIGS_RESPONSE = [
    F("throttle_time_ms", INT32),
    F("responses", A(S(
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+"),
        F("resource_type", INT8),
        F("resource_name", STRING),
    ))),
]

ALTER_CONFIGS = Api(
    33, "AlterConfigs", "0-2", "2+",
    request=[
        F("resources", A(S(
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("configs", A(S(
                F("name", STRING),
                F("value", STRING, nullable="0+"),
            ))),
        ))),
        F("validate_only", BOOL),
    ],
    response=_ALTER_CONFIGS_RESPONSE,
)

INCREMENTAL_ALTER_CONFIGS = Api(
    44, "IncrementalAlterConfigs", "0-1", "1+",
    request=[
        F("resources", A(S(
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("configs", A(S(
                F("name", STRING),
                F("config_operation", INT8),
                F("value", STRING, nullable="0+"),
            ))),
        ))),
        F("validate_only", BOOL),
    ],
    response=_ALTER_CONFIGS_RESPONSE,
)

DELETE_RECORDS = Api(
    21, "DeleteRecords", "0-2", "2+",
    request=[
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("offset", INT64),
            ))),
        ))),
        F("timeout_ms", INT32),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("low_watermark", INT64),
                F("error_code", INT16),
            ))),
        ))),
    ],
)

INIT_PRODUCER_ID = Api(
    22, "InitProducerId", "0-6", "2+",
    request=[
        F("transactional_id", STRING, nullable="0+"),
        F("transaction_timeout_ms", INT32),
        F("producer_id", INT64, "3+", default=-1),
        F("producer_epoch", INT16, "3+", default=-1),
        F("enable2_pc", BOOL, "6+", default=False),
        F("keep_prepared_txn", BOOL, "6+", default=False),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("producer_id", INT64, default=-1),
        F("producer_epoch", INT16),
        F("ongoing_txn_producer_id", INT64, "6+", default=-1),
        F("ongoing_txn_producer_epoch", INT16, "6+", default=-1),
    ],
    unstable="6+",  # upstream marks v6 (two-phase commit, KIP-939) as not yet stable
)

DESCRIBE_CLUSTER = Api(
    60, "DescribeCluster", "0-2", "0+",
    request=[
        F("include_cluster_authorized_operations", BOOL),
        F("endpoint_type", INT8, "1+", default=1),
        F("include_fenced_brokers", BOOL, "2+"),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("endpoint_type", INT8, "1+", default=1),
        F("cluster_id", STRING),
        F("controller_id", INT32, default=-1),
        F("brokers", A(S(
            F("broker_id", INT32),
            F("host", STRING),
            F("port", INT32),
            F("rack", STRING, nullable="0+", default=None),
            F("is_fenced", BOOL, "2+"),
        ))),
        F("cluster_authorized_operations", INT32, default=INT32_MIN),
    ],
)

ELECT_LEADERS = Api(
    43, "ElectLeaders", "0-2", "2+",
    request=[
        F("election_type", INT8, "1+"),
        F("topic_partitions", A(S(
            F("topic", STRING),
            F("partitions", A(INT32)),
        )), nullable="0+"),
        F("timeout_ms", INT32, default=60000),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("error_code", INT16, "1+"),
        F("replica_election_results", A(S(
            F("topic", STRING),
            F("partition_result", A(S(
                F("partition_id", INT32),
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=None),
            ))),
        ))),
    ],
)

ALTER_PARTITION_REASSIGNMENTS = Api(  # KIP-455; v1 adds allow_replication_factor_change (KIP-860)
    45, "AlterPartitionReassignments", "0-1", "0+",
    request=[
        F("timeout_ms", INT32, default=60000),
        F("allow_replication_factor_change", BOOL, "1+", default=True),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("replicas", A(INT32), nullable="0+", default=None),
            ))),
        ))),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("allow_replication_factor_change", BOOL, "1+", default=True),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("responses", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=None),
            ))),
        ))),
    ],
)

LIST_PARTITION_REASSIGNMENTS = Api(  # KIP-455
    46, "ListPartitionReassignments", "0", "0+",
    request=[
        F("timeout_ms", INT32, default=60000),
        F("topics", A(S(
            F("name", STRING),
            F("partition_indexes", A(INT32)),
        )), nullable="0+", default=None),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("replicas", A(INT32)),
                F("adding_replicas", A(INT32)),
                F("removing_replicas", A(INT32)),
            ))),
        ))),
    ],
)

APIS = (
    CREATE_TOPICS,
    DELETE_TOPICS,
    CREATE_PARTITIONS,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    DELETE_RECORDS,
    INIT_PRODUCER_ID,
    DESCRIBE_CLUSTER,
    ELECT_LEADERS,
    ALTER_PARTITION_REASSIGNMENTS,
    LIST_PARTITION_REASSIGNMENTS,
)
