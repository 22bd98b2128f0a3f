"""Decoding the records of one batch (the pure-Python decoder and the dispatch to the compiled one).

Record layout inside a batch (all varints zigzag)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    keyLength varint (-1 null) | key | valueLength varint (-1 null) | value
    headerCount varint | (keyLength varint | key utf8 | valueLength varint | value)*

Also the batch-level steps every decoder shares: the checked header
(:func:`check_header`), the records' bytes (:func:`records_blob`) and the
complete batches of a fetch response (:func:`iter_complete`).
"""
from __future__ import annotations

from typing import Iterator

from .batch_header import HEADER_SIZE, MAGIC, MIN_BATCH_LENGTH, BatchHeader, framed, parse_header, validate_batch
from .codec_choice import implementation
from .compression import NONE, decompress
from .errors import CorruptRecordError
from .record_types import SET_HEADERS, SET_KEY, SET_OFFSET, SET_TIMESTAMP, SET_VALUE, Buffer, Record
from .varint import ZIGZAG1, decode_varint, decode_varlong


def records_blob(buf: Buffer, pos: int, h: BatchHeader) -> Buffer:
    """The batch's (decompressed) records; a view, not a copy, when uncompressed."""
    start = pos + HEADER_SIZE
    end = pos + h.size
    if h.compression == NONE:
        return memoryview(buf)[start:end]
    return decompress(h.compression, memoryview(buf)[start:end])


def check_header(buf: Buffer, pos: int, verify_crc: bool) -> BatchHeader:
    return validate_batch(buf, pos) if verify_crc else framed(buf, pos)


def bad_record(msg: str, where: int) -> CorruptRecordError:
    return CorruptRecordError(f"corrupt record at byte {where} of the records: {msg}")


def iter_complete(buf: Buffer, verify_crc: bool) -> Iterator[tuple[int, BatchHeader]]:
    """Checked headers of concatenated batches; a trailing partial batch (legal in fetch responses) ends it."""
    pos = 0
    n = len(buf)
    while n - pos >= HEADER_SIZE:
        h = parse_header(buf, pos)
        if h.magic == MAGIC and h.batch_length >= MIN_BATCH_LENGTH and h.size > n - pos:
            break  # partial trailing batch
        yield pos, check_header(buf, pos, verify_crc)
        pos += h.size


def decode_headers(data: bytes, p: int, hc: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    if hc < 0:
        raise bad_record(f"negative header count {hc}", p)
    out = []
    for _ in range(hc):
        kl, p = decode_varint(data, p)
        if kl < 0:
            raise bad_record(f"header key length {kl}", p)
        if p + kl > len(data):
            raise bad_record("header key overruns the records", p)
        try:
            k = data[p : p + kl].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise bad_record(f"header key is not UTF-8: {exc}", p) from exc
        p += kl
        vl, p = decode_varint(data, p)
        if vl >= 0:
            v: bytes | None = data[p : p + vl]
            p += vl
        elif vl == -1:
            v = None
        else:
            raise bad_record(f"header value length {vl}", p)
        out.append((k, v))
    return tuple(out), p


def decode_blob(data: Buffer, h: BatchHeader) -> list[Record]:
    """Every record of a batch's (decompressed) records ``data``, by the codec in use."""
    args = (h.base_offset, h.base_timestamp, h.max_timestamp, h.is_log_append_time, h.record_count)
    compiled_codec = implementation()
    if compiled_codec is not None:
        return compiled_codec.decode_blob(data, *args)
    return decode_blob_py(bytes(data), *args)


def decode_blob_py(data: bytes, base_off: int, base_ts: int, max_ts: int, lat: bool, count: int) -> list[Record]:
    """Decode every record; the 1- and 2-byte varint cases are inlined."""
    Z = ZIGZAG1
    dv = decode_varint
    dl = decode_varlong
    R = Record
    new = object.__new__
    so, st, sk, sv, sh = SET_OFFSET, SET_TIMESTAMP, SET_KEY, SET_VALUE, SET_HEADERS
    out: list[Record] = []
    append = out.append
    n = len(data)
    p = 0
    start = 0
    try:
        for _ in range(count):
            start = p
            # length
            b = data[p]
            if b < 0x80:
                ln = Z[b]
                p += 1
            else:
                b2 = data[p + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    ln = (u >> 1) ^ -(u & 1)
                    p += 2
                else:
                    ln, p = dv(data, p)
            end = p + ln
            # attributes (unused in v2 records), timestamp delta
            b = data[p + 1]
            if b < 0x80:
                tsd = Z[b]
                p += 2
            else:
                tsd, p = dl(data, p + 1)
            # offset delta
            b = data[p]
            if b < 0x80:
                od = Z[b]
                p += 1
            else:
                b2 = data[p + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    od = (u >> 1) ^ -(u & 1)
                    p += 2
                else:
                    od, p = dv(data, p)
            # key
            b = data[p]
            if b < 0x80:
                kl = Z[b]
                p += 1
            else:
                kl, p = dv(data, p)
            if kl >= 0:
                key = data[p : p + kl]
                p += kl
            elif kl == -1:
                key = None
            else:
                raise bad_record(f"key length {kl}", start)
            # value
            b = data[p]
            if b < 0x80:
                vl = Z[b]
                p += 1
            else:
                b2 = data[p + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    vl = (u >> 1) ^ -(u & 1)
                    p += 2
                else:
                    vl, p = dv(data, p)
            if vl >= 0:
                value = data[p : p + vl]
                p += vl
            elif vl == -1:
                value = None
            else:
                raise bad_record(f"value length {vl}", start)
            # headers
            b = data[p]
            if b == 0:
                p += 1
                if p != end:
                    raise bad_record(f"record length {ln} does not match its fields", start)
                hdrs = ()
            else:
                hc, p = dv(data, p)
                hdrs, p = decode_headers(data, p, hc)
                if p != end:
                    raise bad_record(f"record length {ln} does not match its fields", start)
            r = new(R)
            so(r, base_off + od)
            st(r, max_ts if lat else base_ts + tsd)
            sk(r, key)
            sv(r, value)
            sh(r, hdrs)
            append(r)
    except IndexError:
        raise bad_record(f"records truncated ({n} bytes for {count} records)", start) from None
    except CorruptRecordError as exc:
        if str(exc).startswith("corrupt record"):
            raise
        raise bad_record(str(exc), start) from exc
    if p != n:
        raise bad_record(f"{n - p} trailing bytes after {count} records", p)
    return out


__all__ = ["records_blob", "check_header", "bad_record", "iter_complete", "decode_headers", "decode_blob", "decode_blob_py"]
