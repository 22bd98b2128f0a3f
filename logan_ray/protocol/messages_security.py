"""Schemas of the security APIs: SASL, SCRAM credentials, ACLs and client quotas.

Facts from Apache Kafka's message definitions (SaslHandshake, SaslAuthenticate,
DescribeUserScramCredentials, AlterUserScramCredentials, DescribeAcls, CreateAcls,
DeleteAcls, DescribeClientQuotas, AlterClientQuotas); names are the upstream field
names in snake_case.
"""
from __future__ import annotations

from .schema import BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, STRING, A, Api, F, S

SASL_HANDSHAKE = Api(
    17, "SaslHandshake", "0-1", "none",
    request=[F("mechanism", STRING)],
    response=[
        F("error_code", INT16),
        F("mechanisms", A(STRING)),
    ],
)

SASL_AUTHENTICATE = Api(
    36, "SaslAuthenticate", "0-2", "2+",
    request=[F("auth_bytes", BYTES)],
    response=[
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("auth_bytes", BYTES),
        F("session_lifetime_ms", INT64, "1+", default=0),
    ],
)

DESCRIBE_USER_SCRAM_CREDENTIALS = Api(
    50, "DescribeUserScramCredentials", "0", "0+",
    request=[
        F("users", A(S(F("name", STRING))), nullable="0+", default=None),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("results", A(S(
            F("user", STRING),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
            F("credential_infos", A(S(
                F("mechanism", INT8),
                F("iterations", INT32),
            ))),
        ))),
    ],
)

ALTER_USER_SCRAM_CREDENTIALS = Api(
    51, "AlterUserScramCredentials", "0", "0+",
    request=[
        F("deletions", A(S(
            F("name", STRING),
            F("mechanism", INT8),
        ))),
        F("upsertions", A(S(
            F("name", STRING),
            F("mechanism", INT8),
            F("iterations", INT32),
            F("salt", BYTES),
            F("salted_password", BYTES),
        ))),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("results", A(S(
            F("user", STRING),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
        ))),
    ],
)

_ACL_FILTER = (
    F("resource_type_filter", INT8),
    F("resource_name_filter", STRING, nullable="0+", default=None),
    F("pattern_type_filter", INT8, "1+", default=3),
    F("principal_filter", STRING, nullable="0+", default=None),
    F("host_filter", STRING, nullable="0+", default=None),
    F("operation", INT8),
    F("permission_type", INT8),
)

DESCRIBE_ACLS = Api(
    29, "DescribeAcls", "0-3", "2+",
    request=list(_ACL_FILTER),
    response=[
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("resources", A(S(
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("pattern_type", INT8, "1+", default=3),
            F("acls", A(S(
                F("principal", STRING),
                F("host", STRING),
                F("operation", INT8),
                F("permission_type", INT8),
            ))),
        ))),
    ],
)

CREATE_ACLS = Api(
    30, "CreateAcls", "0-3", "2+",
    request=[
        F("creations", A(S(
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("resource_pattern_type", INT8, "1+", default=3),
            F("principal", STRING),
            F("host", STRING),
            F("operation", INT8),
            F("permission_type", INT8),
        ))),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("results", A(S(
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
        ))),
    ],
)

DELETE_ACLS = Api(
    31, "DeleteAcls", "0-3", "2+",
    request=[
        F("filters", A(S(*_ACL_FILTER))),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("filter_results", A(S(
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
            F("matching_acls", A(S(
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=None),
                F("resource_type", INT8),
                F("resource_name", STRING),
                F("pattern_type", INT8, "1+", default=3),
                F("principal", STRING),
                F("host", STRING),
                F("operation", INT8),
                F("permission_type", INT8),
            ))),
        ))),
    ],
)

_QUOTA_ENTITY = A(S(
    F("entity_type", STRING),
    F("entity_name", STRING, nullable="0+", default=None),
))

DESCRIBE_CLIENT_QUOTAS = Api(
    48, "DescribeClientQuotas", "0-1", "1+",
    request=[
        F("components", A(S(
            F("entity_type", STRING),
            F("match_type", INT8),
            F("match", STRING, nullable="0+", default=None),
        ))),
        F("strict", BOOL),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("entries", A(S(
            F("entity", _QUOTA_ENTITY),
            F("values", A(S(
                F("key", STRING),
                F("value", FLOAT64),
            ))),
        )), nullable="0+", default=None),
    ],
)

ALTER_CLIENT_QUOTAS = Api(
    49, "AlterClientQuotas", "0-1", "1+",
    request=[
        F("entries", A(S(
            F("entity", _QUOTA_ENTITY),
            F("ops", A(S(
                F("key", STRING),
                F("value", FLOAT64),
                F("remove", BOOL),
            ))),
        ))),
        F("validate_only", BOOL),
    ],
    response=[
        F("throttle_time_ms", INT32),
        F("entries", A(S(
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
            F("entity", _QUOTA_ENTITY),
        ))),
    ],
)

APIS = (
    SASL_HANDSHAKE,
    SASL_AUTHENTICATE,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    ALTER_USER_SCRAM_CREDENTIALS,
    DESCRIBE_ACLS,
    CREATE_ACLS,
    DELETE_ACLS,
    DESCRIBE_CLIENT_QUOTAS,
    ALTER_CLIENT_QUOTAS,
)
