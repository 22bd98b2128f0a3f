"""Checks of a partition's history as clients saw it, shared by the failover tests.

Used by the gateway tests on ``ray.cluster_utils.Cluster`` (tests/gateway/) and by the
network-cut test on the multi-host bed (tests/multihost/test_ray_up.py). Stdlib only.
"""
from __future__ import annotations


def check_history(acked: list[list], read: list[list]) -> list[str]:
    """What is wrong with one partition's history: ``acked`` [offset, value] of every acknowledged
    record, ``read`` [offset, value] as a consumer read the partition from its start. Every acknowledged
    record must be read at its offset with its bytes, no offset or value twice, no gap in the offsets
    (this log has no compaction or transaction markers, so it reports none)."""
    problems = []
    at: dict[int, str] = {}
    for offset, value in read:
        if offset in at:
            problems.append(f"offset {offset} read twice")
        at[offset] = value
    values = list(at.values())
    problems += [f"value {v} at two offsets" for v in sorted(set(values)) if values.count(v) > 1]
    if at and sorted(at) != list(range(min(at), max(at) + 1)):
        problems.append(f"gaps in offsets {min(at)}..{max(at)}: {len(at)} records")
    problems += [f"acknowledged {v} at {o}, read {at.get(o)!r}" for o, v in acked if at.get(o) != v]
    return problems
