"""The cleaner's retain decision: which records of a batch survive, and the bytes to write for it.

A record is kept unless a later offset of its key is in the offset map, it is
a tombstone past the delete horizon, it has no key, its batch lies below
the log start, or its batch belongs to an aborted transaction. Markers stay
while their transaction has data (:mod:`.cleaner_txn`). A batch with every record kept is copied verbatim, one with
none is dropped, any other is rebuilt around the kept records' bytes
(:func:`.raw_records.rebuild_batch`), keeping its offsets.
"""
from __future__ import annotations

import logging

from .batch_header import CONTROL_BIT, LOG_OVERHEAD, TIMESTAMP_TYPE_BIT, BatchHeader
from .cleaner_batches import MALFORMED, batch_records
from .cleaner_result import CleanStats
from .cleaner_txn import TxnCleaning
from .offset_map import OffsetMap
from .raw_records import RawRecord, rebuild_batch, scan_records

log = logging.getLogger(__name__)


class Retainer:
    """The retain decision for every batch of the segments being recopied."""

    def __init__(self, name: str, offset_map: OffsetMap, log_start: int, tombstone_horizon: int, stats: CleanStats,
                 txn: TxnCleaning | None = None, producer_last: dict[int, int] | None = None):
        self.name = name
        self.txn = txn if txn is not None else TxnCleaning((), tombstone_horizon)
        self.producer_last = producer_last or {}
        self.map = offset_map
        self.log_start = log_start
        self.horizon = tombstone_horizon
        self.stats = stats

    def _last_of_producer(self, mv: memoryview, rel: int, size: int, h: BatchHeader) -> object | None:
        """What stays of a producer's last data batch whose records all go (None: not such a batch).

        Kafka keeps it as an empty batch, so a replay of the log still finds the
        producer's epoch and last sequence. A one-record batch cannot be emptied
        (an empty batch must span offsets), so it is kept whole: compaction
        promises the latest record of each key, never that older ones go.
        """
        if h.producer_id < 0 or self.producer_last.get(h.producer_id) != h.base_offset:
            return None
        self.stats.producer_batches_kept += 1
        if h.last_offset_delta == 0:
            return mv[rel : rel + size]
        return rebuild_batch(h, b"", [], compression="none", keep_last_offset_delta=True)

    def filter(self, buf: bytearray, mv: memoryview, rel: int, h: BatchHeader) -> tuple[object | None, int, bool]:
        """``(bytes to write or None, max timestamp, changed)`` for one (CRC-checked) batch."""
        st = self.stats
        base, attrs, lod, max_ts, count = h.base_offset, h.attributes, h.last_offset_delta, h.max_timestamp, h.record_count
        base_ts = h.base_timestamp
        size = h.batch_length + LOG_OVERHEAD
        st.batches_read += 1
        if attrs & CONTROL_BIT:
            st.control_batches += 1
            if self.txn.keep_marker(buf, rel, h):
                return mv[rel : rel + size], max_ts, False
            st.markers_removed += 1
            st.batches_dropped += 1
            return None, max_ts, True
        st.records_read += count
        if base + lod < self.log_start:
            st.records_removed += count
            st.batches_dropped += 1
            return None, max_ts, True
        self.txn.data_batch(h)
        if self.txn.is_aborted(h):
            st.records_removed += count
            st.aborted_records_removed += count
            kept_part = self._last_of_producer(mv, rel, size, h)
            if kept_part is not None:
                return kept_part, max_ts, h.last_offset_delta > 0
            st.batches_dropped += 1
            return None, max_ts, True
        try:
            blob, start, stop = batch_records(buf, mv, rel, size, attrs)
            keys, deltas, ts_deltas, nulls, starts = scan_records(blob, start, stop, count)
        except MALFORMED as e:
            # CRC-valid but undecodable records (a broken client): keep the batch as it is.
            st.malformed_batches += 1
            st.records_kept += count
            log.warning("%s: batch at offset %d has malformed records (%s); kept uncleaned", self.name, base, e)
            return mv[rel : rel + size], max_ts, False
        horizon = self.horizon
        if None in keys:
            keyed = [i for i, k in enumerate(keys) if k is not None]
            st.keyless_removed += count - len(keyed)
            latest: list = [None] * count
            for i, lat in zip(keyed, self.map.latest_many([keys[i] for i in keyed])):
                latest[i] = lat
        else:
            keyed = None
            latest = self.map.latest_many(keys)
        # Superseded: a later offset of the key is in the map (None: not in the map).
        keep = [i for i, d, lat in zip(range(count), deltas, latest) if lat is None or base + d >= lat]
        if keyed is not None:
            keep = [i for i in keep if keys[i] is not None]
        tombstones = 0
        if horizon > base and True in nulls:
            kept_before = len(keep)
            keep = [i for i in keep if not nulls[i] or base + deltas[i] >= horizon]
            tombstones = kept_before - len(keep)
        kept = len(keep)
        st.records_kept += kept
        st.records_removed += count - kept
        st.tombstones_removed += tombstones
        if kept == count:
            return mv[rel : rel + size], max_ts, False
        if kept == 0:
            kept_part = self._last_of_producer(mv, rel, size, h)
            if kept_part is not None:
                return kept_part, max_ts, h.last_offset_delta > 0
            st.batches_dropped += 1
            return None, max_ts, True
        lat_time = attrs & TIMESTAMP_TYPE_BIT
        records = [
            RawRecord(base + deltas[i], max_ts if lat_time else base_ts + ts_deltas[i], keys[i], nulls[i],
                      starts[i], starts[i + 1])
            for i in keep
        ]
        rebuilt = rebuild_batch(h, blob, records, keep_last_offset_delta=True)
        st.batches_rebuilt += 1
        new_max = max_ts if lat_time else max(r.timestamp for r in records)
        return rebuilt, new_max, True


__all__ = ["Retainer"]
