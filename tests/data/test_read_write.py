"""read_topic / write_topic on a real Ray runtime and real partition actors."""
from __future__ import annotations

import datetime as dt
import json
import time

import pyarrow as pa
import pytest
import ray

from logan_ray.data import read_topic, write_topic
from logan_ray.data.arrow_records import COLUMNS
from logan_ray.data.source import ReadOptions, ReadRange, plan_ranges, read_range
from logan_ray.errors import UnknownPartitionError
from logan_ray.partitioner import partition_for_key

BASE_TS = 1_750_000_000_000


def produce(client, topic: str, n: int, partitions: int = 3, compression: str = "none") -> list[tuple]:
    """n JSON records keyed k0..k9, timestamp BASE_TS + i; returns (key, value, ts) in send order."""
    client.create_topic(topic, partitions=partitions)
    sent = []
    with client.producer(compression=compression, linger_ms=1) as producer:
        for i in range(n):
            key = f"k{i % 10}".encode()
            value = json.dumps({"i": i, "name": f"n{i}", "score": i / 2}).encode()
            producer.send(topic, value, key, timestamp_ms=BASE_TS + i,
                          headers=[("trace", str(i).encode())] if i % 250 == 0 else None)
            sent.append((key, value, BASE_TS + i))
    return sent


def rows_of(ds) -> list[dict]:
    return sorted(ds.take_all(), key=lambda r: (r["partition"], r["offset"]))


@pytest.mark.parametrize("compression", ["none", "zstd", "snappy"])
def test_whole_topic_matches_what_was_produced(client, topic_name, compression):
    sent = produce(client, topic_name, 3000, compression=compression)
    rows = rows_of(read_topic(topic_name, client=client))
    assert len(rows) == len(sent)
    assert sorted((r["key"], r["value"], r["timestamp"]) for r in rows) == sorted(sent)
    # every key sits on its murmur2 partition, offsets are dense per partition
    for r in rows:
        assert r["partition"] == partition_for_key(r["key"], 3)
        assert r["topic"] == topic_name
    by_part: dict[int, list[int]] = {}
    for r in rows:
        by_part.setdefault(r["partition"], []).append(r["offset"])
    assert all(offs == list(range(len(offs))) for offs in by_part.values())
    hdr = [r for r in rows if r["headers"]]
    assert sorted(json.loads(r["value"])["i"] for r in hdr) == list(range(0, 3000, 250))
    assert all(r["headers"] == [{"key": "trace", "value": str(json.loads(r["value"])["i"]).encode()}] for r in hdr)


def test_offset_ranges_partitions_and_split_tasks(client, topic_name):
    produce(client, topic_name, 2000)
    ends = client.partition_offsets(topic_name)
    ds = read_topic(topic_name, start=10, end=60, client=client)
    rows = rows_of(ds)
    assert len(rows) == 50 * len(ends)
    assert {r["offset"] for r in rows} == set(range(10, 60))
    # per-partition specs, one partition only, and ranges split across several tasks
    one = rows_of(read_topic(topic_name, start={1: 5}, end={1: "latest"}, partitions=[1], client=client,
                             records_per_task=97))
    assert [r["offset"] for r in one] == list(range(5, ends[1][1]))
    assert len(plan_ranges(client, topic_name, 5, "latest", [1], records_per_task=97)) > 3
    # latest is fixed when the dataset is planned
    ds = read_topic(topic_name, client=client, columns=["partition", "offset"])
    with client.producer() as p:
        p.send(topic_name, b"late", b"k1")
    assert ds.count() == 2000
    assert read_topic(topic_name, client=client).count() == 2001
    with pytest.raises(UnknownPartitionError):
        read_topic(topic_name, partitions=[7], client=client)
    with pytest.raises(ValueError):
        read_topic(topic_name, start="yesterday", client=client)


def test_timestamp_ranges(client, topic_name):
    produce(client, topic_name, 1000)
    rows = rows_of(read_topic(topic_name, start={"timestamp": BASE_TS + 100}, end={"timestamp": BASE_TS + 200},
                              client=client))
    assert sorted(r["timestamp"] for r in rows) == list(range(BASE_TS + 100, BASE_TS + 200))
    since = dt.datetime.fromtimestamp((BASE_TS + 990) / 1000, tz=dt.timezone.utc)
    rows = rows_of(read_topic(topic_name, start=since, client=client))
    assert sorted(r["timestamp"] for r in rows) == list(range(BASE_TS + 990, BASE_TS + 1000))
    assert read_topic(topic_name, start={"timestamp": BASE_TS + 10_000}, client=client).count() == 0


