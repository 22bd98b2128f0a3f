"""CPU cost of one Fetch over many inactive partitions, in the gateway's own fetch handler (issue 14).

    python bench/closed_fetch.py [--partitions 1000] [--rounds 20]

No Ray and no sockets: a Gateway with a stand-in router whose routes say every partition of one
topic is inactive on this node, over never-started partition folders (what CreateTopics leaves),
so every read is answered from closed files (logan_ray/gateway/closed_reads.py). Prints the CPU
and wall time per Fetch of all partitions at offset 0, with ``max_wait_ms`` 0 (answered at once)
and 100 (a long-poll that times out). This is the gateway's share of a consumer group polling a
topic whose partitions are mostly inactive (bench/partitions.py runs the whole thing).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
import uuid
from types import SimpleNamespace

from machine import describe  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)
from needs import need  # noqa: E402

if __name__ == "__main__":
    need("logan_ray")

NODE = "ab" * 28


class _Method:
    def __init__(self, fn) -> None:
        self.fn = fn

    async def remote(self, *args, **kwargs):
        return await self.fn(*args, **kwargs)


def stand_in_router(data_dir: str, partitions: int, topic_id: str) -> SimpleNamespace:
    async def route_with_ids(names, auto_create=False):
        return {"t": {"partitions": [(None, NODE)] * partitions, "topic_id": topic_id}}

    async def partition_changes(*_args):
        await asyncio.sleep(3600)

    async def settings():
        return {"data_dir": data_dir}

    async def topic_ids():
        return {"t": topic_id}

    return SimpleNamespace(route_with_ids=_Method(route_with_ids), partition_changes=_Method(partition_changes),
                           settings=_Method(settings), topic_ids=_Method(topic_ids))


def fetch_body(partitions: int, max_wait_ms: int) -> dict:
    return {"max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 50 << 20, "session_id": 0,
            "session_epoch": -1, "replica_id": -1, "topics": [{"topic": "t", "partitions": [
                {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1,
                 "log_start_offset": -1} for p in range(partitions)]}]}


async def measure(partitions: int, rounds: int, data_dir: str, topic_id: str) -> None:
    from logan_ray.gateway import fetch as fetch_handler
    from logan_ray.gateway.server import Gateway

    gw = Gateway(stand_in_router(data_dir, partitions, topic_id), NODE)
    conn = SimpleNamespace(state={})
    header = SimpleNamespace(api_version=11)
    await fetch_handler.fetch(gw, conn, header, fetch_body(partitions, 0))  # first: the views open
    for wait_ms, n in ((0, rounds), (100, max(1, rounds // 4))):
        body = fetch_body(partitions, wait_ms)
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(n):
            answer = await fetch_handler.fetch(gw, conn, header, body)
        cpu, wall = (time.process_time() - cpu) / n * 1e3, (time.perf_counter() - wall) / n * 1e3
        assert all(p["error_code"] == 0 for p in answer["responses"][0]["partitions"])
        print(f"Fetch of {partitions} inactive partitions, max_wait_ms {wait_ms}: {cpu:.1f} ms CPU, "
              f"{wall:.1f} ms wall per Fetch ({n} Fetches); asyncio tasks left: {len(asyncio.all_tasks()) - 1}")
    gw.cluster.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    from logan_ray.storage.partition_dir import write_topic_id

    print(f"# {describe()}; load average {os.getloadavg()[0]:.2f}")
    data_dir = tempfile.mkdtemp(prefix="bench-closed-fetch-")
    try:
        topic_id = str(uuid.uuid4())
        for p in range(args.partitions):
            os.makedirs(os.path.join(data_dir, f"t-{p}"))
            write_topic_id(os.path.join(data_dir, f"t-{p}"), topic_id)
        asyncio.run(measure(args.partitions, args.rounds, data_dir, topic_id))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
