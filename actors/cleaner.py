"""CleanerActor: the log cleaner of one node, Kafka's LogCleaner as a Ray actor.

One per node, because it reads the partitions' segment files directly: closed
segments never change, so the rewrite needs nothing from the partition actor
but a snapshot of its segment list (``cleaning_view``). All the heavy work
(scanning the dirty part into the offset map, recopying segments) runs here,
in the cleaner's own process, so the partition actor keeps serving produce and
fetch; only the final swap (``install_cleaned``: a manifest, a few renames,
milliseconds) runs in the partition actor.

On a schedule (every ``interval_s``) it picks, among this node's partitions of
topics whose cleanup.policy contains ``compact``, the one with the highest
dirty ratio at or above its ``min.cleanable.dirty.ratio``, and runs one pass.
``compact(topic, partition)`` runs passes on demand (``logan-ray compact
TOPIC``, ``Client.compact``). It is a threaded actor: the schedule runs in a
thread of its own, on-demand calls in Ray's call threads, and one lock lets a
single pass run at a time.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import ray
from ray.util import metrics

from logan_ray.storage.cleanable import CleanView, dirty_stats, with_high_watermark
from logan_ray.storage.compaction import DEFAULT_MAP_BYTES, CleanResult, clean, describe, discard

from .names import NAMESPACE, ROUTER_NAME, cleaner_name

log = logging.getLogger("logan_ray.cleaner")

DEFAULT_INTERVAL_S = 15.0  # Kafka's log.cleaner.backoff.ms
MAX_PASSES = 50  # per on-demand call; each pass covers what the offset map holds
_TAGS = ("topic", "partition")
_DURATION_BOUNDARIES = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300]


def _view(handle: Any, roll: bool) -> CleanView:
    """The partition's cleaning view with its leader's high watermark, asked after the view.

    The cleaner stays below the last stable offset, which needs the high
    watermark (a completed transaction is unstable until it passes its marker);
    asked later, it is never older than the view's transactions.
    """
    view = ray.get(handle.cleaning_view.remote(roll))
    return with_high_watermark(view, ray.get(handle.offsets.remote())[1])


class CleanerMetrics:
    """Compaction progress and results on the node's Prometheus endpoint."""

    def __init__(self) -> None:
        t = _TAGS
        self.passes = metrics.Counter("logan_ray_cleaner_passes", "Cleaning passes installed", tag_keys=t)
        self.dirty_bytes = metrics.Counter("logan_ray_cleaner_dirty_bytes", "Dirty bytes scanned into the offset map",
                                           tag_keys=t)
        self.bytes_before = metrics.Counter("logan_ray_cleaner_bytes_before", "Bytes of the segments recopied",
                                            tag_keys=t)
        self.bytes_after = metrics.Counter("logan_ray_cleaner_bytes_after", "Bytes of the cleaned segments",
                                           tag_keys=t)
        self.records_removed = metrics.Counter("logan_ray_cleaner_records_removed", "Records removed by cleaning",
                                               tag_keys=t)
        self.tombstones_removed = metrics.Counter("logan_ray_cleaner_tombstones_removed",
                                                  "Tombstones removed after delete.retention.ms", tag_keys=t)
        self.duration = metrics.Histogram("logan_ray_cleaner_pass_seconds", "Duration of a cleaning pass",
                                          boundaries=_DURATION_BOUNDARIES, tag_keys=t)
        self.dirty_ratio = metrics.Gauge("logan_ray_cleaner_dirty_ratio", "Dirty bytes / cleanable bytes", tag_keys=t)
        self.failures = metrics.Counter("logan_ray_cleaner_failures", "Cleaning passes that failed", tag_keys=t)

    def ratio(self, topic: str, partition: int, value: float) -> None:
        self.dirty_ratio.set(value, {"topic": topic, "partition": str(partition)})

    def done(self, topic: str, partition: int, result: CleanResult) -> None:
        tags = {"topic": topic, "partition": str(partition)}
        s = result.stats
        self.passes.inc(1, tags)
        self.dirty_bytes.inc(s.dirty_bytes, tags)
        self.bytes_before.inc(s.bytes_before, tags)
        self.bytes_after.inc(s.bytes_after, tags)
        if s.records_removed:
            self.records_removed.inc(s.records_removed, tags)
        if s.tombstones_removed:
            self.tombstones_removed.inc(s.tombstones_removed, tags)
        self.duration.observe(s.duration_s, tags)

    def failed(self, topic: str, partition: int) -> None:
        self.failures.inc(1, {"topic": topic, "partition": str(partition)})


