"""Run librdkafka's integration tests against a three-node logan-ray on a simulated Ray cluster.

    python compat/run_librdkafka_cluster.py [cluster|NNNN[:FILTER],...] [--report-dir DIR] [--nodes N]

For the tests that create their topics with ``replication_factor=3`` (0103's
transactions, 0098, 0107, 0111), which a one-node broker refuses as a one-broker
Kafka does. ``ray.cluster_utils.Cluster`` starts N Ray nodes on this machine (one
CPU each), logan-ray's router on them and a gateway per node; the bootstrap list
names every gateway. Everything (Ray nodes, gateways, data in a temporary
directory) ends with this process. The tests are run by compat/librdkafka.sh;
``cluster`` (the default) selects the entries of compat/librdkafka-tests.txt marked so.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # every Ray listener on 127.0.0.1

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_librdkafka import HERE, build, run_against  # noqa: E402


def cluster_entries() -> str:
    """The ``cluster`` entries of compat/librdkafka-tests.txt as librdkafka.sh's comma list (NNNN:FILTER)."""
    entries = []
    with open(os.path.join(HERE, "librdkafka-tests.txt")) as f:
        for line in f:
            cols = line.split()
            if len(cols) >= 3 and not line.startswith("#") and cols[1] == "cluster":
                entries.append(cols[0] if cols[2] == "*" else f"{cols[0]}:{cols[2]}")
    return ",".join(entries)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("tests", nargs="?", default="cluster", help="cluster (default) or a comma list of test numbers (NNNN:FILTER: only sub-tests whose name contains FILTER)")
    p.add_argument("--report-dir", help="keep librdkafka's JSON test reports here")
    p.add_argument("--nodes", type=int, default=3, help="Ray nodes, each with a gateway (default 3)")
    p.add_argument("--num-partitions", type=int, default=4, help="partitions of auto-created topics")
    args = p.parse_args(argv)
    tests = cluster_entries() if args.tests == "cluster" else args.tests
    build()  # before the cluster starts: a first build takes minutes and needs the CPU

    import ray
    from ray.cluster_utils import Cluster

    import logan_ray
    from logan_ray.gateway import start_gateways, stop_gateways

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    endpoints: dict = {}
    try:
        for _ in range(args.nodes - 1):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, namespace="logan_ray")
        with tempfile.TemporaryDirectory(prefix="logan-ray-librdkafka-cluster-") as data_dir:
            logan_ray.connect(data_dir=data_dir, num_partitions=args.num_partitions)
            endpoints = start_gateways("127.0.0.1", 0)
            bootstrap = ",".join(sorted(endpoints.values()))
            print(f"logan-ray on {len(endpoints)} nodes, gateways {bootstrap} (data in {data_dir})", flush=True)
            try:
                return run_against(bootstrap, tests, args.report_dir)
            finally:
                stop_gateways(list(endpoints))
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    sys.exit(main())
