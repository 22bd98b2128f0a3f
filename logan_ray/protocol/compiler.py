"""The one generic encoder and decoder: compiles ``(fields, version)`` into a plan.

Interpreting the schema for every message would cost more than the I/O, so each
(message, version) is compiled once into a tree of small closures; runs of
fixed-width fields collapse into a single ``struct.Struct`` call. Decoders have the
shape ``dec(buf, pos) -> (value, new_pos)`` over a memoryview; encoders
``enc(out, value)`` append to an :class:`Out` buffer. Record batches are never copied:
decoded as memoryview slices, encoded by handing the caller's object through as its
own chunk.
"""
from __future__ import annotations

import uuid
from struct import Struct as _Packer, pack as _pack, unpack_from as _unpack_from
from typing import Any, Callable, Sequence

from logan_ray.storage.errors import CorruptRecordError
from logan_ray.storage.varint import decode_uvarint, encode_uvarint

from .exceptions import ProtocolDecodeError, ProtocolEncodeError
from .schema import (
    BYTES,
    RECORDS,
    STRING,
    UUID,
    ZERO_UUID,
    Array,
    Field,
    Fixed,
    Struct,
    Type,
)

Decoder = Callable[[memoryview, int], "tuple[Any, int]"]
Encoder = Callable[["Out", Any], None]

#: Bytes-like record values at least this long are passed through as their own chunk
#: instead of being copied into the frame buffer (smaller ones are cheaper to copy
#: than to send as a separate iovec).
RECORDS_INLINE_MAX = 32 * 1024

_I16 = _Packer(">h")
_I32 = _Packer(">i")
_NULL16 = _I16.pack(-1)
_NULL32 = _I32.pack(-1)


class Out(bytearray):
    """Encode sink: the frame bytes so far, plus the chunks already finished before them.

    When an opaque or large record value arrives, the bytes so far become a finished
    chunk, the value is appended untouched, and encoding continues in the (cleared)
    buffer. ``finish()`` yields the chunk list with adjacent bytes merged.
    """

    __slots__ = ("chunks",)

    def __init__(self, initial: bytes = b"") -> None:
        super().__init__(initial)
        self.chunks: list[Any] = []

    def pass_through(self, value: Any) -> None:
        if self:
            self.chunks.append(bytes(self))
            self.clear()
        self.chunks.append(value)

    def finish(self) -> list[Any]:
        if self or not self.chunks:
            self.chunks.append(bytes(self))
            self.clear()
        return self.chunks


# --------------------------------------------------------------------- varints


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Kafka unsigned varint (compact lengths, tags); the storage codec's decoder does the work."""
    try:
        return decode_uvarint(buf, pos)
    except CorruptRecordError as e:
        raise ProtocolDecodeError(str(e)) from None


_SMALL_UVARINTS = tuple(bytes((n,)) for n in range(128))


def uvarint_bytes(n: int) -> bytes:
    """Kafka unsigned varint (compact lengths, tags); the storage codec's tables do the work."""
    if 0 <= n < 128:
        return _SMALL_UVARINTS[n]  # one byte: most compact lengths and counts
    try:
        return encode_uvarint(n)
    except ValueError:
        raise ProtocolEncodeError(f"unsigned varint out of range: {n}") from None


def _truncated(what: str) -> ProtocolDecodeError:
    return ProtocolDecodeError(f"truncated {what}")


# ------------------------------------------------------------- length prefixes
# Every variable-length type has a length prefix that is either classic (int16 for
# strings, int32 for bytes/arrays, -1 = null) or compact (unsigned varint of
# length + 1, 0 = null). Readers return -1 for null.


def _reader_int16(buf: memoryview, pos: int) -> tuple[int, int]:
    return _I16.unpack_from(buf, pos)[0], pos + 2


def _reader_int32(buf: memoryview, pos: int) -> tuple[int, int]:
    return _I32.unpack_from(buf, pos)[0], pos + 4


