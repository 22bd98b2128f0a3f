"""Idempotent-producer snapshots: ``<20-digit offset>.snapshot`` files in a partition folder.

Why: without them a restarted partition must read log data to learn each
producer's last sequence numbers, and a producer whose batches all lie in older
segments is forgotten (its next batch looks like it comes from a stranger).
As Kafka does, the state is written at every segment roll and at clean
shutdown, named by the offset it is valid at (every batch below it applied);
opening loads the newest readable snapshot and replays only the batch headers
after it.

The file is Kafka's producer snapshot layout, version 1 (big endian):
``version int16 | crc uint32 (CRC32C of the rest) | count int32 | entries``,
each entry ``producer_id int64, epoch int16, last_sequence int32,
last_offset int64, offset_delta int32, timestamp int64, coordinator_epoch
int32, current_txn_first_offset int64``. Kafka writes one entry per producer
(its last batch); logan-ray writes one per retained batch, oldest first, so the
five-batch duplicate window survives a restart (a Kafka reader keeps the last
entry per producer, which is what Kafka itself would have written). The
timestamp is the batch's LogAppendTime on LogAppendTime topics, else the
producer's last append time; the topic's current ``message.timestamp.type``
tells which when loading. Every row of a producer carries its
``coordinator_epoch`` and ``current_txn_first_offset`` (-1: no open
transaction), so a restart knows the transactions still open; a producer with
no retained batch (it only got markers) is one row with ``last_sequence`` -1,
as Kafka writes it.

Consistency with retention and compaction: snapshots above the log end (a
crash cut the log back) are deleted at open; those below the log start go when
retention or DeleteRecords moves it, except the newest, which still describes
producers (KIP-360 keeps producer state after its records are deleted).
Compaction may drop a producer's newest batches from closed segments, so a
replay that crosses cleaned segments (only when the newest snapshot was
unreadable) forgets every producer whose latest batch it cannot vouch for
instead of trusting stale sequence numbers; such a producer is then treated as
unknown, which the partition accepts.
"""
from __future__ import annotations

import logging
import os
import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import crc32c as _crc32c

from .batch_header import BatchHeader
from .control_records import EndTxnMarker
from .file_modes import private_opener
from .producer_state import DEFAULT_EXPIRATION_MS, ProducerBatch, ProducerEntry, ProducerStateTable
from .txn_state import CompletedTxn

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
VERSION = 1
_HEAD = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_SEQ_MASK = 0x7FFFFFFF


class CorruptSnapshotError(ValueError):
    """A snapshot file that cannot be trusted (torn, truncated, bad CRC or version)."""


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, snapshot_name(offset))


def list_snapshots(directory: str) -> list[int]:
    """Offsets of the snapshot files in ``directory``, ascending."""
    out = []
    for name in os.listdir(directory):
        stem = name[: -len(SNAPSHOT_SUFFIX)]
        if name.endswith(SNAPSHOT_SUFFIX) and len(stem) == 20 and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


# -- format ---------------------------------------------------------------------

def encode(entries: Iterable[ProducerEntry]) -> bytes:
    rows = []
    for e in entries:
        txn, coord = e.current_txn_first_offset, e.coordinator_epoch
        if not e.batches:
            rows.append(_ENTRY.pack(e.producer_id, e.epoch, -1, -1, 0, e.last_timestamp, coord, txn))
        for b in e.batches:
            delta = (b.last_seq - b.first_seq) & _SEQ_MASK
            stamp = b.log_append_time if b.log_append_time >= 0 else e.last_timestamp
            rows.append(_ENTRY.pack(e.producer_id, e.epoch, b.last_seq, b.base_offset + delta, delta, stamp, coord, txn))
    body = _COUNT.pack(len(rows)) + b"".join(rows)
    return _HEAD.pack(VERSION, _crc32c.crc32c(body)) + body


def decode(data: bytes, *, log_append_time: bool = False) -> list[ProducerEntry]:
    """Entries of a snapshot; raises CorruptSnapshotError unless the file is whole and intact."""
    if len(data) < _HEAD.size + _COUNT.size:
        raise CorruptSnapshotError(f"{len(data)} bytes is shorter than a snapshot header")
    version, crc = _HEAD.unpack_from(data)
    if version != VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    body = memoryview(data)[_HEAD.size:]
    if _crc32c.crc32c(body) != crc:
        raise CorruptSnapshotError("CRC mismatch")
    (count,) = _COUNT.unpack_from(body)
    if count < 0 or len(body) != _COUNT.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"{count} entries do not match {len(body)} bytes")
    grouped: dict[int, tuple[int, int, list[ProducerBatch], int, int]] = {}
    for pid, epoch, last_seq, last_offset, delta, stamp, coord, txn in _ENTRY.iter_unpack(body[_COUNT.size:]):
        if pid < 0 or last_seq < -1 or delta < 0 or (last_seq == -1 and delta != 0) or txn < -1:
            raise CorruptSnapshotError(f"impossible entry for producer {pid}")
        _, last_ts, batches, _, _ = grouped.get(pid, (epoch, -1, [], -1, -1))
        if last_seq >= 0:
            first = (last_seq - delta) & _SEQ_MASK
            batches.append(ProducerBatch(first, last_seq, last_offset - delta, stamp if log_append_time else -1))
        grouped[pid] = (epoch, max(last_ts, stamp), batches, txn, coord)
    return [ProducerEntry(pid, epoch, ts, tuple(b), txn, coord) for pid, (epoch, ts, b, txn, coord) in grouped.items()]