def test_empty_topic_and_empty_range(client, topic_name):
    client.create_topic(topic_name, partitions=2)
    ds = read_topic(topic_name, client=client)
    assert ds.count() == 0
    assert ds.schema().names == list(COLUMNS)
    assert read_topic(topic_name, value_format="json", client=client).count() == 0


def test_json_values_as_columns(client, topic_name):
    produce(client, topic_name, 500)
    ds = read_topic(topic_name, value_format="json", expand_value=True, client=client)
    assert ds.schema().names == ["topic", "partition", "offset", "timestamp", "timestamp_type", "key",
                                 "i", "name", "score", "headers"]
    rows = ds.take_all()
    assert sorted(r["i"] for r in rows) == list(range(500))
    assert all(r["name"] == f"n{r['i']}" and r["score"] == r["i"] / 2 for r in rows)
    nested = read_topic(topic_name, value_format="json", columns=["offset", "value"], client=client).take(1)[0]
    assert set(nested["value"]) == {"i", "name", "score"}
    text = read_topic(topic_name, value_format="str", columns=["value"], client=client).take(1)[0]
    assert json.loads(text["value"])["name"].startswith("n")


def test_remote_fallback_reads_through_the_actor(client, topic_name):
    """A task on another node (here: a node id that is not ours) fetches bytes from the actor."""
    produce(client, topic_name, 600, partitions=1, compression="lz4")
    (local,) = plan_ranges(client, topic_name)
    remote = ReadRange(local.topic, 0, local.actor, "not-this-node", 17, 590)
    opts = ReadOptions(("offset", "value"), None, None, False, True, chunk_bytes=4096)

    @ray.remote(num_cpus=0)
    def run(rng, o):
        return pa.concat_tables(list(read_range(rng, o)))

    t_remote = ray.get(run.remote(remote, opts))
    t_local = ray.get(run.remote(ReadRange(local.topic, 0, local.actor, local.node_id, 17, 590), opts))
    assert t_remote.column("offset").to_pylist() == list(range(17, 590))
    assert t_remote.equals(t_local)


def test_write_dataset_then_read_with_python_api(client, topic_name):
    client.create_topic(topic_name, partitions=4)
    n = 5000
    table = pa.table({"key": [f"user-{i % 97}" for i in range(n)],
                      "value": [f"event-{i}".encode() for i in range(n)],
                      "ts": [BASE_TS + i for i in range(n)]})
    ds = ray.data.from_arrow(table).repartition(3)
    written = write_topic(ds, topic_name, timestamp="ts", client=client, compression="zstd")
    assert sum(written.values()) == n
    offsets = client.partition_offsets(topic_name)
    assert {p: end for p, (_s, end) in offsets.items()} == {p: written.get(p, 0) for p in range(4)}

    consumer = client.consumer(topic_name, auto_offset_reset="earliest")
    got = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        got.extend(consumer.poll(500))
    consumer.close()
    assert len(got) == n
    assert sorted((r.key, r.value, r.timestamp) for r in got) == sorted(
        (f"user-{i % 97}".encode(), f"event-{i}".encode(), BASE_TS + i) for i in range(n))
    assert all(r.partition == partition_for_key(r.key, 4) for r in got)


def test_write_columns_as_json_objects_and_explicit_partitions(client, topic_name):
    client.create_topic(topic_name, partitions=3)
    ds = ray.data.from_items([{"id": i, "name": f"x{i}", "part": i % 3} for i in range(30)])
    written = write_topic(ds, topic_name, key="id", value=["id", "name"], partition="part", client=client)
    assert written == {0: 10, 1: 10, 2: 10}
    rows = read_topic(topic_name, value_format="json", expand_value=True, client=client).take_all()
    assert sorted((r["partition"], r["id"], r["name"], r["key"]) for r in rows) == sorted(
        (i % 3, i, f"x{i}", str(i).encode()) for i in range(30))
    # a round trip: what read_topic yields writes back as is (key, value, headers)
    copy = topic_name + "-copy"
    src = read_topic(topic_name, client=client)
    assert sum(write_topic(src, copy, headers="headers", client=client).values()) == 30


def test_a_dataset_planned_before_its_partitions_hibernated_reads_them_after(client, topic_name):
    from logan_ray.actors.names import NAMESPACE, ROUTER_NAME

    produce(client, topic_name, 30, partitions=2)
    ds = read_topic(topic_name, client=client)  # planned now: the ranges name the running actors
    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    for p in range(2):
        assert ray.get(router.hibernate.remote(topic_name, p, idle_only=False))
    rows = rows_of(ds)
    assert len(rows) == 30 and {r["partition"] for r in rows} == {0, 1}
