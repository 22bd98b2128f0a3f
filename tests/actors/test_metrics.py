"""Partition metrics reach the node's Prometheus endpoint, which the Ray dashboard reads."""
from __future__ import annotations

import time
import urllib.request

import ray


def _metrics_text() -> str:
    node = next(n for n in ray.nodes() if n["Alive"] and n["NodeID"] == ray.get_runtime_context().get_node_id())
    url = f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode()


def test_partition_metrics_exported(client, topic_name):
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
        if all(any(w.split("{")[0] in ln for ln in lines) for w in wanted):
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
