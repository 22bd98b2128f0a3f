import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logan_ray.storage.errors import CorruptRecordError
from logan_ray.storage.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    TABLE_SIZE,
    UINT32_MAX,
    UVARINT,
    VARINT,
    VARINT_LEN,
    VARINT_NULL,
    ZIGZAG1,
    decode_uvarint,
    decode_varint,
    decode_varlong,
    encode_uvarint,
    encode_varint,
    encode_varlong,
    varint_size,
)

INT32_EDGES = [0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, INT32_MAX, INT32_MIN, INT32_MAX - 1, INT32_MIN + 1]
INT64_EDGES = INT32_EDGES + [INT32_MAX + 1, INT32_MIN - 1, INT64_MAX, INT64_MIN, 2**62, -(2**62)]


# Values from the Kafka protocol spec / protobuf zigzag examples.
@pytest.mark.parametrize(
    "n,encoded",
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-2, b"\x03"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (150, b"\xac\x02"),
        (INT32_MAX, b"\xfe\xff\xff\xff\x0f"),
        (INT32_MIN, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_known_encodings(n, encoded):
    assert encode_varint(n) == encoded
    assert decode_varint(encoded) == (n, len(encoded))
    assert decode_varlong(encoded) == (n, len(encoded))


def test_varlong_extremes_are_ten_bytes():
    assert encode_varlong(INT64_MAX) == b"\xfe" + b"\xff" * 8 + b"\x01"
    assert encode_varlong(INT64_MIN) == b"\xff" * 9 + b"\x01"
    assert decode_varlong(encode_varlong(INT64_MIN)) == (INT64_MIN, 10)


@pytest.mark.parametrize("n", INT32_EDGES)
def test_int32_edges_round_trip(n):
    enc = encode_varint(n)
    assert len(enc) == varint_size(n) <= 5
    assert decode_varint(b"junk" + enc + b"more", 4) == (n, 4 + len(enc))


@pytest.mark.parametrize("n", INT64_EDGES)
def test_int64_edges_round_trip(n):
    enc = encode_varlong(n)
    assert len(enc) == varint_size(n) <= 10
    assert decode_varlong(bytearray(enc)) == (n, len(enc))
    assert decode_varlong(memoryview(enc)) == (n, len(enc))


@settings(max_examples=300)
@given(st.integers(INT32_MIN, INT32_MAX))
def test_varint_property(n):
    enc = encode_varint(n)
    assert decode_varint(enc) == (n, len(enc))
    assert encode_varlong(n) == enc  # same wire form for in-range values


@settings(max_examples=300)
@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_property(n):
    enc = encode_varlong(n)
    assert decode_varlong(enc + b"\x00") == (n, len(enc))


@settings(max_examples=300)
@given(st.integers(0, UINT32_MAX))
def test_uvarint_property(n):
    enc = encode_uvarint(n)
    assert decode_uvarint(enc) == (n, len(enc))
    assert len(enc) <= 5


@given(st.lists(st.integers(INT32_MIN, INT32_MAX), max_size=50))
def test_concatenated_stream(values):
    buf = b"".join(encode_varint(v) for v in values)
    pos = 0
    out = []
    for _ in values:
        v, pos = decode_varint(buf, pos)
        out.append(v)
    assert out == values and pos == len(buf)


def test_out_of_range_encode_rejected():
    for bad in (INT32_MAX + 1, INT32_MIN - 1):
        with pytest.raises(ValueError):
            encode_varint(bad)
    for bad in (INT64_MAX + 1, INT64_MIN - 1):
        with pytest.raises(ValueError):
            encode_varlong(bad)
    for bad in (-1, UINT32_MAX + 1):
        with pytest.raises(ValueError):
            encode_uvarint(bad)


@pytest.mark.parametrize("decode", [decode_varint, decode_varlong, decode_uvarint])
@pytest.mark.parametrize("buf", [b"", b"\x80", b"\xff\xff", b"\x80\x80\x80\x80"])
def test_truncated_raises(decode, buf):
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode(buf)


def test_too_long_varint_raises():
    with pytest.raises(CorruptRecordError, match="too long"):
        decode_varint(b"\x80" * 5 + b"\x00")
    with pytest.raises(CorruptRecordError, match="too long"):
        decode_uvarint(b"\xff" * 6)
    with pytest.raises(CorruptRecordError, match="too long"):
        decode_varlong(b"\x80" * 10 + b"\x00")


def test_five_byte_varint_beyond_32_bits_raises():
    with pytest.raises(CorruptRecordError, match="32 bits"):
        decode_varint(b"\xff\xff\xff\xff\x7f")
    with pytest.raises(CorruptRecordError, match="64 bits"):
        decode_varlong(b"\xff" * 9 + b"\x7f")


def test_tables_agree_with_functions():
    assert len(VARINT) == len(UVARINT) == len(VARINT_LEN) == TABLE_SIZE
    for n in list(range(0, 300)) + [TABLE_SIZE - 1, 8191, 8192]:
        assert VARINT[n] == encode_varint(n)
        assert VARINT_LEN[n] == len(VARINT[n])
        assert UVARINT[n] == encode_uvarint(n)
    assert VARINT_NULL == encode_varint(-1)
    for b in range(0x80):
        assert ZIGZAG1[b] == decode_varint(bytes([b]))[0]
    # past the table the functions still work
    assert decode_varint(encode_varint(TABLE_SIZE))[0] == TABLE_SIZE


def test_the_fast_tables_hold_exactly_the_plain_encodings():
    from logan_ray.storage.varint import TABLE_SIZE, UVARINT, VARINT, VARINT_LEN, _raw_uvarint

    assert UVARINT == tuple(_raw_uvarint(n) for n in range(TABLE_SIZE))
    assert VARINT == tuple(_raw_uvarint(n << 1) for n in range(TABLE_SIZE))
    assert VARINT_LEN == tuple(len(_raw_uvarint(n << 1)) for n in range(TABLE_SIZE))
