"""Spark on the same Ray cluster (raydp): topics as Spark DataFrames.

``session()`` starts Spark with what it needs on Java 17 set for the user: the
``--add-opens`` flags for the driver, the executors and raydp's app master
(without them Arrow conversions between Spark and Ray fail inside the JVM and
the next job hangs), and ``PYSPARK_PYTHON`` pointing at this interpreter so
Spark's Python workers import the same packages. ``stop()`` leaves no Java
process behind: besides stopping raydp it waits for raydp's app master and
executors to exit and shuts down PySpark's driver JVM, which ``SparkSession.stop``
keeps alive for the life of the Python process.

``read_topic``/``write_topic`` go through Ray Datasets
(``Dataset.to_spark`` / ``ray.data.from_spark``), so Spark never speaks the
Kafka protocol to logan-ray.
"""
from __future__ import annotations

import os
import sys
import time
import uuid
from typing import Any, Sequence

import pyarrow as pa

#: What Spark's launcher adds for the driver on Java 17 (JavaModuleOptions),
#: netty's reflection switch Arrow needs, and what Ray's Java serialiser
#: reflects into; raydp's JVMs get none of it by default.
JAVA17_OPTIONS = (
    "-XX:+IgnoreUnrecognizedVMOptions",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
    "--add-opens=java.base/sun.security.action=ALL-UNNAMED",
    "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
    # Ray's Java runtime (FST serialiser in raydp's app master and executors)
    # reflects into these as well when it ships results and errors.
    "--add-opens=java.base/java.math=ALL-UNNAMED",
    "--add-opens=java.base/java.text=ALL-UNNAMED",
    "--add-opens=java.base/java.time=ALL-UNNAMED",
    "--add-opens=java.base/java.util.regex=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.ref=ALL-UNNAMED",
    "--add-opens=java.sql/java.sql=ALL-UNNAMED",
    "-Djdk.reflect.useDirectMethodHandle=false",
    "-Dio.netty.tryReflectionSetAccessible=true",
)
JAVA_OPTION_KEYS = (
    "spark.driver.extraJavaOptions",
    "spark.executor.extraJavaOptions",
    "spark.ray.raydp_app_master.extraJavaOptions",
)
MASTER_SUFFIX = "_SPARK_MASTER"  # raydp names its app master actor app_name + this
SPARK_PARTITION_BYTES = 128 << 20  # Arrow bytes per Spark partition when converting a Dataset

_state: dict[str, Any] = {}


def spark_configs(configs: dict[str, str] | None = None) -> dict[str, str]:
    """``configs`` plus the Java 17 flags (appended to any the caller set) and the Python to use."""
    out = {k: str(v) for k, v in (configs or {}).items()}
    flags = " ".join(JAVA17_OPTIONS)
    for key in JAVA_OPTION_KEYS:
        out[key] = f"{out[key]} {flags}" if out.get(key) else flags
    out.setdefault("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    out.setdefault("spark.pyspark.python", sys.executable)
    out.setdefault("spark.pyspark.driver.python", sys.executable)
    return out


def session(app_name: str = "logan-ray", num_executors: int = 1, executor_cores: int = 1,
            executor_memory: str | int = "1g", *, configs: dict[str, str] | None = None,
            fault_tolerant_mode: bool = True, data_dir: str | None = None, address: str | None = None):
    """A SparkSession running on the Ray cluster logan-ray uses (started embedded if none runs)."""
    import ray
    import raydp

    from .client import init_ray

    if _state.get("spark") is not None:
        raise RuntimeError("a logan-ray Spark session is already running; call logan_ray.spark.stop() first")
    owns_ray = False
    if not ray.is_initialized():
        owns_ray = init_ray(address, data_dir)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    before = _java_pids()
    spark = raydp.init_spark(app_name, num_executors, executor_cores, executor_memory,
                             fault_tolerant_mode=fault_tolerant_mode, configs=spark_configs(configs))
    _state.update(spark=spark, app_name=app_name, owns_ray=owns_ray, java_before=before)
    return spark


def stop(timeout_s: float = 60.0) -> None:
    """Stop Spark and wait until its JVMs (driver, app master, executors) are gone."""
    import ray
    import raydp
    from pyspark import SparkContext

    if _state.get("spark") is None:
        return
    app_name = _state["app_name"]
    ours = _java_pids() - _state.get("java_before", set())
    try:
        raydp.stop_spark(cleanup_data=True)
    finally:
        _shutdown_driver_jvm(SparkContext)
        if ray.is_initialized():
            _wait_actor_gone(app_name + MASTER_SUFFIX, timeout_s)
        _reap(ours, timeout_s)
        owns_ray = _state.get("owns_ray")
        _state.clear()
        if owns_ray and ray.is_initialized():
            ray.shutdown()


def _shutdown_driver_jvm(SparkContext) -> None:
    """PySpark keeps its gateway JVM after SparkSession.stop(); end it so a new one starts clean."""
    gateway = getattr(SparkContext, "_gateway", None)
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    except Exception:  # the JVM may already be gone
        pass
    if proc is not None:
        try:
            proc.stdin.close()  # the JVM exits when its stdin pipe closes
        except Exception:
            pass
        try:
            proc.wait(timeout=30)
        except Exception:
            proc.kill()
            proc.wait(timeout=10)
    SparkContext._gateway = None
    SparkContext._jvm = None


def _wait_actor_gone(name: str, timeout_s: float) -> None:
    import ray

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get_actor(name)
        except ValueError:
            return
        time.sleep(0.2)
    try:
        ray.kill(ray.get_actor(name), no_restart=True)
    except ValueError:
        pass


def _java_pids() -> set[int]:
    import psutil

    pids = set()
    for p in psutil.process_iter(["name", "pid"]):
        if p.info["name"] == "java":
            pids.add(p.info["pid"])
    return pids


def _reap(pids: set[int], timeout_s: float) -> None:
    """Wait for the JVMs this session started to exit; kill the ones that do not."""
    import psutil

    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    _gone, alive = psutil.wait_procs(procs, timeout=timeout_s)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=10)


