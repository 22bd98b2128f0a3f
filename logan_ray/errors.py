"""Every typed error a logan-ray user can catch, in one place.

This is the public face of errors; each is defined once, below the layers that
raise it: storage's next to the code that raises them (``logan_ray.storage``
imports nothing of Ray or of this package), the others in
``logan_ray.common.errors`` (shared by the Ray actors and the public face).
"""
from __future__ import annotations

from logan_ray.common.errors import (  # noqa: F401  (re-exported)
    BrokerFencedError,
    CommitFailedError,
    DuplicateSequenceError,
    FencedInstanceIdError,
    GroupError,
    GroupIdNotFoundError,
    InconsistentGroupProtocolError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    LeaderNotAvailableError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NoReassignmentInProgressError,
    NonEmptyGroupError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    NotRunningError,
    PartitionHibernatedError,
    RebalanceInProgressError,
    RequestTimedOutError,
    SerializationError,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from logan_ray.storage.dir_lock import DataDirLockedError  # noqa: F401  (re-exported)
from logan_ray.storage.errors import (  # noqa: F401  (re-exported)
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTxnStateError,
    KafkaStorageError,
    LogClosedError,
    LoganError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnknownLeaderEpochError,
    UnsupportedCompressionError,
)
from logan_ray.storage.producer_state import (  # noqa: F401
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)



class TransactionError(LoganError):
    """A transactional call of the Python producer failed; ``code`` is the Kafka error code the
    transaction or group coordinator answered (e.g. CONCURRENT_TRANSACTIONS 51 after retries ran out)."""

    def __init__(self, message: str = "", code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class ProducerFencedError(InvalidProducerEpochError):
    """A newer producer with the same ``transactional_id`` bumped the epoch (Kafka's PRODUCER_FENCED,
    or INVALID_PRODUCER_EPOCH from a partition): this producer can only be closed.

    A subclass of InvalidProducerEpochError, so code catching the partition's error catches it too."""

    code = 90  # PRODUCER_FENCED


class ExactlyOnceCommitError(TransactionError):
    """An exactly-once write (``logan_ray.data.write_topic(..., exactly_once=True)``) could not commit
    some of its tasks' transactions. ``failed`` maps each such transactional id to its error (a
    ProducerFencedError means it was aborted: superseded, or past its transaction timeout);
    ``committed`` lists the ids whose records are visible. The write is then partly visible to
    read_committed readers: the records of ``failed`` never will be."""

    def __init__(self, failed: dict, committed: list) -> None:
        self.failed = dict(failed)
        self.committed = list(committed)
        names = ", ".join(f"{tid} ({type(e).__name__}: {e})" for tid, e in sorted(self.failed.items()))
        super().__init__(f"{len(self.failed)} of {len(self.failed) + len(self.committed)} task transactions "
                         f"did not commit: {names}")

    def __reduce__(self) -> tuple:  # picklable (e.g. through Ray) despite the keyword-rich __init__
        return type(self), (self.failed, self.committed)


__all__ = [name for name in dir() if name.endswith("Error")]
