"""Every API at every implemented version: request and response survive encode -> decode."""
from __future__ import annotations

import pytest

from logan_ray.protocol import (
    APIS,
    SUPPORTED,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from protocol_samples import expected, normalize, sample_body

ALL_VERSIONS = [
    pytest.param(key, version, id=f"{api.name}-v{version}")
    for key, api in sorted(APIS.items())
    for version in range(api.min_version, api.max_version + 1)
]


def test_every_required_api_is_implemented_with_all_versions():
    required = {0: 11, 1: 17, 2: 10, 3: 12, 8: 9, 9: 9, 10: 6, 11: 9, 12: 4, 13: 5, 14: 5, 15: 5, 16: 5,
                18: 4, 19: 7, 20: 6, 21: 2, 22: 5, 32: 4, 33: 2, 37: 3, 42: 2, 43: 2, 44: 1, 45: 1, 46: 0, 47: 0, 60: 1}
    for key, top in required.items():
        low, high = SUPPORTED[key]
        assert low == 0 and high >= top, (key, SUPPORTED[key])


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("api_key,version", ALL_VERSIONS)
def test_request_round_trip(api_key, version, nulls):
    api = APIS[api_key]
    body = sample_body(api.request, nulls=nulls, seed=version + 3)
    frame = encode_request(api_key, version, 123456, "client-\u00e9", body)
    assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
    header, decoded = decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api_key, version, 123456, "client-\u00e9")
    assert normalize(decoded) == expected(api.request, body, version)
    # the decoded dict re-encodes to the very same bytes
    assert encode_request(api_key, version, 123456, "client-\u00e9", decoded) == frame


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("api_key,version", ALL_VERSIONS)
def test_response_round_trip(api_key, version, nulls):
    api = APIS[api_key]
    body = sample_body(api.response, nulls=nulls, seed=version + 11)
    chunks = encode_response(api_key, version, -7, body)
    frame = b"".join(chunks)
    assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
    correlation_id, decoded = decode_response(api_key, version, frame[4:])
    assert correlation_id == -7
    assert normalize(decoded) == expected(api.response, body, version)
    assert b"".join(encode_response(api_key, version, -7, decoded)) == frame


@pytest.mark.parametrize("api_key,version", ALL_VERSIONS)
def test_empty_body_encodes_defaults(api_key, version):
    """A caller may omit any field: it travels as its schema default."""
    api = APIS[api_key]
    frame = encode_request(api_key, version, 1, None, {})
    header, decoded = decode_request(frame[4:])
    assert header.client_id is None
    assert normalize(decoded) == expected(api.request, {}, version)
    frame = b"".join(encode_response(api_key, version, 1, {}))
    _, decoded = decode_response(api_key, version, frame[4:])
    assert normalize(decoded) == expected(api.response, {}, version)


def test_absent_fields_take_their_schema_defaults():
    frame = encode_request(1, 4, 9, "c", {"max_wait_ms": 500, "min_bytes": 1, "topics": []})
    _, body = decode_request(frame[4:])
    assert body["max_bytes"] == 0x7FFFFFFF  # Fetch v4 has it, defaulted on encode
    assert body["session_epoch"] == -1  # v7+: absent in v4, decoded as default
    assert body["rack_id"] == ""
    assert body["cluster_id"] is None
    assert body["replica_state"] == {"replica_id": -1, "replica_epoch": -1}
    frame = b"".join(encode_response(3, 0, 9, {"brokers": [{"node_id": 1, "host": "h", "port": 9092}]}))
    _, body = decode_response(3, 0, frame[4:])
    assert body["controller_id"] == -1 and body["cluster_id"] is None
    assert body["brokers"][0]["rack"] is None
    assert body["topics"] == []


def test_precompile_builds_a_plan_per_api_version_and_direction():
    from logan_ray.protocol import precompile

    assert precompile() == 2 * sum(high - low + 1 for low, high in SUPPORTED.values())
