"""Kafka v2 record codec: decoding whole batches, and the codec's public names in one place.

The per-record work runs in the compiled ``_codec`` extension (storage/_codec.c,
built by ``pip install``) when it is present; every function here also has a
pure-Python implementation with identical results, used when the extension was
not built or ``LOGAN_RAY_PURE_CODEC=1`` is set (tests run both).

The broker itself never decodes records (it moves batches by header); this
module is for consumers, compaction and tests. Its rooms: the record types
(:mod:`.record_types`), the compiled/pure switch (:mod:`.codec_choice`), one
batch's records (:mod:`.record_decode`), the columnar decoder
(:mod:`.record_columns`). Building batches is :mod:`.record_builder`; the
cleaner's raw view of records is :mod:`.raw_records`.
"""
from __future__ import annotations

from .batch_header import BatchHeader
from .codec_choice import compiled, implementation, use_compiled
from .record_columns import Columns, decode_columns
from .record_decode import bad_record, check_header, decode_blob, iter_complete, records_blob
from .record_types import Buffer, Column, Headers, Record


def decode_batch(buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> tuple[BatchHeader, list[Record]]:
    """Decode the batch at ``pos`` into its header and records."""
    h = check_header(buf, pos, verify_crc)
    return h, decode_blob(records_blob(buf, pos, h), h)


def decode_records(buf: Buffer, *, verify_crc: bool = True, include_control: bool = False) -> list[Record]:
    """Decode every record of concatenated batches (a fetch response's records).

    A trailing partial batch, which fetch responses may legally contain, is
    ignored; anything else malformed raises.
    """
    out: list[Record] = []
    for pos, h in iter_complete(buf, verify_crc):
        recs = decode_blob(records_blob(buf, pos, h), h)
        if include_control or not h.is_control:
            out.extend(recs)
    return out


def decode_tagged(
    buf: Buffer, make: type, topic: object, partition: object, min_offset: int = 0, *, verify_crc: bool = True
) -> list:
    """Data records with offset >= ``min_offset`` as ``make(topic, partition, offset, timestamp, key, value,
    headers)``, where ``make`` is a 7-field tuple subclass (a NamedTuple).

    What a consumer hands its caller, made in one step: no intermediate Record.
    Control batches are skipped; a trailing partial batch is ignored.
    """
    out: list = []
    compiled_codec = implementation()
    for pos, h in iter_complete(buf, verify_crc):
        blob = records_blob(buf, pos, h)
        if h.is_control:
            decode_blob(blob, h)  # still validated, as decode_records does
            continue
        if h.last_offset < min_offset:
            decode_blob(blob, h)
            continue
        if compiled_codec is not None:
            out.extend(compiled_codec.decode_tuples(blob, h.base_offset, h.base_timestamp, h.max_timestamp,
                                        h.is_log_append_time, h.record_count, make, topic, partition, min_offset))
        else:
            out.extend(make(topic, partition, r.offset, r.timestamp, r.key, r.value, r.headers)
                       for r in decode_blob(blob, h) if r.offset >= min_offset)
    return out


__all__ = [
    "Buffer", "Headers", "Record", "Column", "Columns",
    "compiled", "implementation", "use_compiled",
    "records_blob", "check_header", "bad_record",
    "decode_batch", "decode_records", "decode_tagged", "decode_columns",
]
