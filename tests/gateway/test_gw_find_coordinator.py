"""FindCoordinator names the gateway of the node leading each group's __consumer_offsets partition,
and a group request this node's coordinator refuses goes out as NOT_COORDINATOR (no Ray: the
gateway's context is faked)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from logan_ray.actors.names import broker_id
from logan_ray.common.errors import NotCoordinatorError
from logan_ray.gateway import groups
from logan_ray.groups.offsets_log import partition_for_group
from logan_ray.protocol import errors as E

A, B, C = "a" * 56, "b" * 56, "c" * 56


class _Remote:
    def __init__(self, fn):
        self.remote = fn


class FakeCluster:
    def __init__(self, leaders, offline=(), gateways=None):
        self.node_id = A
        self.leaders, self.offline = leaders, list(offline)
        self.endpoints = gateways if gateways is not None else {A: ("127.0.0.1", 9001), B: ("127.0.0.1", 9002)}

        async def route_with_ids(topics):  # __consumer_offsets and __transaction_state alike
            return {t: {"partitions": [(None, n) for n in self.leaders],
                        "leader_epochs": [0] * len(self.leaders), "offline": self.offline} for t in topics}
        self.router = SimpleNamespace(route_with_ids=_Remote(route_with_ids))

    async def gateways(self, fresh=False):
        return dict(self.endpoints)


def _group_on(partition: int, n: int = 8) -> str:
    return next(g for g in (f"g{i}" for i in range(10_000)) if partition_for_group(g, n) == partition)


def _find(gw, version, body):
    return asyncio.run(groups.find_coordinator(gw, None, SimpleNamespace(api_version=version), body))


def test_each_key_gets_the_gateway_of_its_partition_leader():
    leaders = [A, B, C, A, B, C, A, B]
    gw = SimpleNamespace(cluster=FakeCluster(leaders, offline=[6]))
    on_b, on_c, offline = _group_on(1), _group_on(2), _group_on(6)
    r = _find(gw, 4, {"key_type": 0, "coordinator_keys": [on_b, on_c, offline]})["coordinators"]
    assert [(c["key"], c["error_code"], c["node_id"], c["port"]) for c in r] == [
        (on_b, E.NONE, broker_id(B), 9002),
        (on_c, E.COORDINATOR_NOT_AVAILABLE, -1, -1),  # its leader's node has no gateway
        (offline, E.COORDINATOR_NOT_AVAILABLE, -1, -1)]  # no leader (its node is gone)
    old = _find(gw, 3, {"key_type": 0, "key": _group_on(0)})
    assert (old["error_code"], old["node_id"], old["port"]) == (E.NONE, broker_id(A), 9001)
    # a transactional id's coordinator: the leader of its __transaction_state partition
    tx = _find(gw, 4, {"key_type": 1, "coordinator_keys": [_group_on(1), _group_on(6)]})["coordinators"]
    assert [(c["error_code"], c["node_id"], c["port"]) for c in tx] == [
        (E.NONE, broker_id(B), 9002), (E.COORDINATOR_NOT_AVAILABLE, -1, -1)]


def test_a_group_this_node_does_not_coordinate_is_answered_not_coordinator():
    async def refuse(*args):
        raise NotCoordinatorError("led elsewhere")

    coordinator = SimpleNamespace(offset_commit=_Remote(refuse))
    gw = SimpleNamespace(cluster=FakeCluster([A] * 8), group_coordinator=coordinator, group_coordinator_node=A)
    body = {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]}
    out = asyncio.run(groups.offset_commit(gw, None, SimpleNamespace(api_version=9), body))
    assert out["topics"][0]["partitions"][0]["error_code"] == E.NOT_COORDINATOR
    assert gw.group_coordinator is coordinator  # this node's coordinator is fine: it just does not lead "g"
