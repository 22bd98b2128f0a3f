"""Every typed error a logan-ray user can catch, in one place.

This is the public face of errors; each is defined once, below the layers that
raise it: storage's next to the code that raises them (``logan_ray.storage``
imports nothing of Ray or of this package), the others in
``logan_ray.common.errors`` (shared by the Ray actors and the public face).
"""
from __future__ import annotations

from logan_ray.common.errors import (  # noqa: F401  (re-exported)
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

__all__ = [name for name in dir() if name.endswith("Error")]
