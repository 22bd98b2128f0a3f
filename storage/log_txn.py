"""A partition log's transactions: markers applied on append, the aborted-transaction index, the LSO.

The producer state (:mod:`.producer_state`, :mod:`.txn_state`) knows which
transactions are open; this module connects it to the segments. When a marker
batch is appended (by a leader or a follower) the producer's transaction ends,
and an ABORT adds an :class:`~.txn_index.AbortedTxn` to the ``.txnindex`` of the
segment holding the marker, as Kafka's ``LogSegment.updateTxnIndex`` does. At
open, the indexes recovery found stale (missing, or of a rescanned segment)
are rebuilt by the same replay that rebuilds the producer state
(:func:`rebuild_hooks`), so they match what the appends wrote.

Reads: :func:`last_stable_offset` for a high watermark, and
:func:`aborted_transactions` for a ``read_committed`` fetch range.
"""
from __future__ import annotations

import logging

from .batch_header import BatchHeader, Buffer
from .control_records import EndTxnMarker, read_marker
from .errors import CorruptRecordError, InvalidRecordError
from .log_state import LogState
from .txn_index import AbortedTxn, collect_aborted
from .txn_state import CompletedTxn

log = logging.getLogger(__name__)


def markers_of(buf: Buffer, headers: list[tuple[int, BatchHeader]]) -> dict[int, EndTxnMarker]:
    """Position -> marker of each transaction marker among validated batches (before anything is written).

    A control batch whose record is malformed is refused here (InvalidRecordError): it would
    otherwise end up in the log, unreadable to the producer state and to consumers.
    """
    out = {}
    for pos, h in headers:
        if h.is_control and h.producer_id >= 0:
            marker = read_marker(buf, pos, h)
            if marker is not None:
                out[pos] = marker
    return out


def index_aborted(st: LogState, done: CompletedTxn, *, only_stale: bool = False) -> None:
    """Write an aborted transaction into the index of its marker's segment; the caller holds ``st.lock``."""
    if not done.aborted:
        return
    seg = st.segments[st.segment_at(done.last_offset)]
    if only_stale and not seg.txnindex.stale:
        return  # a trusted index already holds it
    seg.txnindex.append(AbortedTxn(done.producer_id, done.first_offset, done.last_offset, done.last_stable_offset))


def marker_in_log(st: LogState, h: BatchHeader) -> EndTxnMarker | None:
    """The marker of a control batch already in the log (None: not a marker, or unreadable)."""
    if h.producer_id < 0:
        return None
    seg = st.segments[st.segment_at(h.base_offset)]
    try:
        position, base = seg.find(h.base_offset)
        if base != h.base_offset:
            return None
        return read_marker(seg.pread(position, h.size), 0, h)
    except (CorruptRecordError, InvalidRecordError) as e:
        log.warning("%s: the control batch at offset %d is unreadable, its transaction stays open: %s",
                    st.name, h.base_offset, e)
        return None


def rebuild_hooks(st: LogState) -> dict[str, object]:
    """Arguments for :func:`.producer_snapshot.load_producer_state` that also rebuild stale indexes.

    The replay starts at or before the first segment whose index is stale, so
    every marker in such a segment is seen with the transactions open before it.
    """
    stale = [s.base_offset for s in st.segments if s.txnindex.stale]
    hooks: dict[str, object] = {"marker_of": lambda h: marker_in_log(st, h)}
    if stale:
        hooks["replay_from_at_most"] = stale[0]
        hooks["on_complete"] = lambda done: index_aborted(st, done, only_stale=True)
    return hooks


def stale_indexes_rebuilt(st: LogState) -> None:
    """After the replay: every stale index is whole again, on disk too (an empty file means "no abort")."""
    for seg in st.segments:
        if seg.txnindex.stale:
            seg.txnindex.replace(seg.txnindex.entries)


def last_stable_offset(st: LogState, high_watermark: int) -> int:
    """The LSO for ``high_watermark``: no ``read_committed`` consumer reads at or past it.

    Never below the log start (Kafka's ``updateFirstUnstableOffset``): retention
    or DeleteRecords may remove the start of a transaction still open, and a
    bound below the log start would send a consumer out of range instead of
    making it wait for the marker.
    """
    with st.lock:
        hw = min(high_watermark, st.log_end)
        return max(st.producer_state.txns.last_stable_offset(hw), min(st.log_start, hw))


def aborted_transactions(st: LogState, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
    """Aborted transactions overlapping ``[fetch_offset, upper_bound)`` (Kafka's ``collectAbortedTransactions``)."""
    with st.lock:
        st.check_open()
        first = st.segment_at(max(fetch_offset, st.log_start))
        return collect_aborted((s.txnindex for s in st.segments[first:]), fetch_offset, upper_bound)


def for_cleaner(st: LogState) -> tuple[tuple[tuple[int, int], ...], tuple[AbortedTxn, ...], tuple[tuple[int, int], ...]]:
    """What a cleaner must know of the transactions; the caller holds ``st.lock``.

    ``(unstable, aborted, last batches)``: the transactions not known to be
    stable, as ``(first offset, marker offset or -1 while open)`` (the cleaner
    stays below the oldest: :func:`.cleanable.last_stable_offset`), the aborted
    ones of the segments' ``.txnindex`` files, whose data the cleaner
    removes, and ``(producer id, base offset)`` of each producer's last data
    batch, which the cleaner never removes whole (Kafka keeps it, emptied, so a
    replay of the log still knows the producer's epoch and last sequence).
    """
    txns = st.producer_state.txns
    unstable = tuple(sorted([(first, -1) for first in txns.ongoing.values()]
                            + [(t.first_offset, t.last_offset) for t in txns.unreplicated]))
    # The active segment's too: a transaction whose data is cleanable may have its ABORT there.
    aborted = tuple(e for s in st.segments for e in s.txnindex.entries)
    last = tuple((e.producer_id, e.batches[-1].base_offset) for e in st.producer_state.entries() if e.batches)
    return unstable, aborted, last


__all__ = ["aborted_transactions", "for_cleaner", "index_aborted", "last_stable_offset", "marker_in_log", "markers_of",
           "rebuild_hooks", "stale_indexes_rebuilt"]
