"""Continuous pipelines over topics on Ray: ``logan_ray.stream.run``.

A pipeline runs a function over the records of one or more topics, forever or until
stopped, on Ray actors that are members of one consumer group::

    import pyarrow as pa
    import pyarrow.compute as pc
    import logan_ray
    from logan_ray import stream

    def upper(batch: pa.RecordBatch) -> pa.Table:
        return pa.table({"key": batch["key"], "value": pc.utf8_upper(batch["value"].cast(pa.string()))})

    client = logan_ray.connect()
    pipeline = stream.run(client, topics=["events"], group="upper", fn=upper, output_topic="events-upper",
                          dead_letter_topic="events-dlq", workers=2)
    print(pipeline.status())
    pipeline.stop()

Delivery is at-least-once: a batch's offsets are committed only after its output (and
dead letters) are acknowledged, so a crash redoes at most the uncommitted batches. See
docs/streaming.md.
"""
from __future__ import annotations

from typing import Any, Iterable

from .autoscale import Autoscale
from .batches import DLQ_ERROR, DLQ_OFFSET, DLQ_PARTITION, DLQ_TOPIC, BatchFunction, FunctionFailedError
from .pipeline import Pipeline, PipelineFailedError, PipelineStatus
from .worker import WorkerSpec

__all__ = ["run", "Pipeline", "PipelineStatus", "PipelineFailedError", "Autoscale", "BatchFunction",
           "FunctionFailedError", "DLQ_TOPIC", "DLQ_PARTITION", "DLQ_OFFSET", "DLQ_ERROR"]


def _client(source: Any) -> Any:
    """A Client as given, or one connected to the broker of a data dir (None: the usual lookup)."""
    if source is None or isinstance(source, str):
        from logan_ray.client import connect

        return connect(data_dir=source)
    return source


def run(client_or_data_dir: Any, topics: Iterable[str] | str, group: str, fn: BatchFunction, *,
        output_topic: str | None = None, dead_letter_topic: str | None = None, workers: int = 1,
        num_gpus: float = 0, autoscale: Autoscale | None = None, start: str = "earliest",
        max_batch_records: int = 10_000, session_timeout_ms: int = 6_000, commit_interval_ms: int = 100,
        actor_options: dict[str, Any] | None = None) -> Pipeline:
    """Start a pipeline and return its handle (``status()``, ``scale(n)``, ``stop()``, ``wait()``).

    - ``client_or_data_dir``: a :class:`~logan_ray.client.Client`, or the data dir of a broker to
      connect to (None: the usual lookup of :func:`logan_ray.connect`).
    - ``topics``: the input topics; ``group``: the consumer group whose committed offsets are the
      pipeline's checkpoint (the same group continues where a stopped pipeline left off).
    - ``fn``: called with a ``pyarrow.RecordBatch`` of input records (columns topic, partition,
      offset, timestamp, timestamp_type, key, value, headers; keys and values are bytes); returns a
      RecordBatch or Table with a ``value`` column (and optionally ``key``) for ``output_topic``, or
      None. It runs inside the worker actors, so it must be picklable.
    - ``dead_letter_topic``: where records the function raises on go (record by record, after the
      batch failed), with headers naming their source topic, partition, offset and the error
      (``DLQ_*``). Without one, such a record stops the pipeline (``wait()`` raises).
    - ``workers``: worker actors (group members), each placed softly on a node of the partitions
      it will likely read; ``num_gpus`` per worker, for inference; ``autoscale``: scale between its
      bounds by lag instead (``workers`` is then ignored).
    - ``start``: where partitions without a committed offset begin, "earliest" or "latest".
    - ``session_timeout_ms``: how soon a dead worker's partitions move to the others (6 s at least).
    - ``commit_interval_ms``: how often a worker commits what it has processed and written (Kafka
      Streams' ``commit.interval.ms``; 0: after every batch). A crash redoes at most that much more.
    - ``actor_options``: extra Ray options for the worker actors (``num_cpus``, ``runtime_env``, ...).
    """
    if start not in ("earliest", "latest"):
        raise ValueError(f"start must be 'earliest' or 'latest', got {start!r}")
    if commit_interval_ms < 0:
        raise ValueError(f"commit_interval_ms must be 0 or more, got {commit_interval_ms}")
    topic_list = (topics,) if isinstance(topics, str) else tuple(topics)
    if not topic_list:
        raise ValueError("a pipeline needs at least one input topic")
    if not callable(fn):
        raise TypeError("fn must be a callable taking a pyarrow.RecordBatch")
    spec = WorkerSpec(topics=topic_list, group=group, fn=fn, output_topic=output_topic,
                      dead_letter_topic=dead_letter_topic, start=start, max_batch_records=max_batch_records,
                      session_timeout_ms=session_timeout_ms, commit_interval_ms=commit_interval_ms)
    return Pipeline(_client(client_or_data_dir), spec, workers=workers, num_gpus=num_gpus, autoscale=autoscale,
                    actor_options=actor_options)
