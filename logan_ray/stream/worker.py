"""The worker actor of a stream pipeline: one consumer-group member running the user's function.

Each worker is an ordinary :class:`~logan_ray.consumer.Consumer` in the pipeline's group
(the group splits the partitions among workers and moves them when a worker comes or
goes) and an ordinary :class:`~logan_ray.producer.Producer` for the output and
dead-letter topics. Its loop is poll_arrow -> function -> produce -> flush -> commit (every
``commit_interval_ms``, 100 ms by default, of what was flushed by then),
strictly in that order, so a committed offset always means "its output is acknowledged":
a crash anywhere before the commit makes the next owner of the partition redo the batch
(at-least-once), never skip it.

The actor is threaded (``max_concurrency``) so ``stats`` and ``stop`` are answered while
``run`` loops. Stopping is two-step so a whole pipeline stops without duplicates: ``stop``
returns once the worker has committed its last batch but is still a group member (no
rebalance yet disturbs the others' last commits); ``release`` then lets it leave.
"""
from __future__ import annotations

import functools
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from .batches import BatchFunction, Outcome, apply, next_offsets

log = logging.getLogger("logan_ray.stream")

#: How long a stopped worker waits for ``release`` before leaving the group on its own.
RELEASE_WAIT_S = 60.0


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs, shipped to its actor once."""

    topics: tuple[str, ...]
    group: str
    fn: BatchFunction
    output_topic: str | None = None
    dead_letter_topic: str | None = None
    start: str = "earliest"  # where a partition without a committed offset starts
    max_batch_records: int = 10_000
    poll_timeout_ms: int = 200
    session_timeout_ms: int = 6_000
    heartbeat_interval_ms: int = 1_000
    rebalance_timeout_ms: int = 60_000
    acks: int | str = 1
    #: how often processed offsets are committed (Kafka Streams' commit.interval.ms); a commit after every
    #: batch took 7.8 ms of a 12 ms cycle (bench/streaming.py). 0: after every batch
    commit_interval_ms: int = 100


class StreamWorker:
    """One pipeline worker; created through :func:`worker_class` as a threaded Ray actor."""

    def __init__(self, spec: WorkerSpec, name: str) -> None:
        self.spec = spec
        self.name = name
        self._stop = threading.Event()
        self._drained = threading.Event()
        self._release = threading.Event()
        self._lock = threading.Lock()
        self._counts = {"records": 0, "batches": 0, "output_records": 0, "dead_letters": 0, "commit_failures": 0}
        self._assignment: list[tuple[str, int]] = []
        #: offsets whose output is acknowledged but not committed yet, and the counts they carry
        self._pending: dict[tuple[str, int], int] = {}
        self._pending_counts = {"records": 0, "batches": 0, "output_records": 0, "dead_letters": 0}
        self._committed_at = 0.0

    # ------------------------------------------------------------ control
    def ready(self) -> dict[str, Any]:
        """Where this worker runs (the supervisor waits for this before counting it as started)."""
        import ray

        return {"name": self.name, "pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id()}

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {**self._counts, "name": self.name, "pid": os.getpid(), "assignment": list(self._assignment)}

    def stop(self, timeout_s: float = 60.0) -> bool:
        """Finish and commit the batch in hand, then stop polling; True once drained (still a member)."""
        self._stop.set()
        return self._drained.wait(timeout_s)

    def release(self) -> None:
        """After ``stop``: leave the group now."""
        self._release.set()

    # --------------------------------------------------------------- loop
    def run(self) -> dict[str, Any]:
        """Process records until stopped; the final counts. Raises what the function raised when the
        pipeline has no dead-letter topic (the supervisor then stops the pipeline)."""
        from logan_ray.client import connect

        spec = self.spec
        client = connect(embedded=False)
        consumer = client.consumer(
            group=spec.group, enable_auto_commit=False, auto_offset_reset=spec.start,
            max_poll_records=spec.max_batch_records, session_timeout_ms=spec.session_timeout_ms,
            heartbeat_interval_ms=spec.heartbeat_interval_ms, max_poll_interval_ms=spec.rebalance_timeout_ms,
            client_id=f"logan-ray-stream-{self.name}", on_assign=self._on_assign, on_revoke=self._on_revoke)
        producer = None
        if spec.output_topic is not None or spec.dead_letter_topic is not None:
            producer = client.producer(acks=spec.acks)
        try:
            consumer.subscribe(list(spec.topics))
            while not self._stop.is_set():
                table = consumer.poll_arrow(timeout_ms=spec.poll_timeout_ms)
                if table.num_rows:
                    self._process(table, consumer, producer)
                if self._pending and time.monotonic() - self._committed_at >= spec.commit_interval_ms / 1000:
                    self._commit(consumer)
            if self._pending:
                self._commit(consumer)  # the last batches, before the worker counts as drained
            self._drained.set()
            self._release.wait(RELEASE_WAIT_S)
        finally:
            self._drained.set()
            if producer is not None:
                producer.close()
            consumer.close(autocommit=False)
            client.close()
        return self.stats()

    def _process(self, table: pa.Table, consumer: Any, producer: Any) -> None:
        spec = self.spec
        batch = table.combine_chunks().to_batches()[0]
        outcome: Outcome = apply(spec.fn, batch, want_output=spec.output_topic is not None,
                                 dead_letters=spec.dead_letter_topic is not None)
        if producer is not None:
            if spec.output_topic is not None:
                for out in outcome.outputs:
                    producer.send_batch(spec.output_topic, out.select(
                        [c for c in ("key", "value") if c in out.column_names]))
            for d in outcome.dead_letters:
                producer.send(spec.dead_letter_topic, d.value, d.key, headers=d.headers)
            producer.flush()  # raises if an output was not acknowledged: nothing is committed then
        with self._lock:  # acknowledged: may be committed from now on
            self._pending.update(next_offsets(table))
            self._pending_counts["records"] += outcome.rows
            self._pending_counts["batches"] += 1
            self._pending_counts["output_records"] += outcome.output_rows
            self._pending_counts["dead_letters"] += len(outcome.dead_letters)

    def _commit(self, consumer: Any) -> None:
        """Commit the processed offsets (their outputs are acknowledged); the counts follow the commit."""
        from logan_ray.errors import GroupError, LoganError

        with self._lock:
            offsets, counts = self._pending, self._pending_counts
            self._pending = {}
            self._pending_counts = {k: 0 for k in counts}
        self._committed_at = time.monotonic()
        try:
            consumer.commit(offsets)
        except (GroupError, LoganError) as e:
            # The group rebalanced under these batches: their partitions' next owner starts from the last
            # commit and does these records again (at-least-once); this worker rejoins on its next poll.
            with self._lock:
                self._counts["commit_failures"] += 1
            log.warning("stream worker %s: commit failed, the records will be processed again: %s", self.name, e)
            return
        with self._lock:
            for k, n in counts.items():
                self._counts[k] += n

    def _on_assign(self, partitions: list) -> None:
        with self._lock:
            self._assignment = sorted((tp.topic, tp.partition) for tp in partitions)

    def _on_revoke(self, _partitions: list) -> None:
        with self._lock:
            self._assignment = []
            # never commit for partitions another worker may own now (it starts from their last commit
            # and commits past them): their processed records are done again there (at-least-once)
            self._pending = {}
            self._pending_counts = {k: 0 for k in self._pending_counts}


@functools.cache
def worker_class() -> Any:
    """StreamWorker as a threaded Ray actor class (``run`` loops while ``stats``/``stop`` answer)."""
    import ray

    return ray.remote(max_concurrency=4)(StreamWorker)
