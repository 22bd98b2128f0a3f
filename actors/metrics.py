"""Per-partition counters and latency histograms exported through ``ray.util.metrics``.

They land on each node's Prometheus endpoint, which the Ray dashboard reads, so
operators see logan-ray next to the rest of their Ray workloads. They only move
while the partition is active, so its actor owns them; the log gauges (offsets,
size, segments) are the node gateway's (``logan_ray/gateway/partition_gauges.py``),
since an inactive partition has no process to publish them.
"""
from __future__ import annotations

from ray.util import metrics

_TAGS = ("topic", "partition")
_LATENCY_BOUNDARIES = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000]


class PartitionMetrics:
    def __init__(self, topic: str, partition: int) -> None:
        self._tags = {"topic": topic, "partition": str(partition)}
        t = _TAGS
        self.records_in = metrics.Counter("logan_ray_records_in", "Records appended", tag_keys=t)
        self.bytes_in = metrics.Counter("logan_ray_bytes_in", "Bytes appended", tag_keys=t)
        self.records_out = metrics.Counter("logan_ray_records_out", "Records served (by offset span)", tag_keys=t)
        self.bytes_out = metrics.Counter("logan_ray_bytes_out", "Bytes served", tag_keys=t)
        self.append_ms = metrics.Histogram(
            "logan_ray_append_latency_ms", "Append latency", boundaries=_LATENCY_BOUNDARIES, tag_keys=t
        )
        self.read_ms = metrics.Histogram(
            "logan_ray_read_latency_ms", "Read/locate latency", boundaries=_LATENCY_BOUNDARIES, tag_keys=t
        )

    def appended(self, records: int, nbytes: int, ms: float) -> None:
        self.records_in.inc(records, self._tags)
        self.bytes_in.inc(nbytes, self._tags)
        self.append_ms.observe(ms, self._tags)

    def served(self, records: int, nbytes: int, ms: float) -> None:
        if records:
            self.records_out.inc(records, self._tags)
        if nbytes:
            self.bytes_out.inc(nbytes, self._tags)
        self.read_ms.observe(ms, self._tags)
