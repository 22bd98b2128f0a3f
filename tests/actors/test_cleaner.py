"""The cleaner actor on a real Ray runtime: on demand, on a schedule, while serving, and killed mid-pass."""
from __future__ import annotations

import os
import random
import signal
import statistics
import threading
import time
import urllib.request

import pytest
import ray

from logan_ray.actors.cleaner import cleaner_name
from logan_ray.actors.partition import NAMESPACE
from logan_ray.cli import main as cli_main
from logan_ray.errors import InvalidConfigError
from logan_ray.storage.batch_header import iter_headers
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.records import decode_records

COMPACT = {"cleanup.policy": "compact", "segment.bytes": str(64 << 10), "index.interval.bytes": "1024"}


def read_all(actor, start: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) from ``start`` to the log end, stepping by batch ends as Kafka clients do."""
    out = []
    offset = start
    _, end = ray.get(actor.offsets.remote())
    while offset < end:
        data, _, _ = ray.get(actor.fetch.remote(offset, 4 << 20))
        if not data:
            break
        out += [(r.offset, r.key, r.value) for r in decode_records(data) if r.offset >= offset]
        offset = max(h.next_offset for _, h in iter_headers(data))
    return out


def load(actor, rnd: random.Random, batches: int, keys: int, per_batch: int, value_bytes: int,
         written: dict[int, tuple[bytes, bytes | None]], tombstones: float = 0.0) -> None:
    """Append keyed batches straight to the partition actor, remembering offset -> (key, value)."""
    pad = bytes(rnd.getrandbits(8) for _ in range(value_bytes))
    pending = []
    for _ in range(batches):
        ks = [b"key-%05d" % rnd.randrange(keys) for _ in range(per_batch)]
        vs = [None if rnd.random() < tombstones else b"%08d" % rnd.getrandbits(26) + pad for _ in range(per_batch)]
        pending.append((ks, vs, actor.append.remote(build_batch(vs, ks))))
        if len(pending) >= 64:
            _drain(pending, written)
    _drain(pending, written)


def _drain(pending, written) -> None:
    for ks, vs, ref in pending:
        base = ray.get(ref)[0]
        for i, (k, v) in enumerate(zip(ks, vs)):
            written[base + i] = (k, v)
    pending.clear()


def survivors(written: dict[int, tuple[bytes, bytes | None]], end: int) -> list[tuple[int, bytes, bytes | None]]:
    latest = {}
    for offset in sorted(written):
        if offset < end:
            latest[written[offset][0]] = offset
    return [(o, *written[o]) for o in sorted(written) if o >= end or latest[written[o][0]] == o]


def partition_dir(client, topic: str, partition: int = 0) -> str:
    return os.path.join(ray.get(client.router.settings.remote())["data_dir"], f"{topic}-{partition}")


def test_compact_on_demand_keeps_the_latest_value_of_every_key(client, broker_dir, topic_name, capsys):
    client.create_topic(topic_name, partitions=1, config=COMPACT)
    producer = client.producer(linger_ms=1, batch_size=4096)  # small batches: the mid-log consumer stops mid-log
    rnd = random.Random(1)
    sent = []
    for i in range(3000):
        key = b"user-%03d" % rnd.randrange(60)
        value = None if rnd.random() < 0.03 else b"v%d:" % i + b"x" * rnd.randrange(200)
        sent.append((producer.send(topic_name, value, key, partition=0), key, value))
    written = {f.result(30).offset: (k, v) for f, k, v in sent}
    producer.close()
    end = max(written) + 1

    # a consumer that has read part of the log when compaction happens
    mid = client.consumer(auto_offset_reset="earliest", fetch_max_bytes=16 << 10)
    mid.assign([(topic_name, 0)])
    seen = []
    while len(seen) < 1200:
        seen += mid.poll(2000)
    position = mid.position((topic_name, 0))
    assert 0 < position < end

    [summary] = client.compact(topic_name)
    assert summary["passes"] >= 1 and summary["records_removed"] > 2000
    assert summary["bytes_after"] < summary["bytes_before"] / 5
    actor = client.partition_actor(topic_name, 0)
    want = survivors(written, end)
    assert read_all(actor) == want
    assert len({k for _, k, _ in want}) == len(want) == 60
    stats = ray.get(actor.stats.remote())
    assert stats["cleaner_checkpoint"] == end and stats["log_end_offset"] == end and stats["log_start_offset"] == 0

    rest = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not rest or rest[-1].offset < want[-1][0]):
        rest += mid.poll(1000)
    # The consumer may still deliver records it fetched before the rewrite (Kafka's consumer
    # prefetches too): each at its written offset, in order, and every survivor among them.
    delivered = [(r.offset, r.key, r.value) for r in rest]
    assert [d[0] for d in delivered] == sorted({d[0] for d in delivered}) and delivered[0][0] >= position
    assert all(written[o] == (k, v) for o, k, v in delivered)
    assert set(w for w in want if w[0] >= position) <= set(delivered)
    mid.close()
    fresh = client.consumer(topic_name, auto_offset_reset="earliest")
    got = []
    while len(got) < len(want):
        got += fresh.poll(2000)
    assert [(r.offset, r.key, r.value) for r in got] == want
    fresh.close()

    # the command line does the same; a second pass after more updates
    more = client.producer()
    more.send_batch(topic_name, [b"late-%d" % i for i in range(30)], [b"user-%03d" % i for i in range(30)],
                    partition=0)
    more.close()
    assert cli_main(["--data-dir", broker_dir, "compact", topic_name]) == 0
    out = capsys.readouterr().out
    assert f"{topic_name}-0: " in out and "records removed" in out
    after = read_all(actor)
    assert len(after) == 60 and sum(1 for _, _, v in after if v and v.startswith(b"late-")) == 30


def test_compacting_a_delete_policy_topic_is_refused(client, topic_name):
    client.create_topic(topic_name, partitions=1)
    with pytest.raises(InvalidConfigError):
        client.compact(topic_name)


def test_the_schedule_cleans_the_dirtiest_partition(client, topic_name):
    client.create_topic(topic_name, partitions=2, config={**COMPACT, "min.cleanable.dirty.ratio": "0.3"})
    node = ray.get_runtime_context().get_node_id()
    cleaner = ray.get_actor(cleaner_name(node), namespace=NAMESPACE)
    rnd = random.Random(2)
    written: dict[int, tuple[bytes, bytes | None]] = {}
    dirty = client.partition_actor(topic_name, 1)
    load(dirty, rnd, 400, 40, 8, 100, written)  # ~400 KiB of updates to 40 keys: several closed segments
    ray.get(cleaner.configure.remote(interval_s=0.3))
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            stats = ray.get(dirty.stats.remote())
            if stats["cleaner_checkpoint"] > 0:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the scheduled cleaner never cleaned {topic_name}-1: {ray.get(cleaner.status.remote())}")
    finally:
        ray.get(cleaner.configure.remote(interval_s=15.0))
    clean_end = stats["cleaner_checkpoint"]
    assert read_all(dirty) == survivors(written, clean_end)
    assert stats["dirty_ratio"] < 0.3
    history = [h for h in ray.get(cleaner.status.remote())["history"] if h["topic"] == topic_name]
    assert history and all(h["partition"] == 1 for h in history)  # partition 0 is empty: never picked
    assert ray.get(client.partition_actor(topic_name, 0).stats.remote())["cleaner_checkpoint"] == 0


def test_produce_and_fetch_are_not_blocked_while_a_large_partition_is_cleaned(client, topic_name):
    client.create_topic(topic_name, partitions=1, config={**COMPACT, "segment.bytes": str(16 << 20)})
    actor = client.partition_actor(topic_name, 0)
    written: dict[int, tuple[bytes, bytes | None]] = {}
    load(actor, random.Random(3), 4000, 5000, 16, 1000, written)  # ~66 MB
    ray.get(actor.cleaning_view.remote(True))  # roll: everything is cleanable
    probe_key = b"probe"
    latencies: list[tuple[float, float]] = []
    stop = threading.Event()

    def probe() -> None:
        i = 0
        while not stop.is_set():
            t = time.monotonic()
            base = ray.get(actor.append.remote(build_batch([b"p%d" % i], [probe_key])))[0]
            data, _, _ = ray.get(actor.fetch.remote(base, 1 << 16))
            assert decode_records(data)[0].value == b"p%d" % i
            latencies.append((t, time.monotonic() - t))
            i += 1

    worker = threading.Thread(target=probe)
    worker.start()
    try:
        time.sleep(0.3)
        started = time.monotonic()
        [summary] = client.compact(topic_name, roll=False)
        finished = time.monotonic()
    finally:
        stop.set()
        worker.join(30)
    during = [lat for t, lat in latencies if started <= t and t + lat <= finished]
    cleaning = finished - started
    assert summary["dirty_bytes"] > 60e6 and summary["records_removed"] > 40_000
    assert cleaning > 0.1  # the compiled codec cleans these 66 MB in about 0.2 s
    # the partition actor kept answering all along: many round trips, none stuck behind the rewrite
    assert len(during) >= 10, (len(during), cleaning)
    assert statistics.median(during) < 0.1, sorted(during)[-5:]
    assert max(during) < min(1.0, cleaning / 2), (max(during), cleaning)
    end = ray.get(actor.offsets.remote())[1]
    got = read_all(actor)
    assert [g for g in got if g[1] != probe_key] == [w for w in survivors(written, end) if w[1] != probe_key]


def test_sigkill_of_the_cleaner_mid_pass(client, topic_name):
    client.create_topic(topic_name, partitions=1, config={**COMPACT, "segment.bytes": str(8 << 20)})
    actor = client.partition_actor(topic_name, 0)
    written: dict[int, tuple[bytes, bytes | None]] = {}
    load(actor, random.Random(4), 2000, 3000, 16, 1000, written, tombstones=0.01)  # ~33 MB
    ray.get(actor.cleaning_view.remote(True))
    node = ray.get_runtime_context().get_node_id()
    cleaner = ray.get_actor(cleaner_name(node), namespace=NAMESPACE)
    pid = ray.get(cleaner.pid.remote())
    folder = partition_dir(client, topic_name)
    ref = cleaner.compact.remote(topic_name, 0, actor, False)
    deadline = time.monotonic() + 60
    while not any(n.endswith(".cleaned") for n in os.listdir(folder)):
        assert time.monotonic() < deadline, "the cleaner never started writing"
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)  # while it writes .cleaned files
    summary = ray.get(ref, timeout=120)  # Ray restarts the cleaner and retries the call
    assert ray.get(cleaner.pid.remote()) != pid
    assert summary["passes"] >= 1
    end = ray.get(actor.offsets.remote())[1]
    assert read_all(actor) == survivors(written, end)
    names = os.listdir(folder)
    assert not [n for n in names if n.endswith(".cleaned")]  # the killed pass's files are gone
    live = {n[: -len(".log")] for n in names if n.endswith(".log") and "-c" in n}
    # manifests stay until the replaced files go (file.delete.delay.ms); each names a live segment
    assert {n[: -len(".swap")] for n in names if n.endswith(".swap")} <= live
    assert ray.get(actor.stats.remote())["cleaner_checkpoint"] == end


def test_cleaner_metrics_are_exported(client, topic_name):
    client.create_topic(topic_name, partitions=1, config=COMPACT)
    actor = client.partition_actor(topic_name, 0)
    written: dict[int, tuple[bytes, bytes | None]] = {}
    load(actor, random.Random(5), 200, 10, 10, 100, written)
    [summary] = client.compact(topic_name)
    node = next(n for n in ray.nodes() if n["Alive"] and n["NodeID"] == ray.get_runtime_context().get_node_id())
    url = f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
    deadline = time.monotonic() + 60
    lines: list[str] = []
    while time.monotonic() < deadline:
        with urllib.request.urlopen(url, timeout=10) as resp:
            lines = [ln for ln in resp.read().decode().splitlines() if topic_name in ln and not ln.startswith("#")]
        if any("logan_ray_cleaner_records_removed" in ln for ln in lines) and any(
                "logan_ray_cleaner_pass_seconds" in ln for ln in lines):
            break
        time.sleep(2)
    removed = [ln for ln in lines if "logan_ray_cleaner_records_removed" in ln]
    assert removed and float(removed[0].rsplit(" ", 1)[1]) == summary["records_removed"] == 2000 - 10
    assert any("logan_ray_cleaner_bytes_before" in ln for ln in lines)
    assert any("logan_ray_cleaner_pass_seconds" in ln for ln in lines)
