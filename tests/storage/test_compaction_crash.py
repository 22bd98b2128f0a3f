"""Crash safety of compaction with a real process: a child cleans, the parent SIGKILLs it.

The child is killed either at a named step of a pass (via the compaction crash
hook, which SIGKILLs its own process there: while writing groups, between the
manifest and the renames, before the checkpoint, while deleting replaced
files...) or after a random delay. After every kill the parent reopens the log
(recovery) and checks it against a model of everything ever appended: no offset
moved, every visible record is the one written at that offset, every key's
latest value is there, and a deleted key never shows an older value. Between
rounds the parent appends more updates, so the same folder goes through many
cleanings, recoveries and swaps on top of swaps.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

from compaction_helpers import Rec, read_all, seal, write_updates

from logan_ray.storage.config import TopicConfig
from logan_ray.storage.log import PartitionLog
from logan_ray.storage.offset_map import ENTRY_BYTES

CONFIG = {"cleanup.policy": "compact", "segment.bytes": "6000", "index.interval.bytes": "400",
          "delete.retention.ms": "0", "file.delete.delay.ms": "0"}
STEPS = ["map-built", "group-written", "cleaned-synced", "before-manifest", "manifest-written", "renamed",
         "old-files-deleted", "checkpoint-written"]
KEYS = 60

CHILD = r"""
import os, signal, sys
from logan_ray.storage import compaction
from logan_ray.storage.config import TopicConfig
from logan_ray.storage.log import PartitionLog

directory, step, nth, map_bytes, config = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
seen = 0

def hook(name):
    global seen
    if name == step:
        seen += 1
        if seen == nth:
            os.kill(os.getpid(), signal.SIGKILL)

compaction.crash_hook = hook
log = PartitionLog(directory, TopicConfig.from_dict(dict(kv.split("=", 1) for kv in config.split(","))))
print("ready", flush=True)
passes = compaction.compact(log, map_bytes=map_bytes)
log.close()
print("done %d" % len(passes), flush=True)
"""


def open_log(directory: str) -> PartitionLog:
    return PartitionLog(directory, TopicConfig.from_dict(CONFIG))


def check(lg: PartitionLog, model: dict[int, Rec], end: int) -> None:
    assert lg.log_end_offset == end
    names = os.listdir(lg.directory)
    assert not [n for n in names if n.endswith((".cleaned", ".swap"))], names
    got = read_all(lg)
    offsets = [r.offset for r in got]
    assert offsets == sorted(set(offsets))
    for r in got:
        assert model[r.offset] == r, f"offset {r.offset} holds {r}, but {model[r.offset]} was written there"
    latest: dict[bytes, Rec] = {}
    for r in model.values():
        if r.key is not None:
            latest[r.key] = r
    last_seen = {r.key: r for r in got}
    for key, want in latest.items():
        if want.value is not None:
            assert last_seen.get(key) == want, f"latest value of {key!r} lost: {want}"
        else:  # a delete: the tombstone is still there, or the key is gone entirely
            assert last_seen.get(key, want) == want, f"{key!r} was deleted but shows {last_seen.get(key)}"


def run_child(directory: str, step: str, nth: int, delay: float, map_bytes: int) -> str:
    config = ",".join(f"{k}={v}" for k, v in CONFIG.items())
    child = subprocess.Popen([sys.executable, "-c", CHILD, directory, step, str(nth), str(map_bytes), config],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = child.stdout.readline()
        assert line.startswith(b"ready"), (line, child.stderr.read() if child.poll() is not None else b"")
        if step == "timer":
            time.sleep(delay)
            child.send_signal(signal.SIGKILL)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    if child.returncode == -signal.SIGKILL:
        return "killed"
    assert child.returncode == 0, err.decode()
    assert out.startswith(b"done"), out
    return "done"


def test_sigkill_during_cleaning_never_loses_a_record(tmp_path):
    d = str(tmp_path / "t-0")
    rnd = random.Random(20260601)
    lg = open_log(d)
    written = write_updates(lg, rnd, 250, KEYS, tombstones=0.08, codecs=["none", "lz4"])
    seal(lg)
    lg.close()
    model = {r.offset: r for r in written}
    outcomes: dict[str, int] = {}
    plan = [(s, n) for s in STEPS for n in (1, 2)] + [("timer", 0)] * 8
    rnd.shuffle(plan)
    for step, nth in plan:
        delay = rnd.uniform(0.0, 0.12)
        map_bytes = rnd.choice([25, 45, 200]) * ENTRY_BYTES  # 25/45 of 60 keys: several passes
        outcome = run_child(d, step, nth, delay, map_bytes)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        lg = open_log(d)  # recovery
        check(lg, model, max(model) + 1)
        more = write_updates(lg, rnd, rnd.randint(5, 40), KEYS, tombstones=0.08, codecs=["none", "zstd"])
        model.update((r.offset, r) for r in more)
        seal(lg)
        if rnd.random() < 0.5:
            lg.close()
        else:  # drop it like a crash: no clean-shutdown marker, recovery rescans
            lg._flusher.stop()
            for seg in lg._segments:
                seg.close()
            lg._closed = True
    assert outcomes.get("killed", 0) >= len(STEPS)  # every named step was reached and killed at least once
    run_child(d, "none", 1, 0, 200 * ENTRY_BYTES)  # a final, uninterrupted cleaning
    lg = open_log(d)
    check(lg, model, max(model) + 1)
    visible = read_all(lg)
    assert len({r.key for r in visible}) == len(visible)  # fully compacted: one record per key at most
    lg.close()
