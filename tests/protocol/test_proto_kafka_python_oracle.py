"""kafka-python as an independent oracle.

Requests it encodes must decode here; responses encoded here must decode there,
for every API and version both sides implement. Its newer message classes are
generated from Kafka's definitions by its own code; its older hand-written
``kafka.protocol.old`` classes check the oldest versions (Produce v0-2, Fetch v0-3,
ListOffsets v0, Metadata v0) that newer definitions dropped.
"""
from __future__ import annotations

import uuid

import pytest
from kafka.protocol import admin as kp_admin
from kafka.protocol import consumer as kp_consumer
from kafka.protocol import metadata as kp_metadata
from kafka.protocol import producer as kp_producer
from kafka.protocol import sasl as kp_sasl

from logan_ray.protocol import APIS, decode_request, encode_request, encode_response
from logan_ray.protocol.schema import VersionRange
from protocol_samples import expected, normalize, sample_body

KP_MODULES = (kp_admin, kp_consumer, kp_metadata, kp_producer, kp_sasl)


def kp_class(api_name: str, kind: str):
    for module in KP_MODULES:
        cls = getattr(module, api_name + kind, None)
        if cls is not None:
            return cls
    raise LookupError(api_name + kind)


def kp_versions(cls) -> VersionRange:
    return VersionRange(cls.json["validVersions"])


def to_kp(owner_cls, struct_fields, body: dict, version: int) -> dict:
    """kwargs for a kafka-python data class from one of our body dicts."""
    kwargs = {}
    for field in struct_fields:
        if not field.for_version_q(version) or field.name not in body:
            continue
        value = body[field.name]
        if value is not None and (field.is_struct() or field.is_struct_array()):
            nested = getattr(owner_cls, field.type_str.lstrip("[]"))
            build = lambda d: nested(**to_kp(nested, nested._struct._fields, d, version))  # noqa: E731
            value = [build(d) for d in value] if field.is_struct_array() else build(value)
        kwargs[field.name] = value
    return kwargs


