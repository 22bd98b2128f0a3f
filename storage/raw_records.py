"""The cleaner's view of a batch: keys, offsets and byte ranges of records, and re-packing the kept ones.

Compaction decides per record but never re-encodes one: kept records are
copied byte for byte into a new batch with the original header fields
(:func:`rebuild_batch`). Uses the same compiled/pure codec switch as :mod:`.records`.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple, Sequence

from .batch_header import BatchHeader, encode_batch
from .compression import NONE, codec_id, compress
from .records import Buffer, bad_record, check_header, implementation, records_blob
from .varint import ZIGZAG1, decode_varint, decode_varlong



class RawRecord(NamedTuple):
    """Where one record sits in a batch's (decompressed) records blob.

    Compaction only needs the key, whether the value is a tombstone and the
    record's bytes to copy: ``blob[start:end]`` is the whole record, length
    prefix included, still valid under the batch's base offset/timestamp.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value_is_null: bool
    start: int
    end: int


class RawBatch(NamedTuple):
    header: BatchHeader
    blob: bytes  # decompressed records
    records: list[RawRecord]


def scan_batch_raw(buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> RawBatch:
    """Decode just what compaction needs from the batch at ``pos``."""
    h = check_header(buf, pos, verify_crc)
    data = bytes(records_blob(buf, pos, h))
    keys, deltas, ts_deltas, nulls, starts = scan_records(data, 0, len(data), h.record_count)
    base_off = h.base_offset
    if h.is_log_append_time:
        stamps = [h.max_timestamp] * len(keys)
    else:
        base_ts = h.base_timestamp
        stamps = [base_ts + d for d in ts_deltas]
    out = [RawRecord(base_off + d, t, k, z, s, e)
           for d, t, k, z, s, e in zip(deltas, stamps, keys, nulls, starts, starts[1:])]
    return RawBatch(h, data, out)


def scan_records(blob: Buffer, p: int, stop: int, count: int) -> tuple[list, list[int], list[int], list[bool], list[int]]:
    """Keys, offset deltas, timestamp deltas, tombstone flags and record starts (plus the end) of the
    ``count`` records in ``blob[p:stop]``: compaction's view of a batch (no value is copied, headers are
    not parsed). Raises CorruptRecordError when a record's fields overrun it."""
    compiled_codec = implementation()
    if compiled_codec is not None:
        return compiled_codec.scan_raw(blob, p, stop, count)
    try:
        return _scan_records_py(blob, p, stop, count)
    except IndexError:
        raise bad_record(f"records truncated ({stop - p} bytes for {count} records)", p) from None


def _scan_records_py(blob: Buffer, p: int, stop: int, count: int) -> tuple[list, list[int], list[int], list[bool], list[int]]:
    Z = ZIGZAG1
    dv = decode_varint
    keys: list = []
    deltas: list[int] = []
    ts_deltas: list[int] = []
    nulls: list[bool] = []
    starts: list[int] = []
    first = p
    for _ in range(count):
        starts.append(p)
        b = blob[p]
        if b < 0x80:
            ln = Z[b]
            p += 1
        else:
            b2 = blob[p + 1]
            if b2 < 0x80:  # records of 64 B .. 8 KiB
                u = (b & 0x7F) | (b2 << 7)
                ln = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                ln, p = dv(blob, p)
        end = p + ln
        if ln < 0 or end > stop:
            raise bad_record(f"record length {ln} overruns the records ({stop - first} bytes)", starts[-1] - first)
        b = blob[p + 1]
        if b < 0x80:
            ts_deltas.append(Z[b])
            p += 2
        elif blob[p + 2] < 0x80:
            u = (b & 0x7F) | (blob[p + 2] << 7)
            ts_deltas.append((u >> 1) ^ -(u & 1))
            p += 3
        else:
            tsd, p = decode_varlong(blob, p + 1)
            ts_deltas.append(tsd)
        b = blob[p]
        if b < 0x80:
            deltas.append(Z[b])
            p += 1
        elif blob[p + 1] < 0x80:  # offset deltas 64 .. 8191
            u = (b & 0x7F) | (blob[p + 1] << 7)
            deltas.append((u >> 1) ^ -(u & 1))
            p += 2
        else:
            od, p = dv(blob, p)
            deltas.append(od)
        b = blob[p]
        if b < 0x80:
            kl = Z[b]
            p += 1
        else:
            kl, p = dv(blob, p)
        if kl >= 0:
            if p + kl > end:
                raise bad_record("key overruns its record", starts[-1] - first)
            keys.append(bytes(blob[p : p + kl]))
            p += kl
        elif kl == -1:
            keys.append(None)
        else:
            raise bad_record(f"key length {kl}", starts[-1] - first)
        b = blob[p]
        if b < 0x80:
            vl = Z[b]
            p += 1
        else:
            b2 = blob[p + 1]
            if b2 < 0x80:
                u = (b & 0x7F) | (b2 << 7)
                vl = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                vl, p = dv(blob, p)
        if vl < -1:
            raise bad_record(f"value length {vl}", starts[-1] - first)
        if p + max(vl, 0) > end:
            raise bad_record("value overruns its record", starts[-1] - first)
        nulls.append(vl == -1)
        p = end
    if p != stop:
        raise bad_record(f"{stop - p} trailing bytes after {count} records", p - first)
    starts.append(p)
    return keys, deltas, ts_deltas, nulls, starts


def iter_batch_records_raw(buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> Iterator[RawRecord]:
    """The records of ``scan_batch_raw`` alone, for callers that only inspect keys."""
    return iter(scan_batch_raw(buf, pos, verify_crc=verify_crc).records)


def rebuild_batch(
    header: BatchHeader,
    blob: Buffer,
    keep: Sequence[RawRecord],
    *,
    compression: int | str | None = None,
    keep_last_offset_delta: bool = False,
    compression_level: int | None = None,
) -> bytes:
    """Re-pack the kept records of a scanned batch without re-encoding them.

    Base offset, base timestamp, producer state and attributes are kept, so
    every kept record's deltas stay valid byte-for-byte. As in Kafka's
    cleaner, lastOffsetDelta becomes the last kept record's unless
    ``keep_last_offset_delta`` (which preserves the producer's last sequence).
    With no records kept this yields an empty batch that keeps producer state.
    """
    mv = memoryview(blob)
    records = b"".join([mv[r.start : r.end] for r in keep])
    codec = header.compression if compression is None else codec_id(compression)
    if codec != NONE:
        records = compress(codec, records, compression_level)
    if keep and not keep_last_offset_delta:
        last_delta = keep[-1].offset - header.base_offset
    else:
        last_delta = header.last_offset_delta
    if header.is_log_append_time or not keep:
        max_ts = header.max_timestamp
    else:
        max_ts = max(r.timestamp for r in keep)
    attributes = (header.attributes & ~0x07) | codec
    return encode_batch(records, attributes=attributes, last_offset_delta=last_delta,
                        base_timestamp=header.base_timestamp, max_timestamp=max_ts, record_count=len(keep),
                        base_offset=header.base_offset, partition_leader_epoch=header.partition_leader_epoch,
                        producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                        base_sequence=header.base_sequence)
