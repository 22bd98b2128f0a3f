"""Warm workers: Python worker processes a node's raylet starts *before* a partition needs one.

Activating a partition creates its actor, and a Ray actor gets a worker process from
its node's raylet. With no idle worker of the right job there, the raylet starts one:
a cold Python start plus ``import ray`` and registration, most of an activation's
time (docs/benchmarks.md, issue 14). A worker the raylet *prestarted* for the job and
that never ran anything is handed to the next actor creation of that job instead.
Ray 2.60 has no public Python API for it, so this asks the raylet's ``PrestartWorkers``
gRPC directly (with the cluster's auth token, through Ray's own channel factory).

The router keeps up to ``size`` such workers per node: it fills the pool when it
starts and tops it up after each activation took one. Everything here is best effort:
a raylet that refuses (or an older Ray) only means activations start cold, as before.
"""
from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger("logan_ray.router")

DEFAULT_WARM_WORKERS = 2  # per node: the two cost ~85 MiB of PSS (empty broker 1,740 MiB, 1,655 without)
KEEP_ALIVE_S = 24 * 3600  # the raylet keeps an idle prestarted worker this long (else it may reap it)
RPC_TIMEOUT_S = 10.0


class WarmWorkers:
    """Prestarted workers for one Ray job, counted per node (the router's job: it creates the actors)."""

    def __init__(self, job_id: str, runtime_env: str, size: int = DEFAULT_WARM_WORKERS) -> None:
        self.size = max(0, size)
        self._job_id = bytes.fromhex(job_id)
        self._runtime_env = runtime_env
        self._stubs: dict[str, Any] = {}  # node id -> NodeManagerService stub
        self._warm: dict[str, int] = {}  # node id -> prestarted workers not yet taken (as far as we know)
        self._lock = threading.Lock()  # fill runs in threads (a gRPC round trip), took on the router's loop
        self._broken = False

    def fill(self, node_id: str) -> int:
        """Prestart workers on a node until it has ``size`` warm ones; returns how many were asked for."""
        with self._lock:
            missing = self.size - self._warm.get(node_id, 0)
            if missing <= 0 or self._broken:
                return 0
            self._warm[node_id] = self.size  # claimed now: a concurrent fill asks for none
        if not self._prestart(node_id, missing):
            with self._lock:
                self._warm[node_id] = max(0, self._warm.get(node_id, 0) - missing)
            return 0
        return missing

    def assume_full(self, node_id: str) -> None:
        """Count a node's pool as full without asking (a restarted router: its predecessor filled it)."""
        with self._lock:
            self._warm[node_id] = self.size

    def took(self, node_id: str) -> None:
        """An actor was just created on ``node_id``: it took a warm worker, if there was one."""
        with self._lock:
            if self._warm.get(node_id, 0) > 0:
                self._warm[node_id] -= 1

    def _prestart(self, node_id: str, count: int) -> bool:
        try:
            from ray.core.generated import common_pb2, node_manager_pb2

            stub = self._stubs.get(node_id) or self._connect(node_id)
            stub.PrestartWorkers(node_manager_pb2.PrestartWorkersRequest(
                language=common_pb2.PYTHON, job_id=self._job_id, num_workers=count,
                keep_alive_duration_secs=KEEP_ALIVE_S,
                runtime_env_info={"serialized_runtime_env": self._runtime_env},
            ), timeout=RPC_TIMEOUT_S)
            return True
        except Exception as e:  # no prestarting: activations start cold, as without this module
            if isinstance(e, ImportError):
                self._broken = True  # this Ray has no such RPC: never ask again
            log.warning("could not prestart %d Ray workers on node %s: %s", count, node_id, e)
            self._stubs.pop(node_id, None)
            return False

    def _connect(self, node_id: str):
        """A stub for the node's raylet; Ray's channel factory adds the auth token to every call."""
        import ray
        from ray._private.grpc_utils import init_grpc_channel
        from ray.core.generated import node_manager_pb2_grpc

        node = next(n for n in ray.nodes() if n["NodeID"] == node_id and n.get("Alive"))
        channel = init_grpc_channel(f'{node["NodeManagerAddress"]}:{node["NodeManagerPort"]}')
        stub = self._stubs[node_id] = node_manager_pb2_grpc.NodeManagerServiceStub(channel)
        return stub