def from_kp(value):
    """kafka-python's decoded values in our representation.

    kafka-python turns the ``*_authorized_operations`` int32 bitfields into sets of
    bit numbers (and names them all ``authorized_operations``): turn them back.
    """
    if isinstance(value, dict):
        return {k: from_kp(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        bits = sum(1 << b for b in value)
        return bits - (1 << 32) if bits >= 1 << 31 else bits
    if isinstance(value, list):
        return [from_kp(v) for v in value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def only_present(fields, decoded: dict, version: int) -> dict:
    """Our decoded dict restricted to the fields that exist at ``version``, named as kafka-python names them."""
    out = {}
    for f in fields:
        if version not in f.versions:
            continue
        name = "authorized_operations" if f.name.endswith("_authorized_operations") else f.name
        value = decoded[f.name]
        element = getattr(f.type, "element", None)
        if hasattr(f.type, "fields") and value is not None:
            value = only_present(f.type.fields, value, version)
        elif element is not None and hasattr(element, "fields") and value is not None:
            value = [only_present(element.fields, v, version) for v in value]
        out[name] = value
    return out


def _cases():
    for key, api in sorted(APIS.items()):
        versions = kp_versions(kp_class(api.name, "Request"))
        for version in range(api.min_version, api.max_version + 1):
            if version in versions:
                yield pytest.param(key, version, id=f"{api.name}-v{version}")


CASES = list(_cases())


def test_the_oracle_covers_most_versions():
    assert len(CASES) >= 160  # of 179 implemented (api, version) pairs


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("api_key,version", CASES)
def test_requests_encoded_by_kafka_python_decode_here(api_key, version, nulls):
    api = APIS[api_key]
    cls = kp_class(api.name, "Request")
    body = sample_body(api.request, seed=version, nulls=nulls)
    if nulls:  # only where null is allowed at this version: elsewhere kafka-python (rightly) refuses None
        body = expected(api.request, body, version)
    request = cls[version](**to_kp(cls, cls._struct._fields, body, version))
    request.with_header(correlation_id=4321, client_id="kafka-python")
    wire = bytes(request.encode(header=True, framed=True))
    assert wire == encode_request(api_key, version, 4321, "kafka-python", body)
    header, decoded = decode_request(wire[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api_key, version, 4321, "kafka-python")
    assert normalize(decoded) == expected(api.request, body, version)


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("api_key,version", CASES)
def test_responses_encoded_here_decode_in_kafka_python(api_key, version, nulls):
    api = APIS[api_key]
    cls = kp_class(api.name, "Response")
    body = sample_body(api.response, seed=version + 5, nulls=nulls)
    if api_key == 18:
        body["error_code"] = 0  # kafka-python reads any failed ApiVersions answer as v0
    wire = b"".join(encode_response(api_key, version, 99, body))
    theirs = cls[version].decode(wire[4:], header=True)
    assert theirs.header.correlation_id == 99
    mine = only_present(api.response, expected(api.response, body, version), version)
    assert from_kp(theirs.to_dict(json=False)) == mine
    # and what kafka-python encodes from its decoded object is byte-identical
    assert bytes(theirs.encode(header=False)) == wire[4 + (4 if api_key == 18 or not api.is_flexible(version) else 5):]


def test_nulls_cross_the_oracle():
    api = APIS[3]
    for version in (1, 5, 9, 12):
        body = sample_body(api.response, nulls=True)
        wire = b"".join(encode_response(3, version, 1, body))
        theirs = kp_metadata.MetadataResponse[version].decode(wire[4:], header=True).to_dict(json=False)
        assert from_kp(theirs) == only_present(api.response, expected(api.response, body, version), version)


# --------------------------------------------------- oldest versions (old classes)


def test_old_produce_v0_to_v2_requests():
    from kafka.protocol.old.produce import ProduceRequest

    records = b"\x00" * 8 + b"legacy message set"
    for version in (0, 1, 2):
        request = ProduceRequest[version](required_acks=1, timeout=1500, topics=[("t", [(3, records)])])
        wire = _old_request_bytes(request, correlation_id=8, client_id="old")
        header, body = decode_request(wire)
        assert (header.api_key, header.api_version, header.client_id) == (0, version, "old")
        assert body["acks"] == 1 and body["timeout_ms"] == 1500
        partition = body["topic_data"][0]["partition_data"][0]
        assert body["topic_data"][0]["name"] == "t" and partition["index"] == 3
        assert bytes(partition["records"]) == records


def test_old_fetch_v0_to_v3_requests_and_responses():
    from kafka.protocol.old.fetch import FetchRequest, FetchResponse

    for version in (0, 1, 2, 3):
        args = [-1, 100, 1] + ([1 << 20] if version >= 3 else []) + [[("t", [(0, 42, 4096)])]]
        header, body = decode_request(_old_request_bytes(FetchRequest[version](*args), 5, "old"))
        assert header.api_version == version
        assert body["max_wait_ms"] == 100 and body["min_bytes"] == 1
        assert body["max_bytes"] == (1 << 20 if version >= 3 else 0x7FFFFFFF)
        assert body["topics"][0]["partitions"][0] == {
            "partition": 0, "fetch_offset": 42, "partition_max_bytes": 4096,
            "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1,
            "replica_directory_id": uuid.UUID(int=0), "high_watermark": 2**63 - 1}
        response = {"throttle_time_ms": 7, "responses": [{"topic": "t", "partitions": [
            {"partition_index": 0, "error_code": 0, "high_watermark": 99, "records": b"batch"}]}]}
        wire = b"".join(encode_response(1, version, 5, response))
        fields = FetchResponse[version].decode(wire[8:]).to_object()
        topic = fields["responses"][0]
        assert topic["topic"] == "t"
        assert topic["partitions"][0]["high_watermark"] == 99
        assert bytes(topic["partitions"][0]["records"]) == b"batch"
        if version >= 1:
            assert fields["throttle_time_ms"] == 7


def test_old_list_offsets_v0_and_metadata_v0():
    from kafka.protocol.old.list_offsets import ListOffsetsRequest, ListOffsetsResponse
    from kafka.protocol.old.metadata import MetadataRequest, MetadataResponse

    header, body = decode_request(_old_request_bytes(ListOffsetsRequest[0](-1, [("t", [(1, -1, 3)])]), 3, "o"))
    assert body["topics"][0]["partitions"][0] == {
        "partition_index": 1, "timestamp": -1, "max_num_offsets": 3, "current_leader_epoch": -1}
    wire = b"".join(encode_response(2, 0, 3, {"topics": [{"name": "t", "partitions": [
        {"partition_index": 1, "error_code": 0, "old_style_offsets": [10, 0]}]}]}))
    decoded = ListOffsetsResponse[0].decode(wire[8:]).to_object()
    assert decoded["topics"][0]["partitions"][0]["old_style_offsets"] == [10, 0]

    header, body = decode_request(_old_request_bytes(MetadataRequest[0](["a", "b"]), 1, "o"))
    assert [t["name"] for t in body["topics"]] == ["a", "b"]
    wire = b"".join(encode_response(3, 0, 1, {
        "brokers": [{"node_id": 1, "host": "localhost", "port": 9092}],
        "topics": [{"error_code": 0, "name": "a", "partitions": [
            {"error_code": 0, "partition_index": 0, "leader_id": 1, "replica_nodes": [1], "isr_nodes": [1]}]}]}))
    decoded = MetadataResponse[0].decode(wire[8:]).to_object()
    assert decoded["brokers"][0]["host"] == "localhost"
    assert decoded["topics"][0]["partitions"][0]["replica_nodes"] == [1]


def _old_request_bytes(request, correlation_id: int, client_id: str) -> bytes:
    """Header v1 + body as kafka-python's old classes lay them out (no size prefix)."""
    import struct

    name = client_id.encode()
    header = struct.pack(">hhih", request.API_KEY, request.API_VERSION, correlation_id, len(name)) + name
    return header + bytes(request.encode())
