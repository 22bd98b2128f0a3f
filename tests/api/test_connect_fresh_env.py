"""``logan_ray.connect()`` in a fresh shell: it sets Ray's loopback binding and token auth itself.

The embedded single-node Ray it starts must listen on 127.0.0.1 only, with token
auth on, although nothing was exported (``env -i`` with PATH and a new HOME).
"""
from __future__ import annotations

import os
import subprocess
import sys

from tests.cli.test_readme import minimal_env
from tests.tooling.child_result import child_result

SCRIPT = """
import json, sys, ray, logan_ray
client = logan_ray.connect(data_dir=sys.argv[1])
client.create_topic("fresh", partitions=1)
ctx = ray.get_runtime_context()
node = [n for n in ray.nodes() if n["NodeID"] == ctx.get_node_id()][0]
print(json.dumps({"gcs": ctx.gcs_address, "node_ip": node["NodeManagerAddress"], "topics": client.list_topics(),
                  "auth": __import__("os").environ.get("RAY_AUTH_MODE")}))
client.close()
"""


def test_connect_starts_its_own_loopback_ray_without_any_exported_variable(client, tmp_path):
    """A data dir with no broker gets an embedded Ray of its own, even when a ``ray start`` cluster
    runs on this machine: Ray's plain ``ray.init()`` would join the cluster named in
    /tmp/ray/ray_current_cluster. Here that file names the session's Ray (``client``)."""
    import ray

    session_gcs = ray.get_runtime_context().gcs_address
    current = "/tmp/ray/ray_current_cluster"
    saved = open(current).read() if os.path.exists(current) else None
    env = minimal_env(str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    try:
        with open(current, "w") as f:
            f.write(session_gcs)
        r = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "data")], env=env, capture_output=True,
                           timeout=300)
    finally:
        if saved is None:
            os.unlink(current)
        else:
            with open(current, "w") as f:
                f.write(saved)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    out = child_result(r.stdout.decode())
    assert out["gcs"].startswith("127.0.0.1:") and out["node_ip"] == "127.0.0.1"
    assert out["topics"] == ["fresh"] and out["auth"] == "token"
    assert out["gcs"] != session_gcs