# -- files ----------------------------------------------------------------------

def write_snapshot(directory: str, offset: int, table: ProducerStateTable, *, durable: bool) -> str:
    """Write the table as the snapshot valid at ``offset`` (temp file + rename: never half visible).

    Without ``durable`` nothing is fsynced: after a power loss the file may be
    missing or torn, which loading detects and falls back from.
    """
    path = snapshot_path(directory, offset)
    tmp = path + ".tmp"
    with open(tmp, "wb", opener=private_opener) as f:
        f.write(encode(table.entries()))
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if durable:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return path


def read_snapshot(directory: str, offset: int, *, log_append_time: bool = False) -> list[ProducerEntry]:
    with open(snapshot_path(directory, offset), "rb") as f:
        return decode(f.read(), log_append_time=log_append_time)


def delete_snapshots(directory: str, *, below: int | None = None, above: int | None = None,
                     keep_newest: bool = False) -> list[int]:
    """Remove snapshots with offsets < ``below`` or > ``above``; the offsets removed."""
    offsets = list_snapshots(directory)
    newest = offsets[-1] if offsets and keep_newest else None
    gone = []
    for offset in offsets:
        if offset == newest:
            continue
        if (below is not None and offset < below) or (above is not None and offset > above):
            try:
                os.remove(snapshot_path(directory, offset))
            except FileNotFoundError:
                pass
            gone.append(offset)
    return gone


# -- loading --------------------------------------------------------------------

@dataclass
class ProducerStateLoad:
    """How opening a partition rebuilt its producer state (kept for stats and tests)."""

    snapshot_offset: int | None = None  # the snapshot used, None when none was readable
    replayed_from: int = 0  # first offset whose batch headers were read from the log
    batches_replayed: int = 0
    corrupt_snapshots: list[int] = field(default_factory=list)
    stale_snapshots: list[int] = field(default_factory=list)  # above the log end: deleted
    expired: int = 0
    forgotten_after_compaction: int = 0
    duration_s: float = 0.0


Replay = Callable[[int], Iterator[tuple[BatchHeader, bool]]]


def load_producer_state(
    directory: str,
    *,
    log_end: int,
    fallback_from: int,
    replay: Replay,
    now_ms: int,
    expiration_ms: int = DEFAULT_EXPIRATION_MS,
    log_append_time: bool = False,
    replay_from_at_most: int | None = None,
    marker_of: Callable[[BatchHeader], EndTxnMarker | None] | None = None,
    on_complete: Callable[[CompletedTxn], None] | None = None,
) -> tuple[ProducerStateTable, ProducerStateLoad]:
    """The producer state of a partition: newest readable snapshot plus the batches after it.

    ``replay(offset)`` yields ``(header, from_cleaned_segment)`` for every batch
    from ``offset`` to the log end. With no readable snapshot the headers from
    ``fallback_from`` (the newest segment's base) are replayed instead, as
    before snapshots existed.

    Transactions: ``marker_of(header)`` reads the marker of a control batch
    (without it markers are skipped and transactions stay open), and
    ``on_complete`` sees every transaction a replayed marker ends. With
    ``replay_from_at_most`` the replay starts at or before that offset (the
    newest snapshot not after it), so those completions cover every marker
    from there on (the log rebuilds transaction indexes with them).
    """
    started = time.perf_counter()
    report = ProducerStateLoad()
    report.stale_snapshots = delete_snapshots(directory, above=log_end)
    table = ProducerStateTable()
    start = fallback_from if replay_from_at_most is None else min(fallback_from, replay_from_at_most)
    for offset in reversed(list_snapshots(directory)):
        if replay_from_at_most is not None and offset > replay_from_at_most:
            continue
        try:
            entries = read_snapshot(directory, offset, log_append_time=log_append_time)
        except (OSError, CorruptSnapshotError) as e:
            log.warning("ignoring producer snapshot %s: %s", snapshot_path(directory, offset), e)
            report.corrupt_snapshots.append(offset)
            try:
                os.remove(snapshot_path(directory, offset))
            except OSError:
                pass
            continue
        table.load(entries)
        report.snapshot_offset = start = offset
        break
    report.replayed_from = start
    latest_from_cleaned: dict[int, bool] = {}
    crossed_cleaned = False
    for h, cleaned in replay(start):
        if h.is_control:
            marker = marker_of(h) if marker_of is not None and h.producer_id >= 0 else None
            if marker is not None:
                done = table.complete_txn(h, h.base_offset, marker, now_ms)
                if on_complete is not None:
                    on_complete(done)
        else:
            table.replay(h, now_ms)
        report.batches_replayed += 1
        if h.producer_id >= 0:
            latest_from_cleaned[h.producer_id] = cleaned
        crossed_cleaned |= cleaned
    if crossed_cleaned:
        doubtful = [e.producer_id for e in table.entries() if latest_from_cleaned.get(e.producer_id, True)]
        table.forget(doubtful)
        report.forgotten_after_compaction = len(doubtful)
    report.expired = len(table.expire(now_ms, expiration_ms))
    report.duration_s = time.perf_counter() - started
    return table, report


__all__ = [
    "SNAPSHOT_SUFFIX",
    "CorruptSnapshotError",
    "ProducerStateLoad",
    "delete_snapshots",
    "list_snapshots",
    "load_producer_state",
    "read_snapshot",
    "snapshot_name",
    "write_snapshot",
]
