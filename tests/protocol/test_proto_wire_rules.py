"""Wire rules: compact encodings, tagged fields, nulls, broken frames, versions, chunks."""
from __future__ import annotations

import random
import struct

import pytest

from logan_ray.protocol import (
    ADVERTISED,
    APIS,
    SUPPORTED,
    ProtocolDecodeError,
    ProtocolEncodeError,
    ProtocolError,
    UnknownApiKeyError,
    UnsupportedVersionError,
    api_versions_fallback_response,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    errors,
    frame_size,
)
from logan_ray.protocol.compiler import RECORDS_INLINE_MAX, read_uvarint, uvarint_bytes
from protocol_samples import expected, normalize, sample_body


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


# ------------------------------------------------------------ compact encodings


def test_compact_and_classic_encodings_of_the_same_body():
    body = {"results": [{"name": "ab", "error_code": 0, "error_message": None}]}
    classic = b"".join(encode_response(37, 1, 1, body))[4:]
    compact = b"".join(encode_response(37, 2, 1, body))[4:]
    # v1: int32 count, int16 string length, int16 -1 for null
    assert classic == bytes.fromhex("00000001" "00000000" "00000001" "0002") + b"ab" + bytes.fromhex("0000" "ffff")
    # v2: header v1 tags, uvarint count+1, uvarint length+1, 0 for null, tagged-field bytes
    assert compact == (bytes.fromhex("00000001" "00" "00000000" "02" "03") + b"ab"
                       + bytes.fromhex("0000" "00" "00" "00"))


def test_null_versus_empty_strings_and_arrays():
    # v3: the null array ends the body; v9: compact null, then allow_auto_topic_creation,
    # the two include_*_authorized_operations flags and the empty tagged-field section
    for version, tail in ((3, b"\xff\xff\xff\xff"), (9, b"\x00" + b"\x01\x00\x00" + b"\x00")):
        frame = encode_request(3, version, 1, None, {"topics": None})
        assert frame.endswith(tail)
        assert decode_request(frame[4:])[1]["topics"] is None
        frame = encode_request(3, version, 1, None, {"topics": []})
        assert decode_request(frame[4:])[1]["topics"] == []
    # where null is not allowed (Metadata v0), None is sent as empty: for v0 that means "all topics"
    assert decode_request(encode_request(3, 0, 1, None, {"topics": None})[4:])[1]["topics"] == []
    # a null non-nullable string on the wire is garbage
    payload = bytes.fromhex("0003" "0000" "00000001" "ffff" "00000001" "ffff")
    with pytest.raises(ProtocolDecodeError):
        decode_request(payload)


def test_varints():
    for n in (0, 1, 127, 128, 300, 16383, 16384, 2**21, 2**28, 2**32 - 1):
        raw = uvarint_bytes(n)
        assert read_uvarint(memoryview(raw + b"\x00"), 0) == (n, len(raw))
    assert uvarint_bytes(300) == b"\xac\x02"
    with pytest.raises(ProtocolDecodeError):
        read_uvarint(memoryview(b"\xff\xff\xff\xff\xff\x01"), 0)
    with pytest.raises(ProtocolEncodeError):
        uvarint_bytes(-1)


# ---------------------------------------------------------------- tagged fields


def _api_versions_v3_request(tags: bytes, header_tags: bytes = b"\x00") -> bytes:
    return (bytes.fromhex("0012" "0003" "00000009" "0001") + b"c" + header_tags
            + b"\x03py" + b"\x021" + tags)


def test_unknown_tags_are_skipped_in_body_and_header():
    unknown = b"\x02" + b"\x07\x03abc" + b"\x2a\x00"  # tag 7 (3 bytes), tag 42 (empty)
    header, body = decode_request(_api_versions_v3_request(unknown, header_tags=b"\x01\x05\x02zz"))
    assert header.correlation_id == 9 and header.client_id == "c"
    assert body == {"client_software_name": "py", "client_software_version": "1"}


def test_known_tags_round_trip_and_default_values_are_omitted():
    leader = {"leader_id": 3, "leader_epoch": 9}
    body = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 10, "current_leader": leader}]}],
        "node_endpoints": [{"node_id": 3, "host": "h", "port": 1, "rack": None}]}
    frame = b"".join(encode_response(0, 10, 1, body))
    _, decoded = decode_response(0, 10, frame[4:])
    assert decoded["responses"][0]["partition_responses"][0]["current_leader"] == leader
    assert decoded["node_endpoints"] == body["node_endpoints"]
    # the same body with default-valued tagged fields is smaller: they are not sent at all
    body["responses"][0]["partition_responses"][0]["current_leader"] = {"leader_id": -1, "leader_epoch": -1}
    body["node_endpoints"] = []
    smaller = b"".join(encode_response(0, 10, 1, body))
    # each omitted tagged field saves its tag, its size and its data (9 and 13 bytes)
    assert len(smaller) == len(frame) - (1 + 1 + 9) - (1 + 1 + 13)
    # in v9 (flexible, before the tag existed) the field is simply absent
    _, decoded = decode_response(0, 9, b"".join(encode_response(0, 9, 1, body))[4:])
    assert decoded["node_endpoints"] == []