# ------------------------------------------------------------------ topics


def read_topic(spark, topic: str, start: Any = "earliest", end: Any = "latest", *,
               partitions: Sequence[int] | None = None, value_format: str | None = None,
               value_type: Any = None, expand_value: bool = False, columns: Sequence[str] | None = None,
               client: Any = None, via: str = "arrow", **kwargs: Any):
    """A Spark DataFrame of a topic's records (see ``logan_ray.data.read_topic`` for the options)."""
    from . import data

    ds = data.read_topic(topic, start, end, partitions=partitions, value_format=value_format,
                         value_type=value_type, expand_value=expand_value, columns=columns, client=client, **kwargs)
    return dataset_to_spark(spark, ds, via=via)


def dataset_to_spark(spark, ds, via: str = "arrow"):
    """A Spark DataFrame over a Ray Dataset's blocks.

    ``via="arrow"`` hands each block to Spark as Arrow record batches
    (``mapInArrow``); ``via="raydp"`` is ``Dataset.to_spark``, whose
    ``mapInPandas`` turns every binary value and every headers list into a
    Python object twice (Arrow -> pandas -> Arrow) and is several times slower
    for record columns. Both fetch the blocks in Spark's Python workers from
    the Ray object store; the blocks stay pinned (by raydp's app master actor)
    until the Spark session stops, as with ``Dataset.to_spark``.
    """
    import ray

    # Materialising is free (every block is needed up front anyway) and tells
    # whether there is a row at all: raydp's conversion cannot handle none.
    ds = ds.materialize()
    schema = ds.schema()
    arrow_schema = getattr(schema, "base_schema", schema)
    if ds.count() == 0:
        return spark.createDataFrame([], _spark_schema(arrow_schema))
    if via == "raydp":
        return ds.to_spark(spark)
    if via != "arrow":
        raise ValueError(f"via must be 'arrow' or 'raydp', got {via!r}")
    refs = ds.to_arrow_refs()
    holder_name = spark.sparkContext.appName + MASTER_SUFFIX
    holder = ray.get_actor(holder_name)
    key = uuid.uuid4().hex
    ray.get(holder.add_objects.remote(key, refs))
    groups = _group_blocks(len(refs), ds.size_bytes(), spark.sparkContext.defaultParallelism)
    ctx = ray.get_runtime_context()
    fetch = _block_fetcher(ctx.gcs_address, ctx.namespace, holder_name, key, groups, arrow_schema)
    parts = spark.range(0, len(groups), 1, numPartitions=len(groups))
    return parts.mapInArrow(fetch, _spark_schema(arrow_schema))


def _group_blocks(blocks: int, size_bytes: int, parallelism: int) -> list[list[int]]:
    """Consecutive blocks per Spark partition: enough partitions for every core, none tiny.

    Each Spark task costs a fixed ~0.1-0.2 s on top of its rows, so a
    partition per (often small) Ray block would dominate small and medium reads.
    """
    by_size = -(-size_bytes // SPARK_PARTITION_BYTES) if size_bytes else 1
    count = max(1, min(blocks, max(parallelism, by_size)))
    bounds = [round(i * blocks / count) for i in range(count + 1)]
    return [list(range(a, b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def _block_fetcher(address: str, namespace: str, holder_name: str, key: str, groups: list[list[int]],
                   schema: pa.Schema):
    """The function Spark's Python workers run: partition ids in, their blocks' record batches out."""

    def fetch(batches):
        import ray

        if not ray.is_initialized():  # Spark reuses its Python workers: one attach per worker
            ray.init(address=address, namespace=namespace, log_to_driver=False, logging_level="ERROR",
                     configure_logging=False)
        holder = ray.get_actor(holder_name)
        for batch in batches:
            for part in batch.column(0).to_pylist():
                block_refs = ray.get([holder.get_object.remote(key, i) for i in groups[part]])
                for table in ray.get(block_refs):
                    if table.schema != schema:
                        table = table.cast(schema)
                    yield from table.to_batches()

    return fetch


def _spark_schema(arrow_schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f.name, from_arrow_type(f.type), f.nullable) for f in arrow_schema])


def write_topic(df, topic: str, *, key: str | None = "key", value: Any = "value", client: Any = None,
                **kwargs: Any) -> dict[int, int]:
    """Write a Spark DataFrame into a topic (columns as in ``logan_ray.data.write_topic``)."""
    import ray

    from . import data

    if not df.columns:
        raise ValueError("cannot write a DataFrame without columns")
    ds = ray.data.from_spark(df)
    return data.write_topic(ds, topic, key=key, value=value, client=client, **kwargs)
