"""Every typed error a logan-ray user can catch, in one place.

Storage errors are defined next to the code that raises them (``logan_ray.storage``
imports nothing of Ray or of this package) and re-exported here.
"""
from __future__ import annotations

from logan_ray.storage.errors import (  # noqa: F401  (re-exported)
    CorruptRecordError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTimestampError,
    LogClosedError,
    LoganError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)


class UnknownTopicError(LoganError):
    """The topic does not exist (and auto-create is off or not applicable)."""

    code = 3  # UNKNOWN_TOPIC_OR_PARTITION


class UnknownPartitionError(LoganError):
    """The topic exists but has no such partition."""

    code = 3  # UNKNOWN_TOPIC_OR_PARTITION


class InvalidTopicError(LoganError):
    """A topic name breaks Kafka's rules."""

    code = 17  # INVALID_TOPIC_EXCEPTION


class TopicExistsError(LoganError):
    code = 36  # TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(LoganError):
    code = 37  # INVALID_PARTITIONS


class InvalidReplicationFactorError(LoganError):
    code = 38  # INVALID_REPLICATION_FACTOR


class RequestTimedOutError(LoganError):
    code = 7  # REQUEST_TIMED_OUT
    retriable = True


class NotRunningError(LoganError):
    """No logan-ray broker is reachable on the Ray cluster."""


class OutOfOrderSequenceError(LoganError):
    code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(LoganError):
    code = 46  # DUPLICATE_SEQUENCE_NUMBER


class SerializationError(LoganError):
    """A key or value could not be (de)serialized by the chosen serializer."""


__all__ = [name for name in dir() if name.endswith("Error")]
