"""Partition metrics reach the node's Prometheus endpoint, which the Ray dashboard reads.

Counters and histograms come from the partition actors, the log gauges from the node's gateway
(also for inactive partitions)."""
from __future__ import annotations

import time
import urllib.request

import ray


def _metrics_text() -> str:
    node = next(n for n in ray.nodes() if n["Alive"] and n["NodeID"] == ray.get_runtime_context().get_node_id())
    url = f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode()


def test_partition_metrics_exported(client, gateway, topic_name):
    client.create_topic(topic_name)
    producer = client.producer()
    producer.send_batch(topic_name, [b"m" * 100] * 1234, partition=0)
    producer.flush()
    consumer = client.consumer(topic_name, auto_offset_reset="earliest")
    got = 0
    while got < 1234:
        got += len(consumer.poll(2000))
    deadline = time.monotonic() + 60
    wanted = [f'logan_ray_records_in_total{{', "logan_ray_log_end_offset", "logan_ray_append_latency_ms_bucket",
              "logan_ray_bytes_out_total", "logan_ray_segments"]
    text = ""
    while time.monotonic() < deadline:
        text = _metrics_text()
        lines = [ln for ln in text.splitlines() if topic_name in ln]
        # every series there, and the log-end gauge caught up: the gateway publishes it on its own
        # period, so a first export may still hold the partition's log end from before the produce
        if all(any(w.split("{")[0] in ln for ln in lines) for w in wanted) \
                and _series(text, "logan_ray_log_end_offset", topic_name) == [1234.0]:
            break
        time.sleep(2)
    lines = [ln for ln in text.splitlines() if topic_name in ln and not ln.startswith("#")]
    end = [ln for ln in lines if ln.startswith("ray_logan_ray_log_end_offset") or ln.startswith("logan_ray_log_end_offset")]
    assert end, "log end offset gauge not exported:\n" + "\n".join(lines[:20])
    assert float(end[0].rsplit(" ", 1)[1]) == 1234.0
    records_in = [ln for ln in lines if "logan_ray_records_in" in ln and "_total" in ln]
    assert records_in and float(records_in[0].rsplit(" ", 1)[1]) == 1234.0
    assert any("logan_ray_append_latency_ms_bucket" in ln for ln in lines)
    assert any("logan_ray_bytes_out" in ln for ln in lines)


def _series(text: str, name: str, topic: str) -> list[float]:
    return [float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines()
            if not ln.startswith("#") and f'topic="{topic}"' in ln
            and (ln.startswith(name + "{") or ln.startswith("ray_" + name + "{"))]


def test_a_hibernated_partition_keeps_its_log_gauges_in_one_series(client, gateway, topic_name, short_partition_idle):
    """Its process is gone, its gauges are not: the node's gateway publishes them from its folder,
    one series each (no stale second one from the actor that was running)."""
    from logan_ray._ray import get
    from logan_ray.gateway import gateway_name

    client.create_topic(topic_name)
    producer = client.producer()
    producer.send_batch(topic_name, [b"g" * 100] * 300, partition=0)
    producer.flush()
    deadline = time.monotonic() + 60
    while any(r.get("active") for r in client.status() if r["topic"] == topic_name):
        assert time.monotonic() < deadline, "the partition did not hibernate"
        time.sleep(0.5)
    gw = ray.get_actor(gateway_name(ray.get_runtime_context().get_node_id()), namespace="logan_ray")
    text, deadline = "", time.monotonic() + 60
    while time.monotonic() < deadline:
        assert get(gw.publish_gauges.remote()) >= 1
        text = _metrics_text()
        if _series(text, "logan_ray_partition_active", topic_name) == [0.0]:
            break
        time.sleep(2)
    assert _series(text, "logan_ray_partition_active", topic_name) == [0.0]
    assert _series(text, "logan_ray_log_end_offset", topic_name) == [300.0]
    assert _series(text, "logan_ray_log_start_offset", topic_name) == [0.0]
    assert _series(text, "logan_ray_segments", topic_name) == [1.0]
    assert _series(text, "logan_ray_size_bytes", topic_name)[0] > 300 * 100
