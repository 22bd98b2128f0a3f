"""Rows/s from a topic into a Spark DataFrame: read_topic vs ray.data.read_kafka vs a Parquet file.

All three end as a Spark DataFrame on the same Spark-on-Ray session and are
consumed by the same action (Spark's "noop" sink, which materialises every
column of every row), so the numbers differ only in how rows get there:

* read_topic: logan_ray.spark.read_topic (node-local segment reads, Arrow decode,
  Ray Dataset -> Spark via mapInArrow); also with via="raydp" (Dataset.to_spark)
* read_kafka: ray.data.read_kafka (confluent-kafka consumers) through logan-ray's
  Kafka gateway, then the same Dataset -> Spark step as read_topic, so only the
  source differs (--kafka-to-spark: Dataset.to_spark instead); "n/a" when no
  gateway is available
* parquet: the same rows written to one Parquet file, spark.read.parquet

Each also gets a "Ray Dataset only" time (the dataset materialised, no Spark).
Every path is warmed up once on a tiny topic first (JVM, Spark's Python
worker attaching to Ray, Ray Data workers), so the times are steady-state.

Run: python bench/spark.py [--records 1000000] [--partitions 4] [--value-size 100]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from needs import need  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)

if __name__ == "__main__":
    need("logan_ray", "ray", "pyarrow", "pyspark", "raydp", commands=("java",))

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_AUTH_MODE", "token")  # before Ray reads its config (see client.init_ray)

import machine  # noqa: E402

TOPIC = "bench-spark"


def fill_topic(client, records: int, partitions: int, value_size: int) -> None:
    """Append whole 5,000-record batches straight to the partition actors (not what is measured)."""
    import ray

    from logan_ray.storage.record_builder import build_batch

    client.create_topic(TOPIC, partitions=partitions)
    actors = [client.partition_actor(TOPIC, p) for p in range(partitions)]
    pad = "x" * max(0, value_size - 40)
    per_batch = 5_000  # ~0.5 MiB batches, under the default max.message.bytes
    refs = []
    ts = 1_700_000_000_000
    for start in range(0, records, per_batch):
        n = min(per_batch, records - start)
        values = [json.dumps({"i": i, "user": f"u{i % 1000}", "pad": pad}).encode() for i in range(start, start + n)]
        keys = [f"u{i % 1000}".encode() for i in range(start, start + n)]
        refs.append(actors[(start // per_batch) % partitions].append.remote(build_batch(values, keys, timestamps=ts)))
        if len(refs) >= 16:
            ray.get(refs)
            refs = []
    ray.get(refs)


def timed(label: str, fn) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    s = time.perf_counter() - t
    print(f"  {label}: {s:.2f} s", flush=True)
    return s, out


def gateway_endpoint(client, data_dir: str) -> tuple[str | None, bool]:
    """The broker's Kafka endpoint, or one started here; (None, False) if there is no gateway."""
    from logan_ray.client import read_broker_file

    info = read_broker_file(data_dir) or {}
    if info.get("kafka"):
        return info["kafka"].split(",")[0], False
    try:
        import ray

        from logan_ray.gateway import start_gateways
    except ImportError:
        return None, False
    here = ray.get_runtime_context().get_node_id()
    return start_gateways("127.0.0.1", 0, nodes=[here])[here], True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--skip-kafka", action="store_true")
    ap.add_argument("--kafka-to-spark", action="store_true",
                    help="convert read_kafka's dataset with Dataset.to_spark instead of the Arrow path")
    args = ap.parse_args()

    import pyarrow.parquet as pq
    import ray

    import logan_ray
    from logan_ray import data as ldata
    from logan_ray import spark as lspark

    print(machine.describe())
    n = args.records
    with tempfile.TemporaryDirectory() as d:
        client = logan_ray.connect(data_dir=os.path.join(d, "broker"))
        started_gateway = False
        try:
            ray.data.DataContext.get_current().enable_progress_bars = False
            fill_topic(client, n, args.partitions, args.value_size)
            print(f"topic {TOPIC}: {n} records in {args.partitions} partitions, "
                  f"{sum(s['size_bytes'] for s in client.status() if s['topic'] == TOPIC) / 2**20:.0f} MiB")

            parquet = os.path.join(d, "rows.parquet")
            table = ldata.read_topic(TOPIC, client=client).to_arrow_refs()
            pq.write_table(__import__("pyarrow").concat_tables(ray.get(table)), parquet)
            del table

            bootstrap, started_gateway = (None, False) if args.skip_kafka else gateway_endpoint(client, d)

            spark = lspark.session("logan-ray-bench", num_executors=1, executor_cores=1, executor_memory="2g",
                                   configs={"spark.ui.showConsoleProgress": "false"})
            spark.sparkContext.setLogLevel("ERROR")
            # Warm-up, not measured: the JVM, Spark's Python worker (which attaches to
            # Ray once) and Ray Data's workers, through every path measured below.
            client.create_topic("bench-warm", partitions=1)
            with client.producer() as p:
                p.send_batch("bench-warm", [b"{}"] * 10, partition=0)
            for via in ("arrow", "raydp"):
                lspark.read_topic(spark, "bench-warm", client=client, via=via).write.format("noop").mode(
                    "overwrite").save()
            if bootstrap:
                ray.data.read_kafka("bench-warm", bootstrap_servers=bootstrap).materialize()
            spark.read.parquet(parquet).limit(10).collect()
            results: dict[str, dict[str, float | None]] = {}

            print("Ray Dataset only (materialised):")
            s, ds = timed("read_topic", lambda: ldata.read_topic(TOPIC, client=client).materialize())
            assert ds.count() == n
            results["read_topic"] = {"dataset": n / s}
            del ds
            if bootstrap:
                s, ds = timed("read_kafka", lambda: ray.data.read_kafka(
                    TOPIC, bootstrap_servers=bootstrap, start_offset="earliest", end_offset="latest").materialize())
                assert ds.count() == n, ds.count()
                results["read_kafka"] = {"dataset": n / s}
                del ds
            else:
                results["read_kafka"] = {"dataset": None}
            s, ds = timed("parquet", lambda: ray.data.read_parquet(parquet).materialize())
            results["parquet"] = {"dataset": n / s}
            del ds

            def consume(df) -> None:
                df.write.format("noop").mode("overwrite").save()

            print("Into a Spark DataFrame (noop sink: every column of every row):")
            s, _ = timed("read_topic", lambda: consume(lspark.read_topic(spark, TOPIC, client=client)))
            results["read_topic"]["spark"] = n / s
            try:
                s, _ = timed("read_topic, via='raydp' (Dataset.to_spark)", lambda: consume(
                    lspark.read_topic(spark, TOPIC, client=client, via="raydp")))
                raydp_rate: float | str = n / s
            except Exception as e:  # pyspark's pandas path fails on large nested (headers) columns
                raydp_rate = f"fails: {type(e).__name__}"
                print(f"  read_topic, via='raydp' failed: {str(e).splitlines()[0][:200]}")
            results["read_topic, via='raydp'"] = {"dataset": results["read_topic"]["dataset"], "spark": raydp_rate}
            if bootstrap:
                def via_kafka():
                    ds = ray.data.read_kafka(TOPIC, bootstrap_servers=bootstrap, start_offset="earliest",
                                             end_offset="latest")
                    # the same Dataset -> Spark step as read_topic, so only the source differs
                    consume(lspark.dataset_to_spark(spark, ds, via="raydp" if args.kafka_to_spark else "arrow"))
                s, _ = timed("read_kafka", via_kafka)
                results["read_kafka"]["spark"] = n / s
            else:
                results["read_kafka"]["spark"] = None
            s, _ = timed("parquet", lambda: consume(spark.read.parquet(parquet)))
            results["parquet"]["spark"] = n / s
            lspark.stop()

            def fmt(v: float | str | None) -> str:
                if v is None:
                    return "n/a: gateway not available"
                return v if isinstance(v, str) else f"{v:,.0f}"

            print(f"\nrows/s, {n:,} records, {args.partitions} partitions, ~{args.value_size}-byte JSON values")
            print(f"{'source':26} {'Ray Dataset':>28} {'Spark DataFrame':>28}")
            for name, r in results.items():
                print(f"{name:26} {fmt(r['dataset']):>28} {fmt(r['spark']):>28}")
            rk = results["read_kafka"]
            if rk["spark"]:
                print(f"read_topic / read_kafka: {results['read_topic']['spark'] / rk['spark']:.1f}x into Spark, "
                      f"{results['read_topic']['dataset'] / rk['dataset']:.1f}x as a Ray Dataset")
        finally:
            lspark.stop()
            if started_gateway:
                from logan_ray.gateway import stop_gateways

                stop_gateways([ray.get_runtime_context().get_node_id()])
            client.close()


if __name__ == "__main__":
    main()
