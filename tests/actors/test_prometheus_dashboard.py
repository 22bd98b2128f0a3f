"""Every panel of the shipped Grafana dashboard shows data from a running broker.

Debian's Prometheus (scripts/setup.sh --test installs it), configured from deploy/prometheus/prometheus.yml
with the service-discovery file pointed at the session broker's node (the file Ray writes lists every
node's metrics agent the same way), scrapes while records are produced and consumed by a group; each
panel's query, with Grafana's variables set to this test's topic and group, must return a series with
a value through Prometheus's HTTP API, as Grafana asks it.
"""
from __future__ import annotations

import json
import math
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import ray
import yaml

from tests.tooling.grafana_dashboard import PROMETHEUS_CONFIG, panel_queries, substitute

DEADLINE_S = 120  # a loaded full run: Ray exports each histogram every 10 s, a rate needs two


def _node_metrics_target() -> str:
    """host:port of this node's Ray metrics agent, the endpoint Ray's service-discovery file lists."""
    here = ray.get_runtime_context().get_node_id()
    node = next(n for n in ray.nodes() if n["Alive"] and n["NodeID"] == here)
    return f"{node['NodeManagerAddress']}:{node['MetricsExportPort']}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prometheus_config(folder: Path, target: str) -> Path:
    """The shipped configuration, scraping every second, its file_sd file replaced by one of Ray's format
    naming ``target``."""
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    targets = folder / "prom_metrics_service_discovery.json"
    targets.write_text(json.dumps([{"labels": {"job": "ray"}, "targets": [target]}]))
    (job,) = config["scrape_configs"]
    job["file_sd_configs"] = [{"files": [str(targets)]}]
    path = folder / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _query(port: int, expr: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return body["data"]["result"]


def _shows_data(result: list[dict]) -> bool:
    """At least one series with a number (a quantile of no traffic is NaN: Grafana draws nothing)."""
    return any(not math.isnan(float(r["value"][1])) for r in result)


def _ready(port: int, prometheus: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 20
    while True:
        assert prometheus.poll() is None, "prometheus exited:\n" + log.read_text()[-2000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, "prometheus not ready in 20 s:\n" + log.read_text()[-2000:]
        time.sleep(0.2)


def test_every_dashboard_panel_returns_series_from_a_running_broker(client, gateway, topic_name, tmp_path):
    from logan_ray._ray import get
    from logan_ray.actors.group_coordinator import coordinator_name
    from logan_ray.actors.names import NAMESPACE, gateway_name

    here = ray.get_runtime_context().get_node_id()
    node_gateway = ray.get_actor(gateway_name(here), namespace=NAMESPACE)
    coordinator = ray.get_actor(coordinator_name(here), namespace=NAMESPACE)
    group = f"{topic_name}-readers"
    client.create_topic(topic_name, partitions=2)
    producer = client.producer()
    consumer = client.consumer(topic_name, group=group, auto_offset_reset="earliest")
    values = {"Cluster": ".*", "topic": topic_name, "group": group, "datasource": "Prometheus"}
    # the topic's actors must live through the test: a hibernation (an earlier test's short
    # partition.idle.ms, or the active-partition cap of a busy session) starts new series, and a
    # latency panel's rate needs two exports of one series
    previous_idle = get(client.router.set_partition_idle_ms.remote(3_600_000))
    queries = [(q, substitute(q.expr, values)) for q in panel_queries()]

    port, log = _free_port(), tmp_path / "prometheus.log"
    with log.open("w") as out:
        prometheus = subprocess.Popen(
            ["prometheus", f"--config.file={_prometheus_config(tmp_path, _node_metrics_target())}",
             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=out, stderr=subprocess.STDOUT)
    try:
        _ready(port, prometheus, log)
        deadline, missing = time.monotonic() + DEADLINE_S, queries
        while missing and time.monotonic() < deadline:
            for p in (0, 1):  # traffic all along: a rate needs two samples that differ
                producer.send_batch(topic_name, [b"r" * 200] * 100, partition=p)
            producer.flush()
            consumer.poll(500)
            consumer.commit()
            # the gauges now rather than on their 10 s periods; Ray's agent still exports on its own
            get(node_gateway.publish_gauges.remote())
            get(coordinator.publish_metrics.remote())
            missing = [(q, e) for q, e in missing if not _shows_data(_query(port, e))]
            time.sleep(1)
        assert not missing, "panels showing no data after %d s:\n%s" % (
            DEADLINE_S, "\n".join(f"{q.panel} ({q.ref}): {e}" for q, e in missing))
    finally:
        get(client.router.set_partition_idle_ms.remote(previous_idle))
        prometheus.terminate()
        try:
            prometheus.wait(10)
        except subprocess.TimeoutExpired:
            prometheus.kill()
            prometheus.wait(10)
        consumer.close()