def test_tagged_field_with_wrong_size_is_rejected():
    # tag 0 of ApiVersions response (supported_features) declared 5 bytes but holding 1
    payload = (bytes.fromhex("00000001" "0000") + b"\x01" + bytes.fromhex("00000000")
               + b"\x01" + b"\x00\x05" + b"\x01" + b"\x00" * 4)
    with pytest.raises(ProtocolDecodeError):
        decode_response(18, 3, payload)


# ------------------------------------------------------------ broken frames


def _sample_frames():
    produce = APIS[0]
    yield encode_request(0, 9, 5, "x", sample_body(produce.request))[4:]
    yield encode_request(0, 3, 5, None, sample_body(produce.request))[4:]
    yield encode_request(1, 17, 5, "x", sample_body(APIS[1].request))[4:]
    yield encode_request(18, 3, 5, "x", sample_body(APIS[18].request))[4:]
    yield encode_request(8, 2, 5, "x", sample_body(APIS[8].request))[4:]


@pytest.mark.parametrize("frame", list(_sample_frames()), ids=["produce9", "produce3", "fetch17", "apiv3", "commit2"])
def test_every_truncation_of_a_request_raises_decode_error(frame):
    decode_request(frame)
    for cut in range(len(frame)):
        with pytest.raises(ProtocolDecodeError):
            decode_request(frame[:cut])


def test_every_truncation_of_a_response_raises_decode_error():
    for api_key, version in ((3, 12), (1, 11), (1, 16), (18, 0), (11, 9)):
        frame = b"".join(encode_response(api_key, version, 1, sample_body(APIS[api_key].response)))[4:]
        for cut in range(len(frame)):
            with pytest.raises(ProtocolDecodeError):
                decode_response(api_key, version, frame[:cut])


def test_trailing_bytes_are_rejected():
    frame = encode_request(12, 0, 1, "c", {"group_id": "g", "generation_id": 1, "member_id": "m"})[4:]
    with pytest.raises(ProtocolDecodeError):
        decode_request(frame + b"\x00")


def test_trailing_bytes_can_be_ignored_as_brokers_do():
    # librdkafka's all-topics Metadata request in flexible versions: a 4-byte array
    # placeholder of which only the first byte (0 = null) is read, then the body.
    frame = bytes.fromhex("0003000d00000004000772646b61666b61" "00" "00000000" "01" "00" "00")
    header, body = decode_request(frame, allow_trailing=True)
    assert (header.api_key, header.api_version, header.client_id) == (3, 13, "rdkafka")
    assert body["topics"] is None
    with pytest.raises(ProtocolDecodeError):
        decode_request(frame)


def test_huge_counts_fail_fast_without_allocating():
    payload = bytes.fromhex("0003" "0001" "00000001" "ffff" "7fffffff")  # Metadata v1, 2**31-1 topics
    with pytest.raises(ProtocolDecodeError):
        decode_request(payload)
    payload = bytes.fromhex("0000" "0003" "00000001" "ffff" "ffff" "0001" "00000001" "00000001"
                            "0001") + b"t" + bytes.fromhex("00000001" "00000000" "7fffffff")
    with pytest.raises(ProtocolDecodeError):  # records length beyond the frame
        decode_request(payload)


def test_random_garbage_only_ever_raises_protocol_errors():
    rng = random.Random(4242)
    keys = sorted(SUPPORTED)
    for i in range(3000):
        api_key = rng.choice(keys)
        low, high = SUPPORTED[api_key]
        version = rng.randint(low, high)
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 60)))
        payload = struct.pack(">hhi", api_key, version, i) + body
        try:
            decode_request(payload)
        except ProtocolError:
            pass
        try:
            decode_response(api_key, version, body)
        except ProtocolError:
            pass
    for length in range(8):  # too short for even a header
        with pytest.raises(ProtocolDecodeError):
            decode_request(b"\x00" * length)


def test_invalid_utf8_is_a_decode_error():
    payload = bytes.fromhex("0003" "0000" "00000001" "0001") + b"c" + bytes.fromhex("00000001" "0002") + b"\xff\xfe"
    with pytest.raises(ProtocolDecodeError):
        decode_request(payload)


