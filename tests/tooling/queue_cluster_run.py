"""One queue-workload run on a three-node ``ray.cluster_utils.Cluster`` under a fault schedule.

Shared by the suite's short run (tests/gateway/test_queue_checker_cluster.py) and
``bench/jepsen.py``: both run :func:`main` in a child process of their own (the caller's Ray,
if any, stays untouched) and read its JSON line. The topic is RF=3, ``min.insync.replicas=2``.
Ray's health check is 1 s x 30 failures, ``replica.lag.time.max.ms`` 5 s, so only the broker sessions fail a leader over
within seconds, as in tests/gateway/test_gw_failover_faults.py.

Every fault of the schedule runs, even when waiting for full ISRs made the run longer than
``seconds`` (the least the workload runs), unless ``faults_end_with_time``. Schedule: ``stop:<s>`` (SIGSTOP of a non-head node for s seconds), ``kill`` (SIGKILL of a
non-head node, which is then brought back at its address, as a machine that reboots, so the
next fault has three nodes again), ``wait:<s>``. Before each fault the run waits (bounded)
for every partition's ISR to be full again, so faults come one at a time, never two
replicas down at once, which ``min.insync.replicas=2`` could not survive for acks=all.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any

#: replica.lag.time.max.ms (Kafka's default 30 s): a follower that stops fetching leaves the ISR after it,
#: and acks=all waits for it until then; shorter keeps a run's stalls short
REPLICA_LAG_MS = 5000
#: the longest wait for full ISRs before a fault (a follower that fell behind on a starved machine
#: takes this long at most to fetch its way back; CI's loaded run needed 27 s once)
ISR_WAIT_S = 120
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _wait_full_isr(c: Any, topic: str, partitions: int, replicas: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            parts = c.describe_topic(topic)["partitions"]
            if all(len(parts[p]["isr"]) >= replicas for p in range(partitions)):
                return True
        except Exception:  # noqa: BLE001  (the router busy with an election)
            pass
        time.sleep(0.25)
    return False


#: what the controller and the brokers say about leaders and ISRs: printed with a run's result, so a
#: run that stalled (on a loaded CI machine, say) can be read afterwards
CONTROL_WORDS = ("ISR", "elected", "fenced", "lease ", "leader", "NOT_ENOUGH", "timed out")


def control_log(session_dir: str, per_actor: int = 25) -> dict[str, list[str]]:
    """{actor: its last ``per_actor`` log lines that mention leaders, ISRs or fencing}, for the router and the
    gateways of the cluster (Ray names a worker's actor at the top of its ``.out`` file)."""
    import glob

    out: dict[str, list[str]] = {}
    for err in sorted(glob.glob(os.path.join(session_dir, "logs", "worker-*.err"))):
        try:
            with open(err[:-4] + ".out", errors="replace") as f:
                head = [f.readline() for _ in range(3)]
            actor = next((h.strip().removeprefix(":actor_name:") for h in head if h.startswith(":actor_name:")), "")
            if actor not in ("RouterActor", "GatewayActor"):
                continue
            with open(err, errors="replace") as f:
                lines = [line.rstrip()[:300] for line in f
                         if any(w in line for w in CONTROL_WORDS) and not line.startswith(":")]
        except OSError:
            continue
        if lines:
            out[f"{actor} {os.path.basename(err)[7:19]}"] = lines[-per_actor:]
    return out


def main(seconds: float, schedule: list[str], partitions: int = 3, producers: int = 3, consumers: int = 2,
         rate: float = 40.0, dump: str | None = None, faults_end_with_time: bool = False) -> dict[str, Any]:
    """Run the workload ``seconds`` long (the schedule inside it), drain, check: the result as a dict.
    ``faults_end_with_time`` (bench/jepsen.py's endless schedule) skips the faults left once ``seconds``
    are over; otherwise every fault runs."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    from queue_checker import History, check
    from queue_nemesis import kill_node, pause_node
    from queue_workload import QueueWorkload, WorkloadConfig

    import ray
    from ray.cluster_utils import Cluster

    import logan_ray
    from logan_ray.gateway import start_gateways

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "_system_config": {
        "health_check_initial_delay_ms": 0, "health_check_period_ms": 1000, "health_check_failure_threshold": 30}})
    for ip in ("127.0.0.2", "127.0.0.3"):  # an address each: a rebooted node takes its replicas back
        cluster.add_node(num_cpus=1, node_ip_address=ip)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="logan_ray")
    out: dict[str, Any] = {"faults": []}
    try:
        c = logan_ray.connect(data_dir=tempfile.mkdtemp(), replica_lag_time_max_ms=REPLICA_LAG_MS)
        endpoints = start_gateways("127.0.0.1", 0)
        head = ray.get_runtime_context().get_node_id()
        bootstrap = ",".join([endpoints[head]] + [e for n, e in endpoints.items() if n != head])
        topic = "queue"
        c.create_topic(topic, partitions=partitions, replication_factor=3, config={"min.insync.replicas": "2"})
        out["isr_full_at_start"] = _wait_full_isr(c, topic, partitions, 3, 60)
        history = History()
        workload = QueueWorkload(WorkloadConfig(bootstrap, topic, partitions, producers, consumers, rate),
                                 history).start()
        t0 = time.monotonic()
        turn = 0
        for step in schedule:
            kind, _, arg = step.partition(":")
            if faults_end_with_time and time.monotonic() - t0 >= seconds:
                break
            if kind == "wait":
                time.sleep(min(float(arg), max(0.0, seconds - (time.monotonic() - t0))))
                continue
            waited = time.monotonic()
            isr_full = _wait_full_isr(c, topic, partitions, 3, ISR_WAIT_S)
            out.setdefault("isr_wait_s", []).append(round(time.monotonic() - waited, 1))
            others = sorted(n.node_id for n in cluster.list_all_nodes() if n.node_id != head)
            victim = others[turn % len(others)]
            turn += 1
            at = round(time.monotonic() - t0, 2)
            if kind == "stop":
                stopped = pause_node(cluster, victim, float(arg))
                out["faults"].append({"fault": "SIGSTOP", "at_s": at, "for_s": round(stopped, 2), "isr_full": isr_full})
            elif kind == "kill":
                ip = next(n.node_ip_address for n in cluster.list_all_nodes() if n.node_id == victim)
                kill_node(cluster, victim)
                out["faults"].append({"fault": "SIGKILL", "at_s": at, "isr_full": isr_full})
                time.sleep(5)
                cluster.add_node(num_cpus=1, node_ip_address=ip)  # the machine reboots at its address
                cluster.wait_for_nodes()
                start_gateways("127.0.0.1", 0)
            else:
                raise ValueError(f"unknown fault {step!r}")
        left = seconds - (time.monotonic() - t0)
        if left > 0:
            time.sleep(left)
        out["isr_full_at_end"] = _wait_full_isr(c, topic, partitions, 3, 30)
        workload.stop()
        out["workload_s"] = round(time.monotonic() - t0, 1)
        out["high_watermarks"] = workload.drain()
        out["client_errors"] = workload.errors
        if dump:
            history.dump(dump)
        report = check(history)
        out["control_log"] = control_log(ray._private.worker._global_node.get_session_dir_path())
        out["counts"], out["examples"], out["stats"] = report.counts, report.examples, report.stats
        out["table"] = report.table()
        out["valid"] = report.valid
    finally:
        print(json.dumps(out, default=str), flush=True)
        ray.shutdown()
        cluster.shutdown()
    return out


if __name__ == "__main__":
    args = json.loads(sys.argv[1])
    main(**args)
