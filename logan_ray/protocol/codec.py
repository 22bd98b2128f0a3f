"""The public face of the codec: frames in, (header, dict) out, and back.

Framing convention: encoders return wire-ready bytes *including* the int32 size
prefix (so a gateway can write them as they are); decoders take the frame *after*
the prefix, i.e. the ``frame_size(prefix)`` bytes the gateway read.
"""
from __future__ import annotations

import struct
from struct import Struct as _Packer
from typing import Any

from . import errors, messages_admin, messages_core, messages_groups, messages_security, messages_txn
from .compiler import Decoder, Encoder, Out, compile_struct
from .exceptions import (
    ProtocolDecodeError,
    ProtocolEncodeError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from .headers import (
    API_VERSIONS_KEY,
    REQUEST_HEADER_FIELDS,
    RESPONSE_HEADER_FIELDS,
    RequestHeader,
    request_header_version,
    response_header_version,
)
from .schema import Api

APIS: dict[int, Api] = {
    api.key: api for api in (*messages_core.APIS, *messages_admin.APIS, *messages_groups.APIS,
                             *messages_security.APIS, *messages_txn.APIS)
}
#: API name (as Kafka spells it, e.g. "ApiVersions") -> api key.
API_KEYS: dict[str, int] = {api.name: api.key for api in APIS.values()}
#: api key -> (min, max) version this codec implements.
SUPPORTED: dict[int, tuple[int, int]] = {k: (a.min_version, a.max_version) for k, a in sorted(APIS.items())}
#: api keys the codec knows but no gateway handler serves: WriteTxnMarkers (the transaction
#: coordinator writes markers through the partition actors, not over the wire). ApiVersions,
#: the fallback answer included, must not announce them.
NOT_YET_SERVED: frozenset[int] = frozenset({messages_txn.WRITE_TXN_MARKERS.key})
#: api key -> (min, max) version to announce in ApiVersions: SUPPORTED minus the
#: versions upstream still marks unstable, minus the APIs not yet served.
ADVERTISED: dict[int, tuple[int, int]] = {
    k: (a.min_version, a.max_stable_version) for k, a in sorted(APIS.items()) if k not in NOT_YET_SERVED
}

_DECODE_FAILURES = (struct.error, IndexError, ValueError, TypeError, OverflowError)
_ENCODE_FAILURES = (struct.error, IndexError, ValueError, TypeError, AttributeError, OverflowError)

_I32 = _Packer(">i")
_API_AND_VERSION = _Packer(">hh")

_REQUEST_HEADERS = {v: compile_struct(REQUEST_HEADER_FIELDS, v, v >= 2) for v in (1, 2)}
_RESPONSE_HEADERS = {v: compile_struct(RESPONSE_HEADER_FIELDS, v, v >= 1) for v in (0, 1)}

# (api_key, version, is_request) -> (decoder, encoder); filled on first use so
# importing the codec stays cheap, then every message of that kind reuses the plan.
_PLANS: dict[tuple[int, int, bool], tuple[Decoder, Encoder]] = {}


def _plan(api: Api, version: int, is_request: bool) -> tuple[Decoder, Encoder]:
    key = (api.key, version, is_request)
    plan = _PLANS.get(key)
    if plan is None:
        fields = api.request if is_request else api.response
        plan = _PLANS[key] = compile_struct(fields, version, api.is_flexible(version))
    return plan


def precompile() -> int:
    """Compile every (api, version) plan now, so no request pays for it later.

    Plans are otherwise built on first use; a gateway calls this once at start.
    Returns the number of plans.
    """
    for api in APIS.values():
        for version in range(api.min_version, api.max_version + 1):
            _plan(api, version, True)
            _plan(api, version, False)
    return len(_PLANS)


def _api(api_key: int, version: int, header: Any = None) -> Api:
    api = APIS.get(api_key)
    if api is None:
        raise UnknownApiKeyError(api_key, header)
    if not api.supports(version):
        raise UnsupportedVersionError(api_key, version, header)
    return api


def _view(frame: Any) -> memoryview:
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def frame_size(prefix4: bytes, max_size: int | None = None) -> int:
    """Length of the frame that follows a 4-byte size prefix.

    A negative size (or one above ``max_size``) means the peer is not speaking the
    protocol, so it is a decode error and the gateway drops the connection.
    """
    if len(prefix4) != 4:
        raise ProtocolDecodeError(f"size prefix must be 4 bytes, got {len(prefix4)}")
    (size,) = _I32.unpack(prefix4)
    if size < 0:
        raise ProtocolDecodeError(f"negative frame size {size}")
    if max_size is not None and size > max_size:
        raise ProtocolDecodeError(f"frame of {size} bytes exceeds the limit of {max_size}")
    return size


# ------------------------------------------------------------------ requests


def decode_request_header(frame: bytes | memoryview) -> tuple[RequestHeader, int]:
    """Decode only the header; returns it and the offset where the body starts.

    Works for unknown API keys and versions too (header v1 for those, v2 for any
    flexible version of a known API), so the gateway can always learn the
    correlation id it has to answer or log.
    """
    buf = _view(frame)
    try:
        api_key, api_version = _API_AND_VERSION.unpack_from(buf, 0)
        api = APIS.get(api_key)
        version = request_header_version(api is not None and api.is_flexible(api_version))
        fields, pos = _REQUEST_HEADERS[version][0](buf, 0)
    except ProtocolDecodeError:
        raise
    except _DECODE_FAILURES as exc:
        raise ProtocolDecodeError(f"bad request header: {exc}") from None
    header = RequestHeader(api_key, api_version, fields["correlation_id"], fields["client_id"], version)
    return header, pos


def decode_request(frame: bytes | memoryview, *, allow_trailing: bool = False) -> tuple[RequestHeader, dict]:
    """Decode a whole request frame (without its size prefix).

    Raises UnknownApiKeyError / UnsupportedVersionError (both carry ``.header``) or
    ProtocolDecodeError. Record batches in the body are memoryview slices of
    ``frame``: nothing is copied. ``allow_trailing`` ignores bytes after the body,
    as Kafka brokers do: librdkafka's all-topics Metadata request in flexible
    versions carries three stray bytes after its (complete) body.
    """
    buf = _view(frame)
    header, pos = decode_request_header(buf)
    api = _api(header.api_key, header.api_version, header)
    decode = _plan(api, header.api_version, True)[0]
    try:
        body, end = decode(buf, pos)
    except ProtocolDecodeError:
        raise
    except _DECODE_FAILURES as exc:
        raise ProtocolDecodeError(f"bad {api.name} v{header.api_version} request: {exc}") from None
    if end != len(buf) and not allow_trailing:
        raise ProtocolDecodeError(
            f"{len(buf) - end} trailing bytes after {api.name} v{header.api_version} request"
        )
    return header, body


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: dict
) -> bytes:
    """Wire-ready request (with size prefix): for clients and tests."""
    api = _api(api_key, api_version)
    header = {
        "request_api_key": api_key,
        "request_api_version": api_version,
        "correlation_id": correlation_id,
        "client_id": client_id,
    }
    header_encode = _REQUEST_HEADERS[request_header_version(api.is_flexible(api_version))][1]
    chunks = _encode_frame(header_encode, header, _plan(api, api_version, True)[1], body)
    if len(chunks) == 1:
        return chunks[0]
    try:
        return b"".join(chunks)
    except TypeError:
        raise ProtocolEncodeError("opaque chunks can only be sent in responses") from None


