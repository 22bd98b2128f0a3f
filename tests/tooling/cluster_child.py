"""The multi-node tests' child processes: a ``ray.cluster_utils.Cluster`` each, off the session's Ray.

The test runs its script with :func:`run_child` (this folder importable in the child, the JSON
result parsed by :mod:`child_result`); the script uses :func:`start_cluster`, :func:`wait_for`, and :func:`remove_node` /
:func:`add_node` to take a machine away (SIGKILL) and bring it back at its address.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any, Callable

try:
    from child_result import child_result
except ImportError:  # imported as tests.tooling.cluster_child (this folder not on the path)
    from .child_result import child_result

HERE = os.path.dirname(os.path.abspath(__file__))


def run_child(script: str, timeout: float = 400) -> tuple[subprocess.CompletedProcess, dict[str, Any]]:
    """Run ``script`` in a fresh Python with this folder on its path: (the process, its JSON result)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH")) if p)}
    out = run_in_group([sys.executable, "-c", script], timeout, env)
    return out, child_result(out.stdout, out.stderr)


def run_in_group(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)`` in a process group of its
    own, SIGKILLed whole when the command ends or times out.

    Why: a child that builds a Ray cluster and is killed (its timeout, a crash) takes its raylets and
    GCS with it, but the nodes' dashboard and runtime-env agents live on (seen on 2026-11-29: 2-3 % of a
    core each, for the rest of the session), slowing every later test of the suite.
    """
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                            env=env, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        stdout, stderr = proc.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, stdout, stderr) from None
    finally:
        _kill_group(proc.pid)
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def _kill_group(pgid: int) -> None:
    import signal

    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:  # nothing of it left
        pass


def start_cluster(nodes: int = 3, system_config: dict[str, Any] | None = None,
                  ips: tuple[str, ...] = ()) -> Any:
    """A ``ray.cluster_utils.Cluster`` of ``nodes`` one-CPU nodes, this process connected to it in the
    broker's namespace (the caller shuts both down). ``ips``: the addresses of the nodes after the
    head, each its own (a node that returns at its address is its machine coming back)."""
    import ray
    from ray.cluster_utils import Cluster

    head_args: dict[str, Any] = {"num_cpus": 1}
    if system_config:
        head_args["_system_config"] = system_config
    cluster = Cluster(initialize_head=True, head_node_args=head_args)
    for i in range(nodes - 1):
        cluster.add_node(num_cpus=1, **({"node_ip_address": ips[i]} if i < len(ips) else {}))
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="logan_ray")
    return cluster


def wait_for(pred: Callable[[], Any], timeout: float = 60, every: float = 0.1) -> bool:
    """Poll ``pred`` until it is true (True) or ``timeout`` seconds passed (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(every)
    return False


def remove_node(cluster: Any, node_id: str) -> str:
    """The machine of ``node_id`` goes: SIGKILL of its raylet and Ray processes, and of its gateway
    (which outlives its raylet a moment). Returns its address, to bring it back with :func:`add_node`."""
    import signal

    import ray

    from logan_ray.gateway import gateway_name

    node = next(n for n in cluster.list_all_nodes() if n.node_id == node_id)
    pid = ray.get(ray.get_actor(gateway_name(node_id), namespace="logan_ray").stats.remote(), timeout=30)["pid"]
    cluster.remove_node(node, allow_graceful=False)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return node.node_ip_address


def add_node(cluster: Any, ip: str) -> dict[str, str]:
    """A machine (back) at ``ip``: a new Ray node id; its gateway started, as the broker's node sync
    does for a node that joined. Returns every gateway's endpoint by node id."""
    from logan_ray.gateway import start_gateways

    cluster.add_node(num_cpus=1, node_ip_address=ip)
    cluster.wait_for_nodes()
    return start_gateways("127.0.0.1", 0)