class CleanerActor:
    def __init__(self, node_id: str, interval_s: float = DEFAULT_INTERVAL_S,
                 map_bytes: int = DEFAULT_MAP_BYTES) -> None:
        self.node_id = node_id
        self.interval_s = interval_s
        self.map_bytes = map_bytes
        self._pass_lock = threading.Lock()  # one pass at a time: the memory budget is per cleaner
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._router: Any = None
        self._metrics = CleanerMetrics()
        self._history: list[dict[str, Any]] = []  # recent passes, newest last
        self._failed: dict[tuple[str, int], float] = {}  # partition -> when it may be tried again
        self._thread = threading.Thread(target=self._schedule, name="log-cleaner", daemon=True)
        self._thread.start()
        log.info("log cleaner up on node %s (every %.1f s, offset map %d MiB)", node_id[:12], interval_s,
                 map_bytes >> 20)

    # ------------------------------------------------------------------ calls
    def compact(self, topic: str, partition: int, handle: Any, roll: bool = False) -> dict[str, Any]:
        """Clean one partition now, pass after pass until its dirty part is covered.

        ``roll`` first closes the active segment (the active segment is never
        cleaned), so everything produced so far becomes cleanable.
        """
        started = time.perf_counter()
        summary: dict[str, Any] = {"topic": topic, "partition": partition, "passes": 0, "dirty_bytes": 0,
                                   "bytes_before": 0, "bytes_after": 0, "records_removed": 0,
                                   "tombstones_removed": 0, "segments_before": 0, "segments_after": 0}
        with self._pass_lock:
            for i in range(MAX_PASSES):
                view = _view(handle, roll and i == 0)
                if not view.config.compacts:
                    raise ValueError(f"topic {topic!r} has cleanup.policy={view.config.cleanup_policy}: "
                                     "only topics with 'compact' are cleaned")
                outcome = self._run_pass(topic, partition, handle, view, force=True)
                if outcome is None:
                    break
                result, report = outcome
                s = result.stats
                summary["passes"] += 1
                for k in ("dirty_bytes", "bytes_before", "bytes_after", "records_removed", "tombstones_removed"):
                    summary[k] += getattr(s, k)
                if i == 0:
                    summary["segments_before"] = s.segments_before
                summary["segments_after"] = s.segments_after
                summary["checkpoint"] = report[3]
                if report[1] or not s.map_full:  # discarded (the log moved under us) or all covered
                    break
        summary["duration_s"] = time.perf_counter() - started
        return summary

    def run_once(self) -> dict[str, Any] | None:
        """One scheduled round: clean the dirtiest eligible partition of this node, if any."""
        with self._pass_lock:
            choice = self._pick()
            if choice is None:
                return None
            topic, partition, handle, view = choice
            outcome = self._run_pass(topic, partition, handle, view, force=False)
            return None if outcome is None else self._history[-1]

    def configure(self, interval_s: float | None = None, map_bytes: int | None = None) -> None:
        if interval_s is not None:
            self.interval_s = interval_s
            self._wake.set()
        if map_bytes is not None:
            self.map_bytes = map_bytes

    def status(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "pid": os.getpid(), "interval_s": self.interval_s,
                "map_bytes": self.map_bytes, "busy": self._pass_lock.locked(), "history": list(self._history[-20:]),
                "backing_off": {f"{t}-{p}": until for (t, p), until in self._failed.items()}}

    def pid(self) -> int:
        return os.getpid()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    # -------------------------------------------------------------- internals
    def _schedule(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.run_once()
            except Exception:  # keep cleaning other partitions; the reason is in the log
                log.exception("scheduled cleaning round failed")

    def _router_handle(self):
        if self._router is None:
            self._router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
        return self._router

    def _pick(self):
        """The partition with the highest dirty ratio at or above its min.cleanable.dirty.ratio."""
        try:
            targets = ray.get(self._router_handle().cleaner_targets.remote(self.node_id))
        except Exception as e:  # the router is restarting: next round
            self._router = None
            log.debug("no cleaning targets this round: %s", e)
            return None
        best = None
        now = time.monotonic()
        for topic, partition, handle in targets:
            if self._failed.get((topic, partition), 0) > now:
                continue
            try:
                view = _view(handle, False)
            except Exception as e:
                log.debug("skipping %s-%d this round: %s", topic, partition, e)
                continue
            if not view.config.compacts:
                continue
            ds = dirty_stats(view, view.now_ms)
            self._metrics.ratio(topic, partition, ds.ratio)
            if ds.dirty_bytes and ds.ratio >= view.config.min_cleanable_dirty_ratio:
                if best is None or ds.ratio > best[0]:
                    best = (ds.ratio, topic, partition, handle, view)
        return None if best is None else best[1:]

    def _run_pass(self, topic: str, partition: int, handle: Any, view, *, force: bool):
        """Clean here, install there; (result, swap report) or None when there was nothing to do."""
        try:
            result = clean(view, map_bytes=self.map_bytes, force=force)
        except Exception:
            self._metrics.failed(topic, partition)
            self._failed[(topic, partition)] = time.monotonic() + 10 * self.interval_s
            log.exception("cleaning %s-%d failed; it is skipped for a while", topic, partition)
            raise
        if result is None:
            return None
        try:
            report = tuple(ray.get(handle.install_cleaned.remote(result)))
        except BaseException:
            discard(result)
            self._metrics.failed(topic, partition)
            raise
        self._failed.pop((topic, partition), None)
        self._metrics.done(topic, partition, result)
        s = result.stats
        entry = {"topic": topic, "partition": partition, "at": time.time(), "first_dirty": result.first_dirty,
                 "end_offset": result.end_offset, "installed": report[0], "discarded": report[1],
                 "dirty_bytes": s.dirty_bytes, "bytes_before": s.bytes_before, "bytes_after": s.bytes_after,
                 "records_read": s.records_read, "records_removed": s.records_removed,
                 "tombstones_removed": s.tombstones_removed, "duration_s": s.duration_s, "map_full": s.map_full}
        self._history.append(entry)
        del self._history[:-100]
        log.info("%s-%d: %s; swapped %d segments in, %d discarded", topic, partition, describe(result),
                 report[0], report[1])
        return result, report


def cleaner_actor_class():
    """Threaded actor: the schedule thread plus up to three concurrent calls (status while a pass runs)."""
    return ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=3, max_concurrency=4)(CleanerActor)


__all__ = ["CleanerActor", "CleanerMetrics", "cleaner_actor_class", "cleaner_name", "DEFAULT_INTERVAL_S"]
