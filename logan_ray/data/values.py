"""Record values as typed columns (str, JSON, msgpack) and back, a whole column at a time.

JSON goes through Arrow's C++ JSON reader: the values are framed into one
newline-delimited buffer with numpy (``{"v":<value>}`` per line, so any JSON
value works and tombstones become nulls) and parsed in one call. msgpack has no
columnar decoder, so its values are unpacked by msgpack's C streaming unpacker
over one buffer and handed to Arrow as Python objects; that is the one format
with per-record Python objects.
"""
from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json

VALUE_FORMATS = (None, "bytes", "str", "json", "msgpack")

_JSON_PREFIX = b'{"v":'
_JSON_SUFFIX = b"}\n"


def check_format(fmt: str | None) -> str | None:
    if fmt not in VALUE_FORMATS:
        raise ValueError(f"value_format must be one of {VALUE_FORMATS}, got {fmt!r}")
    return None if fmt == "bytes" else fmt


def _as_binary(arr: pa.Array) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    t = arr.type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return arr
    return arr.cast(pa.large_binary() if pa.types.is_large_string(t) else pa.binary())


def _parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets int64, data uint8, valid bool) of a binary array, honouring its slice offset."""
    arr = _as_binary(arr)
    n = len(arr)
    bufs = arr.buffers()
    off_type = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    offsets = np.frombuffer(bufs[1], dtype=off_type)[arr.offset:arr.offset + n + 1].astype(np.int64) \
        if bufs[1] is not None else np.zeros(n + 1, dtype=np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, dtype=np.uint8)
    valid = arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else np.ones(n, dtype=bool)
    return offsets, data, valid


def frame(arr: pa.Array, prefix: bytes, suffix: bytes, null: bytes, *, newline_to_space: bool = False) -> bytes:
    """One buffer holding ``prefix + value + suffix`` for every value (``null`` bytes for nulls)."""
    offsets, data, valid = _parts(arr)
    n = len(valid)
    lens = np.where(valid, offsets[1:] - offsets[:-1], len(null))
    seg = lens + (len(prefix) + len(suffix))
    out_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(seg, out=out_off[1:])
    out = np.empty(int(out_off[-1]), dtype=np.uint8)
    starts = out_off[:-1]
    for k, byte in enumerate(prefix):
        out[starts + k] = byte
    body = starts + len(prefix)
    for k, byte in enumerate(suffix):
        out[body + lens + k] = byte
    nulls = np.flatnonzero(~valid)
    for k, byte in enumerate(null):
        out[body[nulls] + k] = byte
    # value bytes: the valid values' bytes, contiguous in ``data`` from offsets[0]
    src_lens = np.where(valid, offsets[1:] - offsets[:-1], 0)
    total = int(src_lens.sum())
    if total:
        src = data[offsets[0]:offsets[-1]]
        if src.size != total:  # null slots with stale bytes in the data buffer: gather valid ranges only
            src = np.concatenate([data[a:b] for a, b in zip(offsets[:-1][valid], offsets[1:][valid])])
        runs = np.empty(2 * n + 1, dtype=np.int64)
        runs[0] = len(prefix)
        runs[1:-1:2] = src_lens
        gaps = seg - src_lens  # bytes between one value's end and the next value's start
        runs[2:-1:2] = gaps[:-1]
        runs[-1] = gaps[-1] - len(prefix)
        take = np.zeros(2 * n + 1, dtype=bool)
        take[1::2] = True
        if newline_to_space:
            src = np.where((src == 10) | (src == 13), np.uint8(32), src)
        out[np.repeat(take, runs)] = src
    return out.tobytes()


# ------------------------------------------------------------------ decoding


def decode_json(arr: pa.Array, value_type: pa.DataType | None = None) -> pa.Array:
    """Parse JSON values (any JSON type; tombstones -> null) into one typed Arrow array."""
    if len(arr) == 0:
        return pa.array([], value_type or pa.null())
    buf = frame(arr, _JSON_PREFIX, _JSON_SUFFIX, b"null", newline_to_space=True)
    parse = pa_json.ParseOptions(
        explicit_schema=pa.schema([("v", value_type)]) if value_type is not None else None,
        unexpected_field_behavior="ignore" if value_type is not None else "infer",
    )
    read = pa_json.ReadOptions(use_threads=False, block_size=max(1 << 20, len(buf) + 1))
    try:
        table = pa_json.read_json(io.BytesIO(buf), read_options=read, parse_options=parse)
    except pa.ArrowInvalid as e:
        raise ValueError(f"record values are not valid JSON for the value type {value_type}: {e}") from None
    if table.num_rows != len(arr):
        raise ValueError(f"{len(arr)} values parsed into {table.num_rows} JSON rows; a value is not one JSON document")
    col = table.column("v")
    return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)


def decode_msgpack(arr: pa.Array, value_type: pa.DataType | None = None) -> pa.Array:
    import msgpack

    if len(arr) == 0:
        return pa.array([], value_type or pa.null())
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=0)
    unpacker.feed(frame(arr, b"", b"", b"\xc0"))
    objs = list(unpacker)
    if len(objs) != len(arr):
        raise ValueError(f"{len(arr)} values unpacked into {len(objs)} msgpack objects; a value is not one object")
    try:
        return pa.array(objs, type=value_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise ValueError(f"msgpack values do not fit the value type {value_type}: {e}") from None


def decode_values(arr: pa.Array, fmt: str | None, value_type: pa.DataType | None = None) -> pa.Array:
    fmt = check_format(fmt)
    if fmt is None:
        return arr
    if fmt == "str":
        try:
            return _as_binary(arr).cast(pa.string())
        except pa.ArrowInvalid as e:
            raise ValueError(f"a record value is not UTF-8: {e}") from None
    if fmt == "json":
        return decode_json(arr, value_type)
    return decode_msgpack(arr, value_type)


def settle_type(t: pa.DataType) -> pa.DataType:
    """A sampled type made safe to impose on later records: null-typed fields become strings.

    A field that was null in every sampled record has Arrow type null, and
    imposing null on a later non-null value fails; string accepts JSON strings.
    """
    if pa.types.is_null(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, settle_type(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(settle_type(t.value_type))
    return t


def expand(table: pa.Table, column: str = "value") -> pa.Table:
    """Replace a struct column by its fields as top-level columns."""
    idx = table.schema.get_field_index(column)
    col = table.column(idx)
    if not pa.types.is_struct(col.type):
        raise ValueError(f"cannot expand column {column!r} of type {col.type}: values are not JSON/msgpack objects")
    clash = [f.name for f in col.type if f.name in table.column_names and f.name != column]
    if clash:
        raise ValueError(f"value fields {clash} clash with record columns; read with expand_value=False")
    table = table.remove_column(idx)
    for i, f in enumerate(col.type):
        # flatten() applies the struct's own nulls to its children (field() would not)
        child = pa.chunked_array([c.flatten()[i] for c in col.chunks], type=f.type)
        table = table.add_column(idx + i, f.name, child)
    return table


# ------------------------------------------------------------------ encoding


def encode_column(col: Any, fmt: str | None) -> pa.Array:
    """Bytes for keys/values from one Arrow column: binary as is, strings as UTF-8, else JSON/msgpack."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else (col.chunk(0) if col.num_chunks else pa.array([], col.type))
    t = col.type
    if fmt in (None, "bytes", "str"):
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return col
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return col.cast(pa.large_binary() if pa.types.is_large_string(t) else pa.binary())
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t):
            return col.cast(pa.string()).cast(pa.binary())
        fmt = "json"  # nested values have no raw byte form
    if fmt == "json":
        return encode_json(col)
    if fmt == "msgpack":
        return encode_msgpack(col)
    raise ValueError(f"unknown value format {fmt!r}")


def encode_json(col: pa.Array) -> pa.Array:
    """JSON text per value; nulls stay null (tombstones)."""
    import json

    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=_json_default).encode
    return pa.array([None if v is None else dumps(v).encode() for v in col.to_pylist()], pa.binary())


def encode_msgpack(col: pa.Array) -> pa.Array:
    import msgpack

    packer = msgpack.Packer(use_bin_type=True, datetime=True)
    return pa.array([None if v is None else packer.pack(v) for v in col.to_pylist()], pa.binary())


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).decode("utf-8", "surrogateescape")
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")
