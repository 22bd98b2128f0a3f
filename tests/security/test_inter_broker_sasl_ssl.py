"""A cluster whose only listener is SASL_SSL, with the ACL authorizer, replicates (issue 32, item 3).

Three nodes of a ``ray.cluster_utils.Cluster`` in a child process (the session's Ray stays
untouched), one gateway each, ``listeners=SASL_SSL://127.0.0.1:0``: the replica fetchers
reach the leaders over TLS (the leader's certificate checked against the truststore) and
log in as brokers; an idempotent acks=all producer (a SCRAM super user) with
min.insync.replicas=2 needs the followers in the ISR, and both followers of each
partition end up with every record.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.tooling.child_result import child_result

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

SCRIPT = textwrap.dedent(
    """
    import json, os, sys, tempfile, time
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    sys.path.insert(0, %r)
    import ray
    from ray.cluster_utils import Cluster
    from confluent_kafka import Producer
    import logan_ray
    from logan_ray.broker_config import resolve
    from logan_ray.gateway import gateway_name, start_gateways
    from logan_ray.security.config import gateway_security
    from logan_ray.security_cli import RaySecurity
    from tests.security.certs import make_pki

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="logan_ray")
    out = {}
    try:
        data_dir = tempfile.mkdtemp()
        pki = make_pki(os.path.join(data_dir, "pki"))
        settings = resolve({"listeners": "SASL_SSL://127.0.0.1:0", "ssl.keystore.location": pki.server,
                            "ssl.truststore.location": pki.ca, "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                            "super.users": "User:admin"})
        security = gateway_security(settings)
        out["inter_broker"] = security["inter_broker"]
        c = logan_ray.connect(data_dir=data_dir)
        RaySecurity(c).set_user("admin", ["SCRAM-SHA-256"], 4096, "admin-pw")
        endpoints = start_gateways(security=security)
        parts = c.create_topic("rep", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"},
                               activate=False)["partitions"]
        boot = ",".join(endpoints.values())
        conf = {"bootstrap.servers": boot, "security.protocol": "SASL_SSL", "ssl.ca.location": pki.ca,
                "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "admin", "sasl.password": "admin-pw"}
        acked, errors = [], []
        p = Producer({**conf, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
        for i in range(300):
            p.produce("rep", b"v%%d" %% i, partition=i %% 3,
                      on_delivery=lambda e, m: errors.append(str(e)) if e else acked.append(m.partition()))
        out["unflushed"] = p.flush(60)
        out["acked"], out["errors"] = len(acked), errors[:5]
        out["isr"] = [len(p["isr"]) for p in c.describe_topic("rep")["partitions"]]
        ends = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ends = {}
            for node in endpoints:
                state = ray.get(ray.get_actor(gateway_name(node), namespace="logan_ray").replica_state.remote())
                for name, s in state.items():
                    if name.startswith("rep-"):
                        ends[name + "@" + node[:8]] = s["log_end"]
            if len(ends) == 6 and all(v == 100 for v in ends.values()):
                break
            time.sleep(0.2)
        out["follower_ends"] = sorted(ends.values())
        ray.get(c.router.shutdown.remote())
    finally:
        print(json.dumps(out))
        ray.shutdown()
        cluster.shutdown()
    """
)


def test_a_cluster_whose_only_listener_is_sasl_ssl_with_an_authorizer_replicates():
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", SCRIPT % ROOT], capture_output=True, text=True, timeout=300,
                         env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    result = child_result(out.stdout)
    assert result["inter_broker"] == "SASL_SSL"
    assert result["unflushed"] == 0 and result["errors"] == [] and result["acked"] == 300
    assert result["isr"] == [3, 3, 3]
    assert result["follower_ends"] == [100] * 6  # both followers of each partition hold all of it
