"""The transaction index: ``<20-digit base offset>.txnindex``, the aborted transactions of one segment.

Why: a ``read_committed`` fetch must tell the client which producers' records
in the fetched range belong to aborted transactions, without reading the data.
Kafka keeps, beside each segment, one entry per transaction whose ABORT marker
was written in that segment; a fetch collects the entries overlapping its
range, segment after segment, until an entry's last stable offset shows that
no later segment can hold one (:func:`collect_aborted`).

Each entry is Kafka's ``AbortedTxn``, 34 bytes big endian:
``version int16 (0) | producer_id int64 | first_offset int64 | last_offset
int64 (the marker) | last_stable_offset int64`` (the LSO when the abort was
written). Entries are appended in marker order, so last offsets increase.

The file is derived data, like the offset index: appended without fsync (the
segment's flush syncs it), loaded whole (a few entries per segment), a torn
tail (a partial entry, an unknown version, offsets out of order or outside the
segment) is cut off at load, and a missing file makes the segment's index
*stale*: the log rebuilds it by replaying the batches (see :mod:`.log_lifecycle`).
"""
from __future__ import annotations

import logging
import os
import struct
from typing import Iterable, NamedTuple

from .file_modes import FILE_MODE
from .segment_files import TXNINDEX_SUFFIX
from .sync import fsync_path

log = logging.getLogger(__name__)

ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int  # the partition's LSO once the abort was written

    def encode(self) -> bytes:
        return _ENTRY.pack(ABORTED_TXN_VERSION, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)


def decode_entries(data: bytes, base_offset: int = 0) -> tuple[list[AbortedTxn], int]:
    """``(entries, bytes of the sound prefix)``: parsing stops at the first entry that cannot be right."""
    entries: list[AbortedTxn] = []
    last = -1
    good = 0
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, pid, first, last_offset, lso = _ENTRY.unpack_from(data, pos)
        if version != ABORTED_TXN_VERSION or pid < 0 or not 0 <= first <= last_offset \
                or last_offset < base_offset or last_offset <= last or lso < 0:
            break
        entries.append(AbortedTxn(pid, first, last_offset, lso))
        last = last_offset
        good = pos + ENTRY_SIZE
    return entries, good


class TxnIndex:
    """One segment's aborted transactions, in memory and in its file."""

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []
        self.stale = False  # missing or reset: the log must rebuild it from the batches

    # -- loading --------------------------------------------------------------
    def load(self, next_offset: int | None = None) -> bool:
        """Read the file; False (and :attr:`stale`) when it is missing. A torn tail is cut off.

        With ``next_offset`` (the segment's end), entries whose marker lies past it are cut too:
        they describe records a truncation removed.
        """
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            self.entries, self.stale = [], True
            return False
        entries, good = decode_entries(data, self.base_offset)
        if next_offset is not None:
            kept = [e for e in entries if e.last_offset < next_offset]
            good = len(kept) * ENTRY_SIZE
            entries = kept
        if good != len(data):
            log.warning("cutting %d bytes off the transaction index %s (a torn or stale tail)", len(data) - good, self.path)
            os.truncate(self.path, good)
        self.entries, self.stale = entries, False
        return True

    # -- changing ---------------------------------------------------------------
    def append(self, entry: AbortedTxn) -> None:
        """Add an aborted transaction whose marker follows every entry's (Kafka refuses otherwise)."""
        if self.entries and entry.last_offset <= self.entries[-1].last_offset:
            raise ValueError(f"aborted transaction ending at {entry.last_offset} does not follow the last entry "
                             f"of {self.path}, ending at {self.entries[-1].last_offset}")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
        try:
            os.pwrite(fd, entry.encode(), len(self.entries) * ENTRY_SIZE)
        finally:
            os.close(fd)
        self.entries.append(entry)

    def reset(self) -> None:
        """Empty the index (file included), to be rebuilt: Kafka's ``reset`` before a segment's recovery."""
        self._write(())
        self.stale = True

    def replace(self, entries: Iterable[AbortedTxn]) -> None:
        """Write exactly ``entries`` (a cleaned segment adopting those of the segments it replaces)."""
        self._write(tuple(entries))
        self.stale = False

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after ``offset`` (the log was cut back there)."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self._write(kept)

    def _write(self, entries: tuple[AbortedTxn, ...] | list[AbortedTxn]) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
        try:
            data = b"".join(e.encode() for e in entries)
            if data:
                os.write(fd, data)
        finally:
            os.close(fd)
        self.entries = list(entries)

    def sync(self) -> None:
        if os.path.exists(self.path):
            fsync_path(self.path)

    def delete(self) -> None:
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

    # -- reading --------------------------------------------------------------
    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping ``[fetch_offset, upper_bound)``, and whether the search is complete.

        Kafka's ``collectAbortedTxns``: an entry whose last stable offset reaches
        the upper bound proves that every transaction aborted later started at
        or after the bound, so later segments need not be read.
        """
        found = []
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                found.append(e)
            if e.last_stable_offset >= upper_bound:
                return found, True
        return found, False


def collect_aborted(indexes: Iterable[TxnIndex], fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
    """Aborted transactions overlapping a fetch of ``[fetch_offset, upper_bound)``.

    ``indexes`` are those of the segment holding ``fetch_offset`` and every later
    one, in order; an aborted transaction's entry sits in its marker's segment,
    which is at or after the fetch offset's if the two overlap.
    """
    out: list[AbortedTxn] = []
    for index in indexes:
        found, complete = index.collect(fetch_offset, upper_bound)
        out.extend(found)
        if complete:
            break
    return out


__all__ = ["ABORTED_TXN_VERSION", "AbortedTxn", "ENTRY_SIZE", "TXNINDEX_SUFFIX", "TxnIndex", "collect_aborted",
           "decode_entries"]