# ------------------------------------------------------------------ versions


def test_unknown_version_raises_unsupported_version_with_header():
    payload = bytes.fromhex("0003" "0063" "0000002a" "0001") + b"c" + b"\x00\x00"  # Metadata v99
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(payload)
    assert (info.value.api_key, info.value.version) == (3, 99)
    assert info.value.header.correlation_id == 42
    with pytest.raises(UnsupportedVersionError):
        encode_request(3, SUPPORTED[3][1] + 1, 1, None, {})
    with pytest.raises(UnsupportedVersionError):
        encode_response(0, -1, 1, {})
    with pytest.raises(UnsupportedVersionError):
        decode_response(1, 99, b"")


def test_unknown_api_key_raises_its_own_error():
    for api_key in (999, 9999, -5):  # keys no Kafka version defines
        payload = struct.pack(">hhi", api_key, 0, 77) + b"\x00\x01c"
        with pytest.raises(UnknownApiKeyError) as info:
            decode_request(payload)
        assert info.value.api_key == api_key and info.value.header.correlation_id == 77
        assert not isinstance(info.value, UnsupportedVersionError)
        with pytest.raises(UnknownApiKeyError):
            encode_response(api_key, 0, 1, {})


def test_too_new_api_versions_request_is_still_answerable():
    # a future client sends ApiVersions v9 with a body we cannot know
    payload = bytes.fromhex("0012" "0009" "00000063" "0003") + b"cli" + b"\x00" + b"\x05whatever"
    header, offset = decode_request_header(payload)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 9, 99, "cli")
    assert header.header_version == 2 and offset == 14
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(payload)
    assert info.value.header == header
    answer = api_versions_fallback_response(info.value.header.correlation_id)
    assert frame_size(answer[:4]) == len(answer) - 4
    correlation_id, body = decode_response(18, 0, answer[4:])
    assert correlation_id == 99 and body["error_code"] == errors.UNSUPPORTED_VERSION == 35
    assert {e["api_key"]: (e["min_version"], e["max_version"]) for e in body["api_keys"]} == ADVERTISED
    assert ADVERTISED[22][1] == SUPPORTED[22][1] - 1  # unstable InitProducerId v6 is not advertised


# -------------------------------------------------------------------- chunks


