"""Typed errors raised by the actors and the public face (storage's own are in ``logan_ray.storage.errors``).

Each carries the Kafka error code a broker answers with (``code``) and whether a
client may retry (``retriable``). Defined here, below both layers that raise or
catch them, so the Ray actors need nothing from the public face; users import
them from ``logan_ray.errors``, which re-exports every typed error.
"""
from __future__ import annotations

from logan_ray.storage.errors import LoganError


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


class InvalidRequestError(LoganError):
    """A well-formed request the broker will not carry out as asked (Kafka's INVALID_REQUEST), e.g. a
    broker setting that cannot change while the broker runs."""

    code = 42  # INVALID_REQUEST


class NotEnoughReplicasError(LoganError):
    """acks=all refused before the append: fewer in-sync replicas than ``min.insync.replicas``."""

    code = 19  # NOT_ENOUGH_REPLICAS
    retriable = True


class NotEnoughReplicasAfterAppendError(LoganError):
    """acks=all: the records are in the leader's log, but the ISR shrank below ``min.insync.replicas``."""

    code = 20  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
    retriable = True


class LeaderNotAvailableError(LoganError):
    """The partition's node is gone: its log lives there and nowhere else, so it waits for that node.

    ``node_id``/``node_ip`` name the awaited node. Retriable: it is served again once the node returns.
    """

    code = 5  # LEADER_NOT_AVAILABLE
    retriable = True

    def __init__(self, message: str = "", node_id: str | None = None, node_ip: str | None = None) -> None:
        super().__init__(message)
        self.node_id = node_id
        self.node_ip = node_ip

    def __reduce__(self):  # keep the node through Ray's pickling
        return (type(self), (str(self), self.node_id, self.node_ip))


class PartitionHibernatedError(LoganError):
    """The partition actor called has closed its log to hibernate (``partition.idle.ms``) and exits.

    It refused the call before doing anything, so the call is safe to repeat on the
    partition's next actor, which the router starts on that next use. Kafka clients
    see NOT_LEADER_OR_FOLLOWER, the error that makes them look the partition up again.
    """

    code = 6  # NOT_LEADER_OR_FOLLOWER
    retriable = True


class NotLeaderOrFollowerError(LoganError):
    """This replica no longer leads the partition: it is handing leadership over (a controlled move).

    Raised before anything was written, so the write may be repeated on the new
    leader; Kafka clients refresh their metadata and retry.
    """

    code = 6  # NOT_LEADER_OR_FOLLOWER
    retriable = True


class BrokerFencedError(NotLeaderOrFollowerError):
    """This node's broker lease ran out (its gateway cannot reach the controller, or it was stopped):
    NOT_LEADER_OR_FOLLOWER to the client, but the route is not stale. Asking the router again would not
    help (and across a network cut it waits for the link); the node drops its routes when it registers
    again under a new broker epoch."""


class RequestTimedOutError(LoganError):
    code = 7  # REQUEST_TIMED_OUT
    retriable = True


class NotRunningError(LoganError):
    """No logan-ray broker is reachable on the Ray cluster."""


class DuplicateSequenceError(LoganError):
    code = 46  # DUPLICATE_SEQUENCE_NUMBER


class SerializationError(LoganError):
    """A key or value could not be (de)serialized by the chosen serializer."""


# ------------------------------------------------------------ consumer groups
class GroupError(LoganError):
    """A consumer-group request failed; ``code`` is the Kafka error code the coordinator returned."""

    code = -1

    def __init__(self, message: str = "", code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class CommitFailedError(GroupError):
    """The commit was refused because the group rebalanced (stale generation, unknown member);
    the partitions may now belong to another member, so the records will be seen again there."""


class RebalanceInProgressError(GroupError):
    code = 27  # REBALANCE_IN_PROGRESS
    retriable = True


class NotCoordinatorError(GroupError):
    """This coordinator does not (or no longer) lead the group's ``__consumer_offsets`` partition:
    the partition moved to another node (a failover, a controlled move, a drain), whose
    coordinator rebuilt the group from the log. Nothing was changed; find the coordinator
    again (FindCoordinator) and retry there."""

    code = 16  # NOT_COORDINATOR
    retriable = True


class FencedInstanceIdError(GroupError):
    """Another consumer with the same ``group_instance_id`` took this one's place."""

    code = 82  # FENCED_INSTANCE_ID


class InconsistentGroupProtocolError(GroupError):
    """The group's members share no assignment strategy (or use another protocol type)."""

    code = 23  # INCONSISTENT_GROUP_PROTOCOL


class GroupIdNotFoundError(GroupError):
    code = 69  # GROUP_ID_NOT_FOUND


class NonEmptyGroupError(GroupError):
    """The group still has members (delete it or reset its offsets once they are gone)."""

    code = 68  # NON_EMPTY_GROUP



class InvalidReplicaAssignmentError(LoganError):
    """A reassignment's target replica list is empty, repeats a broker or names one that is not alive."""

    code = 39  # INVALID_REPLICA_ASSIGNMENT


class NoReassignmentInProgressError(LoganError):
    """A reassignment was cancelled where none is under way."""

    code = 85  # NO_REASSIGNMENT_IN_PROGRESS
