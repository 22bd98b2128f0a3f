"""Bad produce data, offsets and configs: a typed error that says what was wrong, and no change on disk."""
import struct

import pytest

from logan_ray.storage.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)

from log_helpers import batch, disk_state, open_log, recrc


def good() -> bytes:
    return batch(0, 3, pad=50)


def with_magic(b: bytes, magic: int) -> bytes:
    out = bytearray(b)
    out[16] = magic
    return bytes(out)


def with_bad_crc(b: bytes) -> bytes:
    out = bytearray(b)
    out[-5] ^= 0xFF
    return bytes(out)


def with_lod(b: bytes, lod: int) -> bytes:
    out = bytearray(b)
    struct.pack_into(">i", out, 23, lod)
    return bytes(recrc(out))


def with_codec(b: bytes, codec: int) -> bytes:
    out = bytearray(b)
    attrs = struct.unpack_from(">h", out, 21)[0]
    struct.pack_into(">h", out, 21, (attrs & ~7) | codec)
    return bytes(recrc(out))


def with_length(b: bytes, length: int) -> bytes:
    out = bytearray(b)
    struct.pack_into(">i", out, 8, length)
    return bytes(out)


BAD_INPUTS = {
    "empty": (lambda: b"", InvalidRecordError, "no record batches"),
    "wrong magic": (lambda: with_magic(good(), 1), InvalidRecordError, "magic 1"),
    "bad crc": (lambda: with_bad_crc(good()), CorruptRecordError, "CRC32C mismatch"),
    "truncated batch": (lambda: good()[:-10], CorruptRecordError, "truncated"),
    "truncated header": (lambda: good()[:40], CorruptRecordError, "truncated: 40 bytes"),
    "length below header": (lambda: with_length(good(), 10), CorruptRecordError, "smaller than the header"),
    "negative length": (lambda: with_length(good(), -100), CorruptRecordError, "smaller than the header"),
    "offset delta vs count": (lambda: with_lod(good(), 5), InvalidRecordError, "last offset delta 5 does not match record count 3"),
    "count above delta": (lambda: with_lod(good(), 1), InvalidRecordError, "claims 3 records"),
    "unknown codec": (lambda: with_codec(good(), 6), UnsupportedCompressionError, "codec id 6"),
    "good then garbage": (lambda: good() + b"\x00" * 20, CorruptRecordError, "batch 1 at byte"),
    "good then bad crc": (lambda: good() + with_bad_crc(good()), CorruptRecordError, "batch 1 at byte"),
    "oversize batch": (lambda: batch(0, 1, pad=3000), RecordTooLargeError, "exceeds max.message.bytes=2000"),
    "oversize total": (lambda: b"".join(batch(i, 1, pad=600) for i in range(4)), RecordTooLargeError, "in 4 batches exceeds max.message.bytes=2000"),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_produce_data_is_rejected_and_nothing_changes(tmp_path, name):
    make, error, fragment = BAD_INPUTS[name]
    lg = open_log(tmp_path / "t-0", max_message_bytes=2000, segment_bytes=600)
    for i in range(5):
        lg.append(batch(i, 1, pad=200))
    lg.flush()  # settle background fsyncs of rolled segments, so the folder is quiet
    before = disk_state(lg.directory)
    end, size = lg.log_end_offset, lg.size_bytes
    with pytest.raises(error) as err:
        lg.append(make())
    assert fragment in str(err.value), str(err.value)
    assert err.value.code == error.code
    assert (lg.log_end_offset, lg.size_bytes) == (end, size)
    assert disk_state(lg.directory) == before
    # ...and the log still works.
    assert lg.append(good()).base_offset == end


def test_batch_error_messages_locate_the_batch(tmp_path):
    lg = open_log(tmp_path / "t-0")
    data = good() + good() + with_magic(good(), 0)
    with pytest.raises(InvalidRecordError) as err:
        lg.append(data)
    assert f"batch 2 at byte {2 * len(good())} of {len(data)}" in str(err.value)


@pytest.mark.parametrize("call", ["locate", "read", "read_records"])
@pytest.mark.parametrize("offset", [-1, -100, 11, 10**15])
def test_out_of_range_offsets(tmp_path, call, offset):
    lg = open_log(tmp_path / "t-0")
    for i in range(5):
        lg.append(batch(i, 2))
    before = disk_state(lg.directory)
    with pytest.raises(OffsetOutOfRangeError) as err:
        getattr(lg, call)(offset, 1000)
    message = str(err.value)
    assert str(offset) in message and "0 (log start)" in message and "10 (log end)" in message
    assert err.value.code == 1
    assert disk_state(lg.directory) == before and lg.log_end_offset == 10


def test_bad_offsets_for_management_calls(tmp_path):
    lg = open_log(tmp_path / "t-0")
    lg.append(batch(0, 4))
    before = disk_state(lg.directory)
    with pytest.raises(OffsetOutOfRangeError, match="cannot delete records before offset 9"):
        lg.delete_records(9)
    with pytest.raises(OffsetOutOfRangeError, match="-2"):
        lg.delete_records(-2)
    with pytest.raises(InvalidTimestampError, match="-9"):
        lg.offset_for_timestamp(-9)
    assert disk_state(lg.directory) == before
    assert (lg.log_start_offset, lg.log_end_offset) == (0, 4)


@pytest.mark.parametrize(
    "overrides,fragment",
    [
        ({"segment_bytes": "tiny"}, "'segment.bytes'"),
        ({"retention_ms": -7}, "'retention.ms'"),
        ({"message_timestamp_type": "WallClock"}, "'message.timestamp.type'"),
        ({"cleanup_policy": "shred"}, "'cleanup.policy'"),
        ({"bogus_setting": "1"}, "'bogus.setting'"),
    ],
)
def test_bad_configs(tmp_path, overrides, fragment):
    with pytest.raises(InvalidConfigError) as err:
        open_log(tmp_path / "t-0", **overrides)
    assert fragment in str(err.value)
    assert not (tmp_path / "t-0").exists()
