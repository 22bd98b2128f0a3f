"""Hand-computed byte layouts: the codec must produce and accept exactly these."""
from __future__ import annotations

import struct

from logan_ray.protocol import (
    ADVERTISED,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_api_versions_v0_request():
    # header v1: api_key=18, api_version=0, correlation_id=1, client_id="kcat"; empty body
    golden = bytes.fromhex("0000000e" "0012" "0000" "00000001" "0004") + b"kcat"
    assert encode_request(18, 0, 1, "kcat", {}) == golden
    header, body = decode_request(golden[4:])
    assert header == (18, 0, 1, "kcat", 1)
    assert body == {"client_software_name": "", "client_software_version": ""}


def test_metadata_v0_request():
    payload = (
        bytes.fromhex("0003" "0000" "00000002" "0001") + b"c"  # header v1
        + bytes.fromhex("00000001" "0002") + b"t1"  # topics: [name "t1"]
    )
    assert encode_request(3, 0, 2, "c", {"topics": [{"name": "t1"}]}) == framed(payload)
    header, body = decode_request(payload)
    assert header.correlation_id == 2 and body["topics"][0]["name"] == "t1"


def test_metadata_v1_null_topics_means_all_topics():
    payload = bytes.fromhex("0003" "0001" "00000002" "ffff" "ffffffff")  # null client id, null topics
    assert encode_request(3, 1, 2, None, {"topics": None}) == framed(payload)
    header, body = decode_request(payload)
    assert header.client_id is None and body["topics"] is None


def test_api_versions_v3_request_is_flexible_but_client_id_is_not_compact():
    payload = (
        bytes.fromhex("0012" "0003" "00000003" "0001") + b"c" + b"\x00"  # header v2: int16 client id + no tags
        + b"\x03py" + b"\x021" + b"\x00"  # compact strings, empty tagged fields
    )
    frame = encode_request(18, 3, 3, "c", {"client_software_name": "py", "client_software_version": "1"})
    assert frame == framed(payload)
    header, body = decode_request(payload)
    assert header.header_version == 2
    assert body == {"client_software_name": "py", "client_software_version": "1"}


def test_api_versions_v3_response_uses_header_v0_and_tagged_fields():
    body = {"api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}], "finalized_features_epoch": 5}
    payload = (
        bytes.fromhex("00000005")  # response header v0 even though v3 is flexible
        + bytes.fromhex("0000")  # error_code
        + b"\x02" + bytes.fromhex("0012" "0000" "0004") + b"\x00"  # compact array of 1, entry tags
        + bytes.fromhex("00000000")  # throttle_time_ms
        + b"\x01" + b"\x01\x08" + struct.pack(">q", 5)  # one tagged field: tag 1, 8 bytes
    )
    assert encode_response(18, 3, 5, body) == [framed(payload)]
    correlation_id, decoded = decode_response(18, 3, payload)
    assert correlation_id == 5 and decoded["finalized_features_epoch"] == 5
    assert decoded["supported_features"] == [] and decoded["zk_migration_ready"] is False


def test_metadata_v9_response_header_v1_has_tagged_fields():
    payload = (
        bytes.fromhex("0000002a") + b"\x00"  # header v1: correlation id + empty tags
        + bytes.fromhex("00000000")  # throttle
        + b"\x01"  # brokers: compact empty
        + b"\x00"  # cluster_id: compact null
        + bytes.fromhex("00000001")  # controller_id
        + b"\x01"  # topics: compact empty
        + bytes.fromhex("80000000")  # cluster_authorized_operations default INT32_MIN
        + b"\x00"
    )
    assert b"".join(encode_response(3, 9, 42, {"controller_id": 1})) == framed(payload)


def test_produce_v3_request_layout():
    records = b"RECORDS!"
    payload = (
        bytes.fromhex("0000" "0003" "00000007" "0001") + b"p"
        + bytes.fromhex("ffff")  # transactional_id null
        + bytes.fromhex("ffff" "00001388")  # acks=-1, timeout 5000
        + bytes.fromhex("00000001" "0001") + b"t"
        + bytes.fromhex("00000001" "00000002" "00000008") + records
    )
    body = {"acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": records}]}]}
    assert encode_request(0, 3, 7, "p", body) == framed(payload)
    _, decoded = decode_request(payload)
    assert bytes(decoded["topic_data"][0]["partition_data"][0]["records"]) == records


def test_fetch_v12_response_tagged_struct_and_compact_records():
    body = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "current_leader": {"leader_id": 1, "leader_epoch": 2}, "records": b"xy"}]}]}
    payload = (
        bytes.fromhex("00000005") + b"\x00"
        + bytes.fromhex("00000000" "0000" "00000000")  # throttle, error, session
        + b"\x02" + b"\x02t" + b"\x02"  # responses[1], topic "t", partitions[1]
        + bytes.fromhex("00000000" "0000" "0000000000000000")  # index, error, high watermark
        + b"\xff" * 16  # last_stable_offset, log_start_offset = -1
        + b"\x00"  # aborted_transactions: null
        + b"\xff" * 4  # preferred_read_replica -1
        + b"\x03xy"  # compact records
        + b"\x01" + b"\x01\x09" + bytes.fromhex("00000001" "00000002") + b"\x00"  # tag 1: current_leader
        + b"\x00" + b"\x00"  # topic tags, response tags
    )
    assert encode_response(1, 12, 5, body) == [framed(payload)]
    _, decoded = decode_response(1, 12, payload)
    part = decoded["responses"][0]["partitions"][0]
    assert part["current_leader"] == {"leader_id": 1, "leader_epoch": 2}
    assert part["diverging_epoch"] == {"epoch": -1, "end_offset": -1}  # untransmitted tag -> default
    assert bytes(part["records"]) == b"xy"


def test_api_versions_fallback_response_layout():
    from logan_ray.protocol import api_versions_fallback_response

    entries = b"".join(struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in ADVERTISED.items())
    payload = bytes.fromhex("0000000b" "0023") + struct.pack(">i", len(ADVERTISED)) + entries
    assert api_versions_fallback_response(11) == framed(payload)
