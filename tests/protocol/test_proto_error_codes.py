"""The error-code table agrees with an independent client's table."""
from __future__ import annotations

import inspect

import kafka.errors as kafka_errors

from logan_ray.protocol import errors


def test_well_known_codes():
    assert errors.NONE == 0
    assert errors.UNKNOWN_SERVER_ERROR == -1
    assert errors.OFFSET_OUT_OF_RANGE == 1
    assert errors.CORRUPT_MESSAGE == 2
    assert errors.UNKNOWN_TOPIC_OR_PARTITION == 3
    assert errors.NOT_LEADER_OR_FOLLOWER == 6
    assert errors.MESSAGE_TOO_LARGE == 10
    assert errors.NOT_COORDINATOR == 16
    assert errors.INVALID_TOPIC_EXCEPTION == 17
    assert errors.REBALANCE_IN_PROGRESS == 27
    assert errors.UNSUPPORTED_VERSION == 35
    assert errors.TOPIC_ALREADY_EXISTS == 36
    assert errors.INVALID_PARTITIONS == 37
    assert errors.OUT_OF_ORDER_SEQUENCE_NUMBER == 45
    assert errors.UNSUPPORTED_COMPRESSION_TYPE == 76
    assert errors.MEMBER_ID_REQUIRED == 79
    assert errors.INVALID_RECORD == 87
    assert errors.UNKNOWN_TOPIC_ID == 100
    assert errors.error_name(3) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert errors.error_name(9999) == "UNKNOWN_ERROR_CODE_9999"


# kafka-python keeps older spellings of a few names; the numbers are what matters on the wire.
KAFKA_PYTHON_LEGACY_NAMES = {
    -1: "UNKNOWN", 0: "NO_ERROR", 6: "NOT_LEADER_FOR_PARTITION", 10: "MESSAGE_SIZE_TOO_LARGE",
    17: "INVALID_TOPIC", 39: "INVALID_REPLICATION_ASSIGNMENT",
    99: "POSITION_OUT_OF_RANGE",  # retired upstream: Kafka's table no longer lists 99
}


def test_every_code_kafka_python_knows_has_the_same_number_and_name():
    theirs = {
        cls.errno: cls.message
        for _, cls in inspect.getmembers(kafka_errors, inspect.isclass)
        if issubclass(cls, kafka_errors.BrokerResponseError) and isinstance(getattr(cls, "errno", None), int)
    }
    assert len(theirs) > 120
    for code, name in theirs.items():
        if KAFKA_PYTHON_LEGACY_NAMES.get(code) == name:
            continue
        assert errors.ERROR_NAMES.get(code) == name, (code, name)
    assert set(errors.ERROR_NAMES) >= set(theirs) - {99}


def test_retriable_codes_match_kafka_python():
    for _, cls in inspect.getmembers(kafka_errors, inspect.isclass):
        if issubclass(cls, kafka_errors.BrokerResponseError) and isinstance(getattr(cls, "errno", None), int):
            if cls.retriable and cls.errno in (errors.NOT_LEADER_OR_FOLLOWER, errors.REQUEST_TIMED_OUT,
                                                errors.NOT_COORDINATOR, errors.UNKNOWN_TOPIC_OR_PARTITION):
                assert cls.errno in errors.RETRIABLE
    assert errors.INVALID_RECORD not in errors.RETRIABLE
    assert errors.UNSUPPORTED_VERSION not in errors.RETRIABLE
