"""Where the controller's state is kept: a file on the router's node and the GCS's key-value store.

Why two copies: the file alone is one disk, the head's (issue 33: a head whose disk is gone used to
start a router with no topics, and auto-creation then gave an existing topic name a new id). Ray's
GCS keeps its key-value store in Redis when its fault tolerance is on (``RAY_REDIS_ADDRESS``, the
shipped ``cluster.yaml``; Redis with ``appendfsync always`` answers a write once it is on its disk,
on its own host), so a router that starts on any node, or on a node whose data dir was wiped, finds
the state there. Without fault tolerance the store lives in the GCS's memory and goes with a Ray
restart; the file is then the durable copy. The choice against KRaft: docs/architecture.md.

Each save carries a ``revision`` one above the last; a load takes the copy with the higher one, so a
node's old file never hides newer state in the store, nor an empty store a node's file. A save is
done only when both copies hold it: a store that does not answer fails the save (the change is not
acknowledged) instead of leaving it on one disk.
"""
from __future__ import annotations

import json
import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from logan_ray.storage.atomic import atomic_write

log = logging.getLogger("logan_ray.metadata")

KV_NAMESPACE = b"logan_ray"
KV_TIMEOUT_S = 10.0  # a GCS that restarts answers within Ray's reconnect window; longer is a failed save


class KeyValue(Protocol):
    def get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes) -> None: ...


class GcsKeyValue:
    """The GCS's internal key-value store (Ray's own components keep their state there too)."""

    def __init__(self, timeout_s: float = KV_TIMEOUT_S) -> None:
        from ray.experimental.internal_kv import internal_kv_get_gcs_client

        self._gcs = internal_kv_get_gcs_client()
        if self._gcs is None:
            raise RuntimeError("the GCS key-value store is reached from a Ray worker or driver only")
        self._timeout_s = timeout_s

    def get(self, key: bytes) -> bytes | None:
        return self._gcs.internal_kv_get(key, KV_NAMESPACE, timeout=self._timeout_s)

    def put(self, key: bytes, value: bytes) -> None:
        self._gcs.internal_kv_put(key, value, True, KV_NAMESPACE, timeout=self._timeout_s)


def kv_key(data_dir: str) -> bytes:
    """One key per data dir path: every node of a cluster uses the same path (so a router on any node
    finds it), and brokers on different data dirs of one Ray cluster (tests, one after another) keep
    apart."""
    return b"cluster-metadata:" + os.path.abspath(data_dir).encode()


class MetadataStore:
    """Loads and saves the controller's metadata (one JSON document) in both places."""

    def __init__(self, path: str, key: bytes, kv: KeyValue | None) -> None:
        self.path = path
        self.key = key
        self._kv = kv
        self.revision = 0
        self.source = "none"  # where the last load found the state: "file", "store" or "none"
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="metadata-save")

    def load(self) -> dict[str, Any] | None:
        """The newest copy, or None when neither exists (a new cluster)."""
        local = self._read_file()
        remote = self._read_kv()
        candidates = [(m.get("revision", 0), name, m) for name, m in (("file", local), ("store", remote)) if m]
        if not candidates:
            return None
        # the file wins a tie: a copy written by this node's own last save
        revision, self.source, meta = max(candidates, key=lambda c: (c[0], c[1] == "file"))
        self.revision = revision
        if local is not None and remote is not None and local.get("revision", 0) != remote.get("revision", 0):
            log.warning("metadata: the file has revision %s, the GCS store %s; using the %s",
                        local.get("revision", 0), remote.get("revision", 0), self.source)
        return meta

    def save(self, meta: dict[str, Any]) -> None:
        """Write ``meta`` now and wait for both copies (after any save still in flight)."""
        self.submit(meta).result()

    def submit(self, meta: dict[str, Any]) -> Future:
        """Encode ``meta`` now, in the caller's thread (the state must not change while it is
        encoded), and write it on the store's own thread: an fsync and a GCS call (seconds when the
        GCS is loaded) then run beside the caller's event loop. Writes go one at a time, in order."""
        self.revision += 1
        meta["revision"] = self.revision
        return self._writer.submit(self._write, json.dumps(meta, indent=1, sort_keys=True).encode())

    def _write(self, data: bytes) -> None:
        atomic_write(self.path, data, mode=0o600)  # 0600: it holds SCRAM credentials and ACLs
        if self._kv is not None:
            self._kv.put(self.key, data)

    def _read_file(self) -> dict[str, Any] | None:
        try:
            with open(self.path, "rb") as f:
                return json.loads(f.read())
        except FileNotFoundError:
            return None

    def _read_kv(self) -> dict[str, Any] | None:
        if self._kv is None:
            return None
        data = self._kv.get(self.key)
        return json.loads(data) if data else None
