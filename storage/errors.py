"""Typed storage errors.

Each error carries the Kafka error code a broker would answer with, so the
gateway can translate any storage failure into the right wire response without
a lookup table of its own.
"""
from __future__ import annotations


class LoganError(Exception):
    """Base of every logan-ray error; ``code`` is the Kafka protocol error code."""

    code: int = -1  # UNKNOWN_SERVER_ERROR
    retriable: bool = False


class CorruptRecordError(LoganError):
    """A batch failed validation (CRC, framing) on the wire or on disk."""

    code = 2  # CORRUPT_MESSAGE

    def __init__(self, message: str, *, path: str | None = None, position: int | None = None):
        if path is not None:
            message = f"{message} (file {path}, position {position})"
        super().__init__(message)
        self.path = path
        self.position = position


class InvalidRecordError(LoganError):
    """A batch is well framed but its content breaks a rule (magic, counts...).

    ``record_errors`` names the offending records as (index in the batch, message), which
    Produce v8+ returns so a client fails exactly those records (KIP-467).
    """

    code = 87  # INVALID_RECORD

    def __init__(self, message: str, record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = tuple(record_errors)

    def __reduce__(self):  # keep record_errors across Ray's pickling
        return (type(self), (str(self), self.record_errors))


class RecordTooLargeError(LoganError):
    """A batch exceeds ``max.message.bytes``."""

    code = 10  # MESSAGE_TOO_LARGE


class OffsetOutOfRangeError(LoganError):
    """A read asked for an offset outside [log start, log end]."""

    code = 1  # OFFSET_OUT_OF_RANGE


class InvalidConfigError(LoganError):
    """An unknown topic config name or a bad value."""

    code = 40  # INVALID_CONFIG


class UnsupportedCompressionError(LoganError):
    """A batch uses a compression codec id this build does not know."""

    code = 76  # UNSUPPORTED_COMPRESSION_TYPE


class InvalidTimestampError(LoganError):
    code = 32  # INVALID_TIMESTAMP


class LogClosedError(LoganError):
    """The partition log was closed (or deleted) while a call was using it."""

    code = 6  # NOT_LEADER_OR_FOLLOWER: the client should refresh and retry
    retriable = True


class InvalidTxnStateError(LoganError):
    """A transactional operation the broker cannot honour (logan-ray has no transactions yet)."""

    code = 48  # INVALID_TXN_STATE


class KafkaStorageError(LoganError):
    """The partition's disk failed (I/O error) or is full: nothing was acknowledged.

    After an fsync or write error the log is offline (appends and reads fail
    with this error) until it is reopened, which recovers it from what the disk
    really holds. A full disk leaves the log online: appends fail until space
    returns. ``appended`` is set when the data did reach the log before the
    failure (a flush after the append failed), so idempotent producer state can
    still record it and a retry is recognised as a duplicate.
    """

    code = 56  # KAFKA_STORAGE_ERROR
    retriable = True

    def __init__(self, message: str, *, appended: object = None):
        super().__init__(message)
        self.appended = appended


class FencedLeaderEpochError(LoganError):
    """The caller's leader epoch is older than this leader's (KIP-320): it must refresh its metadata."""

    code = 74  # FENCED_LEADER_EPOCH
    retriable = True


class UnknownLeaderEpochError(LoganError):
    """The caller's leader epoch is newer than this leader's: the leader has not caught up with the change yet."""

    code = 75  # UNKNOWN_LEADER_EPOCH
    retriable = True