class FileSlice:
    """Stand-in for the gateway's sendfile slice: has a length, is not bytes-like."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)


def _flatten(chunks) -> bytes:
    return b"".join(c.data if isinstance(c, FileSlice) else bytes(c) for c in chunks)


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_chunk_objects_pass_through_encode_response(version):
    file_slice = FileSlice(b"F" * 1000)
    big = bytes(range(256)) * (RECORDS_INLINE_MAX // 256 + 1)
    small = b"small-batch"
    body = {"responses": [{"topic": "t", "topic_id": None, "partitions": [
        {"partition_index": 0, "high_watermark": 5, "records": file_slice},
        {"partition_index": 1, "high_watermark": 6, "records": small},
        {"partition_index": 2, "high_watermark": 7, "records": big},
        {"partition_index": 3, "high_watermark": 8, "records": None},
    ]}]}
    chunks = encode_response(1, version, 31, body)
    assert [type(c) for c in chunks] == [bytes, FileSlice, bytes, bytes, bytes]
    assert chunks[1] is file_slice and chunks[3] is big  # neither copied
    assert struct.unpack(">i", chunks[0][:4])[0] == sum(len(c) for c in chunks) - 4
    correlation_id, decoded = decode_response(1, version, _flatten(chunks)[4:])
    parts = decoded["responses"][0]["partitions"]
    assert correlation_id == 31
    assert [bytes(p["records"]) if p["records"] is not None else None for p in parts] == [
        file_slice.data, small, big, None]


def test_a_memoryview_of_records_is_passed_through_uncopied():
    backing = bytearray(b"x" * (RECORDS_INLINE_MAX + 5))
    view = memoryview(backing)[3:]
    body = {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": view}]}]}
    chunks = encode_response(1, 11, 1, body)
    assert chunks[1] is view
    assert struct.unpack(">i", chunks[0][:4])[0] == sum(len(c) for c in chunks) - 4


def test_opaque_chunks_cannot_go_into_a_request():
    body = {"acks": 1, "timeout_ms": 1, "topic_data": [{"name": "t", "partition_data": [
        {"index": 0, "records": FileSlice(b"abc")}]}]}
    with pytest.raises(ProtocolEncodeError):
        encode_request(0, 9, 1, None, body)


def test_bad_values_raise_encode_error():
    with pytest.raises(ProtocolEncodeError):
        encode_request(12, 0, 1, None, {"group_id": "g", "generation_id": "one", "member_id": "m"})
    with pytest.raises(ProtocolEncodeError):
        encode_request(12, 0, 1, None, {"group_id": "g", "generation_id": 2**40, "member_id": "m"})
    with pytest.raises(ProtocolEncodeError):
        encode_request(12, 0, 1, None, {"group_id": "g" * 40000})  # int16 string length
    with pytest.raises(ProtocolEncodeError):
        encode_response(3, 10, 1, {"topics": [{"topic_id": b"short"}]})


# ---------------------------------------------------------------- framing


def test_frame_size():
    assert frame_size(b"\x00\x00\x01\x00") == 256
    assert frame_size(b"\x00\x00\x00\x00") == 0
    with pytest.raises(ProtocolDecodeError):
        frame_size(b"\xff\xff\xff\xff")
    with pytest.raises(ProtocolDecodeError):
        frame_size(b"\x00\x01")
    with pytest.raises(ProtocolDecodeError):
        frame_size(b"\x10\x00\x00\x00", max_size=100 * 1024 * 1024)


def test_decoders_accept_bytes_bytearray_and_memoryview():
    frame = encode_request(3, 4, 1, "c", {"topics": [{"name": "t"}]})[4:]
    results = [decode_request(x) for x in (frame, bytearray(frame), memoryview(frame))]
    assert results[0] == results[1] == results[2]


def test_one_dict_encodes_at_every_version():
    api = APIS[1]
    body = sample_body(api.response)
    for version in range(api.min_version, api.max_version + 1):
        frame = b"".join(encode_response(1, version, 1, body))
        assert normalize(decode_response(1, version, frame[4:])[1]) == expected(api.response, body, version)


# ----------------------------------------------- every primitive, synthetic schema


def test_every_primitive_type_through_the_generic_compiler():
    import uuid

    from logan_ray.protocol.compiler import Out, compile_struct
    from logan_ray.protocol.schema import (BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING,
                                           UINT16, UINT32, UUID, A, F, S)

    fields = [
        F("i8", INT8), F("i16", INT16), F("i32", INT32), F("i64", INT64),
        F("u16", UINT16), F("u32", UINT32), F("f64", FLOAT64), F("flag", BOOL), F("id", UUID),
        F("s", STRING), F("ns", STRING, nullable="0+"), F("b", BYTES), F("nb", BYTES, nullable="0+"),
        F("r", RECORDS, nullable="0+"), F("strings", A(STRING)), F("longs", A(INT64), nullable="0+"),
        F("nested", A(S(F("x", INT32), F("y", STRING)))),
        F("only_in_1", INT32, "1+", default=-1),
        F("tagged", INT32, "1+", tag=5, default=0),
    ]
    value = {"i8": -128, "i16": 32767, "i32": -(2**31), "i64": 2**63 - 1, "u16": 65535, "u32": 2**32 - 1,
             "f64": -1.25, "flag": True, "id": uuid.UUID(int=2**128 - 1), "s": "\u00e9t\u00e9", "ns": None,
             "b": b"\x00\x01", "nb": None, "r": b"batch", "strings": ["a", ""], "longs": None,
             "nested": [{"x": 1, "y": "one"}], "only_in_1": 7, "tagged": 9}
    sizes = {}
    for version, flexible in ((0, False), (1, True)):
        decode, encode = compile_struct(fields, version, flexible)
        out = Out()
        encode(out, value)
        assert not out.chunks
        decoded, end = decode(memoryview(bytes(out)), 0)
        assert end == len(out)
        decoded["r"] = bytes(decoded["r"])
        want = dict(value)
        if version == 0:
            want.update(only_in_1=-1, tagged=0)
        assert decoded == want
        sizes[version] = len(out)
    # classic: 1+2+4+8+2+4+8+1+16 fixed, strings 2+5 and 2 (null), bytes 4+2 and 4 (null), records 4+5,
    # strings array 4+(2+1)+(2+0), null longs 4, nested 4+4+(2+3)
    assert sizes[0] == 46 + 7 + 2 + 6 + 4 + 9 + 9 + 4 + 13
    # flexible: one-byte varint prefixes, empty tags per nested struct, v1 field, tagged field (tag, size, 4)
    assert sizes[1] == 46 + 6 + 1 + 3 + 1 + 6 + 4 + 1 + (1 + 4 + 4 + 1) + 4 + (1 + 1 + 1 + 4)


def test_produce_with_acks_zero_expects_no_response():
    from logan_ray.protocol import expects_response

    assert not expects_response(0, {"acks": 0})
    assert expects_response(0, {"acks": 1}) and expects_response(0, {"acks": -1})
    assert expects_response(1, {"acks": 0})