def expects_response(api_key: int, body: dict) -> bool:
    """False only for Produce with acks=0: Kafka sends no response to those at all."""
    return not (api_key == 0 and body.get("acks") == 0)


# ----------------------------------------------------------------- responses


def encode_response(api_key: int, api_version: int, correlation_id: int, body: dict) -> list[Any]:
    """The full response frame as a list of chunks, ready for writev/sendfile.

    The first chunk is ``bytes`` starting with the int32 size prefix. Record values
    that are opaque chunk objects (anything with ``__len__`` that is not bytes-like,
    e.g. a file slice to sendfile) and bytes-like record values of at least
    ``compiler.RECORDS_INLINE_MAX`` bytes appear as their own chunks, untouched; all
    other bytes are merged. The prefix counts ``len()`` of every chunk.
    """
    api = _api(api_key, api_version)
    flexible = api.is_flexible(api_version)
    header_encode = _RESPONSE_HEADERS[response_header_version(api_key, flexible)][1]
    return _encode_frame(
        header_encode, {"correlation_id": correlation_id}, _plan(api, api_version, False)[1], body
    )


def decode_response(api_key: int, api_version: int, frame: bytes | memoryview) -> tuple[int, dict]:
    """Decode a response frame (without its size prefix): (correlation id, body)."""
    api = _api(api_key, api_version)
    buf = _view(frame)
    header_decode = _RESPONSE_HEADERS[response_header_version(api_key, api.is_flexible(api_version))][0]
    decode = _plan(api, api_version, False)[0]
    try:
        header, pos = header_decode(buf, 0)
        body, end = decode(buf, pos)
    except ProtocolDecodeError:
        raise
    except _DECODE_FAILURES as exc:
        raise ProtocolDecodeError(f"bad {api.name} v{api_version} response: {exc}") from None
    if end != len(buf):
        raise ProtocolDecodeError(f"{len(buf) - end} trailing bytes after {api.name} v{api_version} response")
    return header["correlation_id"], body


def _encode_frame(header_encode: Encoder, header: dict, body_encode: Encoder, body: dict) -> list[Any]:
    out = Out(b"\0\0\0\0")
    try:
        header_encode(out, header)
        body_encode(out, body)
    except ProtocolEncodeError:
        raise
    except _ENCODE_FAILURES as exc:
        raise ProtocolEncodeError(f"cannot encode: {exc!r}") from None
    if not out.chunks:
        size = len(out) - 4
        _check_size(size)
        _I32.pack_into(out, 0, size)
        return [bytes(out)]
    chunks = out.finish()
    size = sum(map(len, chunks)) - 4
    _check_size(size)
    chunks[0] = _I32.pack(size) + chunks[0][4:]
    return chunks


def _check_size(size: int) -> None:
    if size > 0x7FFFFFFF:
        raise ProtocolEncodeError(f"frame of {size} bytes does not fit the int32 size prefix")


# ------------------------------------------------------------- ApiVersions


def supported_api_versions() -> list[dict]:
    """The ``api_keys`` list of an ApiVersions response, from ADVERTISED."""
    return [
        {"api_key": key, "min_version": low, "max_version": high}
        for key, (low, high) in ADVERTISED.items()
    ]


def api_versions_fallback_response(correlation_id: int) -> bytes:
    """Answer to an ApiVersions request of a version we do not know.

    Kafka's rule (KIP-511): reply with a v0 body carrying UNSUPPORTED_VERSION and the
    supported ranges, so the client can retry with a version both sides speak.
    """
    body = {"error_code": errors.UNSUPPORTED_VERSION, "api_keys": supported_api_versions()}
    return b"".join(encode_response(API_VERSIONS_KEY, 0, correlation_id, body))
