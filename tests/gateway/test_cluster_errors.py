"""Which Kafka error a client gets when the call to a partition's actor fails inside Ray.

No Ray runtime: the exceptions are made by hand, as Ray raises them to the gateway.
"""
from __future__ import annotations

import ray.exceptions

from logan_ray.gateway.cluster import error_code, is_stale_route
from logan_ray.protocol import errors as codes


def test_an_actor_ray_cannot_place_is_a_retriable_not_leader_and_a_stale_route():
    # Ray refuses a new actor on a node it drains: the partition's leadership is moving, so the
    # client refreshes its metadata and retries (UNKNOWN_SERVER_ERROR would fail its records)
    exc = ray.exceptions.ActorUnschedulableError("the node specified via NodeAffinitySchedulingStrategy is draining")
    assert error_code(exc) == codes.NOT_LEADER_OR_FOLLOWER
    assert is_stale_route(exc)


def test_an_unexpected_error_stays_unknown_server_error_and_keeps_the_route():
    exc = RuntimeError("boom")
    assert error_code(exc) == codes.UNKNOWN_SERVER_ERROR
    assert not is_stale_route(exc)