def _reader_compact(buf: memoryview, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:  # lengths below 127 are one byte: skip the general varint loop
        return b - 1, pos + 1
    n, pos = read_uvarint(buf, pos)
    return n - 1, pos


def _writer_int16(n: int) -> bytes:
    if n > 0x7FFF:
        raise ProtocolEncodeError(f"string of {n} bytes exceeds int16 length")
    return _I16.pack(n)


def _prefixes(compact: bool, classic_width: int):
    """(read_len, write_len, null_marker) for one length-prefix style."""
    if compact:
        return _reader_compact, (lambda n: uvarint_bytes(n + 1)), b"\x00"
    if classic_width == 2:
        return _reader_int16, _writer_int16, _NULL16
    return _reader_int32, _I32.pack, _NULL32


# ------------------------------------------------------------------ type codecs


def _fixed_codec(t: Fixed) -> tuple[Decoder, Encoder]:
    packer = _Packer(">" + t.code)
    unpack, pack, size = packer.unpack_from, packer.pack, packer.size

    def dec(buf: memoryview, pos: int) -> tuple[Any, int]:
        return unpack(buf, pos)[0], pos + size

    def enc(out: Out, value: Any) -> None:
        out += pack(value)

    return dec, enc


def _uuid_codec() -> tuple[Decoder, Encoder]:
    make = uuid.UUID

    def dec(buf: memoryview, pos: int) -> tuple[Any, int]:
        end = pos + 16
        if end > len(buf):
            raise _truncated("uuid")
        return make(bytes=bytes(buf[pos:end])), end

    def enc(out: Out, value: Any) -> None:
        if value is None:
            value = ZERO_UUID
        raw = value.bytes if isinstance(value, uuid.UUID) else bytes(value)
        if len(raw) != 16:
            raise ProtocolEncodeError("uuid must be 16 bytes")
        out += raw

    return dec, enc


def _length_prefixed_codec(nullable: bool, compact: bool, width: int, what: str,
                           to_python: Callable[[memoryview], Any], to_wire: Callable[[Any], Any],
                           empty: Any) -> tuple[Decoder, Encoder]:
    """Strings and bytes share one layout: a (compact or classic) length, -1 for null, then the bytes."""
    read_len, write_len, null = _prefixes(compact, width)

    def dec(buf: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            if nullable and n == -1:
                return None, pos
            raise ProtocolDecodeError(f"null or negative length for a non-nullable {what}")
        end = pos + n
        if end > len(buf):
            raise _truncated(what)
        return to_python(buf[pos:end]), end

    def enc(out: Out, value: Any) -> None:
        if value is None:
            if nullable:
                out += null
                return
            value = empty
        raw = to_wire(value)
        out += write_len(len(raw) if isinstance(raw, (bytes, bytearray)) else memoryview(raw).nbytes)
        out += raw

    return dec, enc


def _string_codec(nullable: bool, compact: bool) -> tuple[Decoder, Encoder]:
    return _length_prefixed_codec(nullable, compact, 2, "string", lambda v: str(v, "utf-8"),
                                  lambda s: s.encode("utf-8"), "")


def _bytes_codec(nullable: bool, compact: bool) -> tuple[Decoder, Encoder]:
    return _length_prefixed_codec(nullable, compact, 4, "bytes", bytes, lambda b: b, b"")


def _records_codec(nullable: bool, compact: bool) -> tuple[Decoder, Encoder]:
    read_len, write_len, null = _prefixes(compact, 4)

    def dec(buf: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            if nullable and n == -1:
                return None, pos
            raise ProtocolDecodeError("null or negative length for non-nullable records")
        end = pos + n
        if end > len(buf):
            raise _truncated("records")
        return buf[pos:end], end

    def enc(out: Out, value: Any) -> None:
        if value is None:
            out += null if nullable else write_len(0)
            return
        if isinstance(value, (bytes, bytearray)):
            size, opaque = len(value), False
        else:
            try:
                view = memoryview(value)
            except TypeError:
                size, opaque = len(value), True
            else:
                if view.format != "B" or view.ndim != 1:
                    value = view = view.cast("B")
                size, opaque = view.nbytes, False
        out += write_len(size)
        if opaque or size >= RECORDS_INLINE_MAX:
            out.pass_through(value)
        else:
            out += value

    return dec, enc


def _array_codec(t: Array, version: int, flexible: bool, nullable: bool) -> tuple[Decoder, Encoder]:
    read_len, write_len, null = _prefixes(flexible, 4)
    element = t.element

    if isinstance(element, Fixed):
        code, size = element.code, element.size

        def dec(buf: memoryview, pos: int) -> tuple[Any, int]:
            n, pos = read_len(buf, pos)
            if n < 0:
                if nullable and n == -1:
                    return None, pos
                raise ProtocolDecodeError("null or negative count for a non-nullable array")
            if n * size > len(buf) - pos:
                raise _truncated("array")
            return list(_unpack_from(f">{n}{code}", buf, pos)), pos + n * size

        def enc(out: Out, value: Any) -> None:
            if value is None:
                if nullable:
                    out += null
                    return
                value = ()
            out += write_len(len(value))
            out += _pack(f">{len(value)}{code}", *value)

        return dec, enc

    edec, eenc = compile_type(element, version, flexible, nullable=False, compact=flexible)

    def dec(buf: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            if nullable and n == -1:
                return None, pos
            raise ProtocolDecodeError("null or negative count for a non-nullable array")
        if n > len(buf) - pos:  # every element takes at least one byte
            raise _truncated("array")
        items = [None] * n
        for i in range(n):
            items[i], pos = edec(buf, pos)
        return items, pos

    def enc(out: Out, value: Any) -> None:
        if value is None:
            if nullable:
                out += null
                return
            value = ()
        out += write_len(len(value))
        for item in value:
            eenc(out, item)

    return dec, enc


def compile_type(t: Type, version: int, flexible: bool, *, nullable: bool, compact: bool) -> tuple[Decoder, Encoder]:
    if isinstance(t, Fixed):
        return _fixed_codec(t)
    if t is STRING:
        return _string_codec(nullable, compact)
    if t is BYTES:
        return _bytes_codec(nullable, compact)
    if t is RECORDS:
        return _records_codec(nullable, compact)
    if t is UUID:
        return _uuid_codec()
    if isinstance(t, Array):
        return _array_codec(t, version, flexible, nullable)
    if isinstance(t, Struct):
        if nullable:
            raise NotImplementedError("nullable structs are not used by the supported APIs")
        return compile_struct(t.fields, version, flexible)
    raise TypeError(f"cannot compile {t!r}")


# ---------------------------------------------------------------------- structs


def _is_default_check(f: Field) -> Callable[[Any], bool]:
    """Whether a tagged field's value equals its default (then Kafka omits it)."""
    default = f.default_value()
    if isinstance(f.type, Struct):
        return lambda v: v is None or all(v.get(k, dv) == dv for k, dv in default.items())
    if isinstance(f.type, Array) and default is not None:
        return lambda v: v is None or len(v) == 0
    return lambda v: v == default


def _default_factory(f: Field) -> Callable[[], Any]:
    """A cheap maker of fresh mutable defaults (lists, struct dicts) for absent fields."""
    default = f.default_value()
    if isinstance(default, list):
        return list if not default else (lambda: list(default))
    if isinstance(default, dict) and isinstance(f.type, Struct):
        makers = [(g.name, _default_factory(g)) for g in f.type.fields]
        return lambda: {name: make() for name, make in makers}
    return lambda: default


def compile_struct(fields: Sequence[Field], version: int, flexible: bool) -> tuple[Decoder, Encoder]:
    """Decoder and encoder of a struct (or a whole message body) at one version."""
    steps: list[tuple[Any, Any]] = []  # (name, decoder) or ((names...), packer)
    # (name, encoder, default) or ((names...), packer, (defaults...))
    encode_steps: list[tuple[Any, Any, Any]] = []
    static_defaults: dict[str, Any] = {}
    fresh_defaults: list[tuple[str, Callable[[], Any]]] = []
    tagged: list[tuple[int, Field, Decoder, Encoder]] = []

    group: list[Field] = []

    def close_group() -> None:
        if not group:
            return
        packer = _Packer(">" + "".join(g.type.code for g in group))
        names = tuple(g.name for g in group)
        steps.append((names, packer))
        encode_steps.append((names, packer, tuple(g.default_value() for g in group)))
        group.clear()

    for f in fields:
        present = version in f.versions
        if not present or f.is_tagged_in(version):
            default = f.default_value()
            if isinstance(default, (list, dict)):
                fresh_defaults.append((f.name, _default_factory(f)))
            else:
                static_defaults[f.name] = default
        if not present:
            continue
        nullable = version in f.nullable
        compact = flexible if f.compact is None else f.compact
        if f.is_tagged_in(version):
            if not flexible:
                raise ValueError(f"tagged field {f.name} in a non-flexible version {version}")
            dec, enc = compile_type(f.type, version, flexible, nullable=nullable, compact=compact)
            tagged.append((f.tag, f, dec, enc))
            continue
        if isinstance(f.type, Fixed):
            group.append(f)
            continue
        close_group()
        dec, enc = compile_type(f.type, version, flexible, nullable=nullable, compact=compact)
        steps.append((f.name, dec))
        # a missing key encodes as the default; None stands for "empty" where the
        # type's encoder knows how to write that (nullable values, arrays, structs)
        missing = None if nullable or isinstance(f.type, (Array, Struct)) else f.default_value()
        encode_steps.append((f.name, enc, missing))
    close_group()

    tagged.sort(key=lambda x: x[0])
    tag_decoders = {tag: (f.name, dec) for tag, f, dec, _ in tagged}
    tag_encoders = [(tag, f.name, enc, _is_default_check(f)) for tag, f, _, enc in tagged]
    steps_t = tuple(steps)
    encode_steps_t = tuple(encode_steps)
    fresh_t = tuple(fresh_defaults)
    read_tags = flexible
    # flexible structs without tagged fields in this version end with one 0 byte
    empty_tags = b"\x00" if flexible and not tag_encoders else b""
    write_tags = flexible and bool(tag_encoders)
    tag_names = frozenset(name for _, name, _, _ in tag_encoders)

    def dec(buf: memoryview, pos: int) -> tuple[Any, int]:
        d = static_defaults.copy()
        for key, fdec in steps_t:
            if key.__class__ is str:
                d[key], pos = fdec(buf, pos)
            else:
                d.update(zip(key, fdec.unpack_from(buf, pos)))
                pos += fdec.size
        for name, make in fresh_t:
            d[name] = make()
        if read_tags:
            if buf[pos] == 0:  # the usual case: no tagged fields at all
                pos += 1
            else:
                pos = _read_tagged(buf, pos, d, tag_decoders)
        return d, pos

    def enc(out: Out, d: Any) -> None:
        if d is None:
            d = {}
        get = d.get
        for key, fenc, default in encode_steps_t:
            if fenc.__class__ is _Packer:
                out += fenc.pack(*map(get, key, default))
            else:
                fenc(out, get(key, default))
        if write_tags:
            if tag_names.isdisjoint(d):
                out += b"\x00"  # none of the tagged fields given: the usual case
            else:
                _write_tagged(out, d, tag_encoders)
        else:
            out += empty_tags

    return dec, enc


def _read_tagged(buf: memoryview, pos: int, d: dict, known: dict) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise _truncated("tagged field")
        entry = known.get(tag)
        if entry is not None:  # unknown tags are skipped, as KIP-482 requires
            name, fdec = entry
            d[name], used = fdec(buf[:end], pos)
            if used != end:
                raise ProtocolDecodeError(f"tagged field {tag} size mismatch")
        pos = end
    return pos


def _write_tagged(out: Out, d: dict, encoders: list) -> None:
    present = []
    get = d.get
    for tag, name, fenc, is_default in encoders:
        value = get(name)
        if name in d and not is_default(value):
            present.append((tag, fenc, value))
    out += uvarint_bytes(len(present))
    for tag, fenc, value in present:
        tmp = Out()
        fenc(tmp, value)
        if tmp.chunks:
            raise ProtocolEncodeError("opaque chunks cannot be tagged fields")
        out += uvarint_bytes(tag)
        out += uvarint_bytes(len(tmp))
        out += tmp
