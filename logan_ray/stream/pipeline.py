"""The driver side of a stream pipeline: starts the worker actors, watches them, reports, stops.

A supervisor thread in the calling process keeps the pipeline at its size: a worker
whose process died (a node lost, a SIGKILL, out of memory) is replaced by a new actor,
which joins the group; the group moves the dead member's partitions once its session
times out, and the new owner starts from their committed offsets, so the records the
dead worker had not committed are processed again (at-least-once) and none is lost. A
worker whose *function* failed with no dead-letter topic stops the whole pipeline
instead: restarting it would fail on the same record forever.

With an :class:`~.autoscale.Autoscale` policy the same thread reads the group's lag
and adds or removes one worker at a time; :meth:`Pipeline.scale` does it by hand.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from .autoscale import Autoscale, Scaler
from .batches import FunctionFailedError
from .placement import worker_nodes
from .worker import WorkerSpec, worker_class

log = logging.getLogger("logan_ray.stream")

START_TIMEOUT_S = 120.0  # a worker's actor must be up by then (a cold Ray worker process takes seconds)
STOP_TIMEOUT_S = 60.0
STATS_TIMEOUT_S = 5.0
TICK_S = 0.5
MAX_WORKER_ERRORS = 10  # workers failing with errors (not deaths) before the pipeline gives up


class PipelineFailedError(RuntimeError):
    """The pipeline stopped because a worker failed for good (see :attr:`PipelineStatus.error`)."""


@dataclass
class PipelineStatus:
    """A snapshot of a pipeline.

    ``records_processed`` counts input records whose batch was committed, summed over the
    workers (a record processed again after a crash or rebalance counts again). ``lag`` is per
    input partition: log end offset minus the group's committed offset.
    """

    state: str  # "running", "stopped" or "failed"
    workers: int
    records_processed: int
    output_records: int
    dead_letters: int
    worker_restarts: int
    lag: dict[tuple[str, int], int] = field(default_factory=dict)
    assignment: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # worker name -> partitions
    error: str | None = None

    @property
    def total_lag(self) -> int:
        return sum(self.lag.values())


@dataclass
class _Worker:
    name: str
    handle: Any
    run_ref: Any
    stats: dict[str, Any] = field(default_factory=dict)


_COUNTS = ("records", "output_records", "dead_letters")


class Pipeline:
    """A running pipeline; made by :func:`logan_ray.stream.run`."""

    def __init__(self, client: Any, spec: WorkerSpec, *, workers: int, num_gpus: float = 0,
                 autoscale: Autoscale | None = None, actor_options: dict[str, Any] | None = None) -> None:
        self.client = client
        self.spec = spec
        self.autoscale = autoscale
        self._num_gpus = num_gpus
        self._actor_options = dict(actor_options or {})
        self._lock = threading.RLock()
        self._workers: list[_Worker] = []
        self._names = itertools.count()
        self._retired = dict.fromkeys(_COUNTS, 0)  # counts of workers that are gone
        self._restarts = 0
        self._errors = 0  # workers that ended with an error (a failed output, say) rather than died
        self._error: str | None = None
        self._stopping = threading.Event()
        self._done = threading.Event()
        self._scaler = Scaler(autoscale) if autoscale is not None else None
        self._next_scale = time.monotonic() + (autoscale.interval_s if autoscale else 0)
        size = autoscale.min_workers if autoscale is not None else workers
        if size < 1:
            raise ValueError(f"a pipeline needs at least one worker, got {size}")
        try:
            self._add_workers(size)
        except BaseException:
            self._shutdown()
            raise
        self._thread = threading.Thread(target=self._supervise, name=f"logan-ray-stream-{spec.group}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ workers
    def _partition_nodes(self) -> list[str | None]:
        nodes: list[str | None] = []
        for topic in self.spec.topics:
            try:
                nodes.extend(node for _handle, node in self.client.partitions(topic, refresh=True))
            except Exception:  # a topic that does not exist yet: its partitions are placed later
                continue
        return nodes

    def _add_workers(self, count: int) -> None:
        """Start ``count`` workers and wait until each actor is up."""
        with self._lock:
            total = len(self._workers) + count
            nodes = worker_nodes(self._partition_nodes(), total)[len(self._workers):]
            cls = worker_class()
            started = []
            for node in nodes:
                name = f"{self.spec.group}-{next(self._names)}"
                options: dict[str, Any] = {"num_cpus": 0, "num_gpus": self._num_gpus, "max_restarts": 0,
                                           **self._actor_options}
                if node is not None and "scheduling_strategy" not in options:
                    options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=True)
                handle = cls.options(**options).remote(self.spec, name)
                started.append((name, handle, handle.ready.remote()))
            ray.get([ready for _, _, ready in started], timeout=START_TIMEOUT_S)
            for name, handle, _ in started:
                self._workers.append(_Worker(name, handle, handle.run.remote()))

    def _stop_workers(self, workers: list[_Worker]) -> None:
        """Drain all first, then let them leave: no member leaves (rebalancing the group) while
        another still commits its last batch."""
        drained = [w.handle.stop.remote(STOP_TIMEOUT_S) for w in workers]
        for w, ref in zip(workers, drained):
            try:
                ray.get(ref, timeout=STOP_TIMEOUT_S + 5)
            except Exception as e:  # dead already: nothing to drain
                log.info("stream worker %s did not drain: %s", w.name, e)
        for w in workers:
            try:
                w.handle.release.remote()
            except Exception:
                pass
        for w in workers:
            try:
                w.stats = ray.get(w.run_ref, timeout=STOP_TIMEOUT_S)
            except Exception as e:
                log.info("stream worker %s ended with %s", w.name, e)
            self._retire(w)
            ray.kill(w.handle, no_restart=True)

    def _retire(self, w: _Worker) -> None:
        for k in _COUNTS:
            self._retired[k] += w.stats.get(k, 0)

    def scale(self, workers: int) -> None:
        """Run ``workers`` workers from now on (the group rebalances once per change)."""
        if workers < 1:
            raise ValueError(f"a pipeline needs at least one worker, got {workers}")
        with self._lock:
            if self._stopping.is_set():
                raise RuntimeError("the pipeline is stopping")
            have = len(self._workers)
            if workers > have:
                self._add_workers(workers - have)
            elif workers < have:
                gone, self._workers = self._workers[workers:], self._workers[:workers]
                self._stop_workers(gone)

    # ---------------------------------------------------------- supervise
    def _supervise(self) -> None:
        while not self._stopping.wait(TICK_S):
            try:
                self._check_workers()
                self._refresh_stats()
                self._maybe_autoscale()
            except Exception as e:  # keep supervising: a transient error must not orphan the workers
                log.warning("stream pipeline %s: supervisor: %s", self.spec.group, e)

    def _check_workers(self) -> None:
        with self._lock:
            if self._stopping.is_set():
                return
            refs = [w.run_ref for w in self._workers]
            ended, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            for w in [w for w in self._workers if w.run_ref in ended]:
                self._workers.remove(w)
                try:
                    w.stats = ray.get(w.run_ref)
                    log.warning("stream worker %s ended on its own; replacing it", w.name)
                except ray.exceptions.RayActorError as e:
                    log.warning("stream worker %s died (%s); replacing it", w.name, type(e).__name__)
                except Exception as e:
                    cause = getattr(e, "cause", None) or e
                    self._errors += 1
                    # The function failed with nowhere to put the record (restarting would fail on it
                    # again), or workers keep failing (e.g. the output topic refuses writes): give up.
                    if isinstance(cause, FunctionFailedError) or self._errors > MAX_WORKER_ERRORS:
                        self._retire(w)
                        ray.kill(w.handle, no_restart=True)
                        self._error = f"worker {w.name}: {cause}"
                        log.error("stream pipeline %s failed: %s", self.spec.group, self._error)
                        threading.Thread(target=self.stop, daemon=True).start()
                        return
                    log.warning("stream worker %s failed (%s); replacing it", w.name, cause)
                self._retire(w)
                ray.kill(w.handle, no_restart=True)
                self._restarts += 1
                self._add_workers(1)

    def _refresh_stats(self) -> None:
        with self._lock:
            workers = list(self._workers)
        refs = [w.handle.stats.remote() for w in workers]
        for w, ref in zip(workers, refs):
            try:
                w.stats = ray.get(ref, timeout=STATS_TIMEOUT_S)
            except Exception:  # dying: _check_workers handles it
                pass

    def _maybe_autoscale(self) -> None:
        if self._scaler is None or time.monotonic() < self._next_scale:
            return
        self._next_scale = time.monotonic() + self._scaler.policy.interval_s
        lag = self.lag()
        with self._lock:
            target = self._scaler.target(len(self._workers), sum(lag.values()), len(lag))
            if target != len(self._workers) and not self._stopping.is_set():
                log.info("stream pipeline %s: lag %d, %d -> %d workers", self.spec.group, sum(lag.values()),
                         len(self._workers), target)
                self.scale(target)

    # ------------------------------------------------------------- report
    def lag(self) -> dict[tuple[str, int], int]:
        """{(topic, partition): log end offset - committed offset} of every input partition."""
        from logan_ray.errors import GroupIdNotFoundError

        committed: dict[tuple[str, int], int] = {}
        try:
            described = self.client.groups.describe(self.spec.group)
            committed = {(o["topic"], o["partition"]): o["committed"] for o in described["offsets"]}
        except GroupIdNotFoundError:
            pass
        out = {}
        for topic in self.spec.topics:
            try:
                offsets = self.client.partition_offsets(topic)
            except Exception:  # not created yet
                continue
            for p, (start, end) in sorted(offsets.items()):
                base = committed.get((topic, p))
                if base is None:
                    base = start if self.spec.start == "earliest" else end
                out[(topic, p)] = max(0, end - base)
        return out

    def status(self) -> PipelineStatus:
        """Workers, counts, the error if any, and the lag per input partition (asks every worker
        for its counts and the group for its offsets)."""
        self._refresh_stats()
        with self._lock:
            workers = list(self._workers)
            counts = dict(self._retired)
            restarts, error = self._restarts, self._error
        for w in workers:
            for k in _COUNTS:
                counts[k] += w.stats.get(k, 0)
        state = "failed" if error else ("stopped" if self._done.is_set() else "running")
        return PipelineStatus(state=state, workers=len(workers), records_processed=counts["records"],
                              output_records=counts["output_records"], dead_letters=counts["dead_letters"],
                              worker_restarts=restarts, lag=self.lag(), error=error,
                              assignment={w.name: [tuple(tp) for tp in w.stats.get("assignment", ())]
                                          for w in workers})

    def workers(self) -> list[Any]:
        """The worker actors' handles (e.g. for ``ray.get(h.stats.remote())``)."""
        with self._lock:
            return [w.handle for w in self._workers]

    # ---------------------------------------------------------- lifecycle
    def stop(self) -> PipelineStatus:
        """Stop cleanly: every worker commits what it has processed, then all leave the group.
        A later :func:`run` with the same group continues from there. Idempotent."""
        self._stopping.set()
        if threading.current_thread() is not getattr(self, "_thread", None) and hasattr(self, "_thread"):
            self._thread.join()
        self._shutdown()
        return self.status()

    def _shutdown(self) -> None:
        with self._lock:
            workers, self._workers = self._workers, []
            if workers:
                self._stop_workers(workers)
        self._done.set()

    def wait(self, timeout: float | None = None) -> PipelineStatus:
        """Block until the pipeline stops (another thread's ``stop`` or a failure); raises
        PipelineFailedError if it failed, TimeoutError if still running after ``timeout``."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"the pipeline {self.spec.group!r} still runs after {timeout} s")
        if self._error:
            raise PipelineFailedError(self._error)
        return self.status()

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
