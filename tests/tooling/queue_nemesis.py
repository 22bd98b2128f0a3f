"""Faults for the queue workload on a ``ray.cluster_utils.Cluster`` (a child process's own cluster).

A node of such a cluster is a raylet and the processes under it (workers, the node's gateway
and partition actors), all on this machine, so a "host" fault is a signal to all of them:
SIGSTOP/SIGCONT is a host that hangs and resumes, SIGKILL (``Cluster.remove_node`` without
grace, and the gateway, which outlives its raylet a moment) is a host that dies.
"""
from __future__ import annotations

import os
import signal
import time
from typing import Any


def node_pids(cluster: Any, node_id: str) -> list[int]:
    """The raylet of ``node_id`` and every process under it."""
    import psutil

    node = next(n for n in cluster.list_all_nodes() if n.node_id == node_id)
    raylet = psutil.Process(node.all_processes["raylet"][0].process.pid)
    return [raylet.pid] + [p.pid for p in raylet.children(recursive=True)]


def pause_node(cluster: Any, node_id: str, seconds: float) -> float:
    """SIGSTOP every process of the node for ``seconds``, then SIGCONT (also if interrupted): how long it
    was stopped."""
    pids = node_pids(cluster, node_id)
    t0 = time.monotonic()
    for pid in pids:
        _signal(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        for pid in pids:
            _signal(pid, signal.SIGCONT)
    return time.monotonic() - t0


def kill_node(cluster: Any, node_id: str) -> None:
    """SIGKILL the node's Ray processes and its gateway: the host is gone."""
    import ray

    from logan_ray.gateway import gateway_name

    node = next(n for n in cluster.list_all_nodes() if n.node_id == node_id)
    gateway = ray.get(ray.get_actor(gateway_name(node_id), namespace="logan_ray").stats.remote(), timeout=30)["pid"]
    pids = node_pids(cluster, node_id)
    cluster.remove_node(node, allow_graceful=False)
    for pid in [gateway] + pids:
        _signal(pid, signal.SIGKILL)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
