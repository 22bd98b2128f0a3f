"""The transaction APIs (issue 35) encode and decode, one realistic body per version range.

The generic round trip (``test_proto_roundtrip.py``) feeds random bodies; these feed what
a transactional client and a coordinator really send, pin a few layouts byte by byte,
and check that ApiVersions still announces none of them (no handler serves them yet).
Pure Python, no Ray.
"""
from __future__ import annotations

import struct

import pytest

from logan_ray.protocol import (
    ADVERTISED,
    SUPPORTED,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    supported_api_versions,
)
from logan_ray.protocol.codec import NOT_YET_SERVED

TXN_KEYS = {24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (0, 1), 28: (0, 4), 65: (0, 0), 66: (0, 1)}


def _request(api_key: int, version: int, body: dict) -> dict:
    frame = encode_request(api_key, version, 77, "txn-client", body)
    header, decoded = decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id) == (api_key, version, 77)
    return decoded


def _response(api_key: int, version: int, body: dict) -> dict:
    frame = b"".join(encode_response(api_key, version, 77, body))
    return decode_response(api_key, version, frame[4:])[1]


def test_transaction_apis_are_known_to_the_codec_with_kafkas_version_ranges():
    assert {k: SUPPORTED[k] for k in TXN_KEYS} == TXN_KEYS
    assert NOT_YET_SERVED == {27}  # WriteTxnMarkers: the coordinator writes markers through the partition actors


def test_api_versions_announces_the_served_transaction_apis_only():
    announced = {entry["api_key"] for entry in supported_api_versions()}
    served = set(TXN_KEYS) - {27}
    assert served <= announced and served <= set(ADVERTISED)
    assert 27 not in announced and 27 not in ADVERTISED
    assert 22 in announced  # InitProducerId


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_add_partitions_to_txn_client_form_round_trips(version):
    body = {"v3_and_below_transactional_id": "tx-1", "v3_and_below_producer_id": 4000,
            "v3_and_below_producer_epoch": 3,
            "v3_and_below_topics": [{"name": "orders", "partitions": [0, 2]}]}
    decoded = _request(24, version, body)
    assert decoded == {**body, "transactions": []}
    answer = {"throttle_time_ms": 5, "results_by_topic_v3_and_below": [
        {"name": "orders", "results_by_partition": [{"partition_index": 2, "partition_error_code": 51}]}]}
    assert _response(24, version, answer) == {**answer, "error_code": 0, "results_by_transaction": []}


@pytest.mark.parametrize("version", [4, 5])
def test_add_partitions_to_txn_batched_verify_only_form_round_trips(version):
    body = {"transactions": [
        {"transactional_id": "tx-1", "producer_id": 4000, "producer_epoch": 3, "verify_only": True,
         "topics": [{"name": "orders", "partitions": [1]}]},
        {"transactional_id": "tx-2", "producer_id": 4001, "producer_epoch": 0, "verify_only": False,
         "topics": [{"name": "audit", "partitions": [0, 5]}]},
    ]}
    decoded = _request(24, version, body)
    assert decoded["transactions"] == body["transactions"]
    assert "v3_and_below_transactional_id" not in decoded or decoded["v3_and_below_transactional_id"] == ""
    answer = {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": [
        {"transactional_id": "tx-1", "topic_results": [
            {"name": "orders", "results_by_partition": [{"partition_index": 1, "partition_error_code": 120}]}]}]}
    decoded_answer = _response(24, version, answer)
    assert decoded_answer["results_by_transaction"] == answer["results_by_transaction"]


@pytest.mark.parametrize("version", range(0, 5))
def test_add_offsets_to_txn_round_trips(version):
    body = {"transactional_id": "tx-1", "producer_id": 9, "producer_epoch": 2, "group_id": "g"}
    assert _request(25, version, body) == body
    assert _response(25, version, {"throttle_time_ms": 1, "error_code": 48}) == {"throttle_time_ms": 1, "error_code": 48}


