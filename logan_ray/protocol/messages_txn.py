"""Schemas of the transaction APIs (issue 35): the client's and the coordinator's.

Facts from Apache Kafka's message definitions at the commit vendored in
``tests/protocol/kafka_messages`` (trunk, October 2024); names are the upstream
field names in snake_case. InitProducerId (22) lives in ``messages_admin.py``.

``logan_ray/gateway/txn.py`` serves them all but WriteTxnMarkers (the coordinator writes
markers through the partition actors), which ApiVersions therefore does not announce
(``codec.NOT_YET_SERVED``).
"""
from __future__ import annotations

from .schema import BOOL, INT16, INT32, INT64, STRING, A, Api, F, S

# AddPartitionsToTxn's "AddPartitionsToTxnTopic" common struct.
_ADD_TOPIC = S(
    F("name", STRING),
    F("partitions", A(INT32)),
)

# AddPartitionsToTxn's "AddPartitionsToTxnTopicResult" common struct.
_ADD_TOPIC_RESULT = S(
    F("name", STRING),
    F("results_by_partition", A(S(
        F("partition_index", INT32),
        F("partition_error_code", INT16),
    ))),
)

ADD_PARTITIONS_TO_TXN = Api(
    24, "AddPartitionsToTxn", "0-5", "3+",
    request=[
        # v4+: brokers batch several transactions and may only verify (KIP-890).
        F("transactions", A(S(
            F("transactional_id", STRING, "4+"),
            F("producer_id", INT64, "4+"),
            F("producer_epoch", INT16, "4+"),
            F("verify_only", BOOL, "4+", default=False),
            F("topics", A(_ADD_TOPIC), "4+"),
        )), "4+"),
        F("v3_and_below_transactional_id", STRING, "0-3"),
        F("v3_and_below_producer_id", INT64, "0-3"),
        F("v3_and_below_producer_epoch", INT16, "0-3"),
        F("v3_and_below_topics", A(_ADD_TOPIC), "0-3"),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("error_code", INT16, "4+"),
        F("results_by_transaction", A(S(
            F("transactional_id", STRING, "4+"),
            F("topic_results", A(_ADD_TOPIC_RESULT), "4+"),
        )), "4+"),
        F("results_by_topic_v3_and_below", A(_ADD_TOPIC_RESULT), "0-3"),
    ],
)

ADD_OFFSETS_TO_TXN = Api(
    25, "AddOffsetsToTxn", "0-4", "3+",
    request=[
        F("transactional_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("group_id", STRING),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
    ],
)

END_TXN = Api(
    26, "EndTxn", "0-5", "3+",
    request=[
        F("transactional_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("committed", BOOL),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        # v5 (KIP-890 part 2): every end bumps the epoch, so the answer carries it.
        F("producer_id", INT64, "5+", default=-1),
        F("producer_epoch", INT16, "5+", default=-1),
    ],
    unstable="5+",  # upstream marks v5 latestVersionUnstable at the vendored commit
)

WRITE_TXN_MARKERS = Api(
    27, "WriteTxnMarkers", "0-1", "1+",
    request=[
        F("markers", A(S(
            F("producer_id", INT64),
            F("producer_epoch", INT16),
            F("transaction_result", BOOL),
            F("topics", A(S(
                F("name", STRING),
                F("partition_indexes", A(INT32)),
            ))),
            F("coordinator_epoch", INT32),
        ))),
    ],
    response=[
        F("markers", A(S(
            F("producer_id", INT64),
            F("topics", A(S(
                F("name", STRING),
                F("partitions", A(S(
                    F("partition_index", INT32),
                    F("error_code", INT16),
                ))),
            ))),
        ))),
    ],
)

TXN_OFFSET_COMMIT = Api(
    28, "TxnOffsetCommit", "0-4", "3+",
    request=[
        F("transactional_id", STRING),
        F("group_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("generation_id", INT32, "3+", default=-1),
        F("member_id", STRING, "3+", default=""),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("committed_offset", INT64),
                F("committed_leader_epoch", INT32, "2+", default=-1),
                F("committed_metadata", STRING, nullable="0+"),
            ))),
        ))),
    ],
    response=[
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

DESCRIBE_TRANSACTIONS = Api(
    65, "DescribeTransactions", "0", "0+",
    request=[
        F("transactional_ids", A(STRING)),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("transaction_states", A(S(
            F("error_code", INT16),
            F("transactional_id", STRING),
            F("transaction_state", STRING),
            F("transaction_timeout_ms", INT32),
            F("transaction_start_time_ms", INT64),
            F("producer_id", INT64),
            F("producer_epoch", INT16),
            F("topics", A(S(
                F("topic", STRING),
                F("partitions", A(INT32)),
            ))),
        ))),
    ],
)

LIST_TRANSACTIONS = Api(
    66, "ListTransactions", "0-1", "0+",
    request=[
        F("state_filters", A(STRING)),
        F("producer_id_filters", A(INT64)),
        F("duration_filter", INT64, "1+", default=-1),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("unknown_state_filters", A(STRING)),
        F("transaction_states", A(S(
            F("transactional_id", STRING),
            F("producer_id", INT64),
            F("transaction_state", STRING),
        ))),
    ],
)

APIS = (
    ADD_PARTITIONS_TO_TXN,
    ADD_OFFSETS_TO_TXN,
    END_TXN,
    WRITE_TXN_MARKERS,
    TXN_OFFSET_COMMIT,
    DESCRIBE_TRANSACTIONS,
    LIST_TRANSACTIONS,
)