@pytest.mark.parametrize("version", range(0, 6))
def test_end_txn_round_trips_and_v5_answers_the_bumped_epoch(version):
    body = {"transactional_id": "tx-1", "producer_id": 9, "producer_epoch": 2, "committed": True}
    assert _request(26, version, body) == body
    decoded = _response(26, version, {"throttle_time_ms": 0, "error_code": 0, "producer_id": 9, "producer_epoch": 3})
    if version >= 5:
        assert (decoded["producer_id"], decoded["producer_epoch"]) == (9, 3)
    else:
        assert "producer_id" not in decoded or decoded["producer_id"] == -1


def test_end_txn_v5_response_layout_is_kafkas():
    frame = b"".join(encode_response(26, 5, 7, {"throttle_time_ms": 0, "error_code": 0,
                                                "producer_id": 9, "producer_epoch": 3}))
    # size, correlation id, header tags, throttle, error, producer id, epoch, body tags
    payload = struct.pack(">ib", 7, 0) + struct.pack(">ihqh", 0, 0, 9, 3) + b"\x00"
    assert frame == struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize("version", [0, 1])
def test_write_txn_markers_round_trips(version):
    body = {"markers": [{"producer_id": 9, "producer_epoch": 3, "transaction_result": False,
                         "topics": [{"name": "orders", "partition_indexes": [0, 1]}], "coordinator_epoch": 4}]}
    assert _request(27, version, body) == body
    answer = {"markers": [{"producer_id": 9, "topics": [
        {"name": "orders", "partitions": [{"partition_index": 0, "error_code": 0},
                                          {"partition_index": 1, "error_code": 47}]}]}]}
    assert _response(27, version, answer) == answer


@pytest.mark.parametrize("version", range(0, 5))
def test_txn_offset_commit_round_trips(version):
    body = {"transactional_id": "tx-1", "group_id": "g", "producer_id": 9, "producer_epoch": 2,
            "generation_id": 5, "member_id": "m-1", "group_instance_id": None,
            "topics": [{"name": "in", "partitions": [
                {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": 7,
                 "committed_metadata": None}]}]}
    decoded = _request(28, version, body)
    want = dict(body)
    if version < 3:
        want.update(generation_id=-1, member_id="", group_instance_id=None)
    if version < 2:
        want["topics"] = [{"name": "in", "partitions": [dict(body["topics"][0]["partitions"][0],
                                                            committed_leader_epoch=-1)]}]
    assert {k: decoded.get(k, want[k]) for k in want} == want
    answer = {"throttle_time_ms": 0, "topics": [{"name": "in", "partitions": [{"partition_index": 0, "error_code": 0}]}]}
    assert _response(28, version, answer) == answer


def test_describe_transactions_round_trips():
    assert _request(65, 0, {"transactional_ids": ["tx-1", "tx-2"]}) == {"transactional_ids": ["tx-1", "tx-2"]}
    answer = {"throttle_time_ms": 0, "transaction_states": [
        {"error_code": 0, "transactional_id": "tx-1", "transaction_state": "Ongoing",
         "transaction_timeout_ms": 60000, "transaction_start_time_ms": 1700000000000, "producer_id": 9,
         "producer_epoch": 2, "topics": [{"topic": "orders", "partitions": [0, 3]}]},
        {"error_code": 105, "transactional_id": "tx-2", "transaction_state": "",
         "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
         "producer_epoch": -1, "topics": []}]}
    assert _response(65, 0, answer) == answer


@pytest.mark.parametrize("version", [0, 1])
def test_list_transactions_round_trips(version):
    body = {"state_filters": ["Ongoing"], "producer_id_filters": [9], "duration_filter": 30000}
    decoded = _request(66, version, body)
    assert decoded["state_filters"] == ["Ongoing"] and decoded["producer_id_filters"] == [9]
    assert decoded.get("duration_filter", -1) == (30000 if version >= 1 else -1)
    answer = {"throttle_time_ms": 0, "error_code": 0, "unknown_state_filters": ["Bogus"],
              "transaction_states": [{"transactional_id": "tx-1", "producer_id": 9, "transaction_state": "Ongoing"}]}
    assert _response(66, version, answer) == answer
