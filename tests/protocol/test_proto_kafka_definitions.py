"""The hand-written protocol tables agree with Apache Kafka's own message definitions.

``logan_ray/protocol/messages_*.py`` were typed in by hand from Kafka's JSON message
definitions. A field in the wrong place, a wrong version range or a missing nullable
flag still round-trips through our own codec (both ends share the table), so only a
real client would notice. This test reads the vendored definitions
(``kafka_messages/``, see its README for the Kafka commit) and compares, for every
declared API: key and name, version range, flexible versions, what ApiVersions
advertises, and for each version the fields of request and response (names, order,
types, nullability, tags). Pure Python, no Ray.
"""
from __future__ import annotations

import functools
import json
import re
import uuid
from pathlib import Path
from typing import Any, Sequence

import pytest

from logan_ray.protocol import ADVERTISED, APIS, supported_api_versions
from logan_ray.protocol.codec import NOT_YET_SERVED
from logan_ray.protocol.schema import Api, Array, Field, Struct, Type

KAFKA_DIR = Path(__file__).with_name("kafka_messages")
KAFKA_PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "string", "bytes", "records", "uuid"}
)
MAX_VERSION = 2**15 - 1

#: Versions logan-ray declares that are newer than the vendored definitions, so there is
#: nothing yet to check them against (the vendored commit predates Kafka 4.0). Each entry
#: is (first, last) declared version beyond Kafka's validVersions there; a test fails
#: when an entry is no longer exact, so refreshing the definitions shrinks this list.
NEWER_THAN_VENDORED: dict[str, tuple[int, int]] = {
    "Produce": (12, 13),  # v12 as v11 (KIP-890 transactions v2); v13 names topics by id (KIP-516)
    "Fetch": (18, 18),  # v18: tagged high_watermark per partition in the request
    "ListOffsets": (11, 11),  # v11: same layout as v10
    "Metadata": (13, 13),  # v13: top-level error_code in the response
    "OffsetCommit": (10, 10),  # v10 names topics by id
    "OffsetFetch": (10, 10),  # v10 names topics by id
    "DescribeGroups": (6, 6),  # v6: error_message per group
    "InitProducerId": (6, 6),  # v6: two-phase commit fields (KIP-939), declared unstable, not advertised
    "DescribeCluster": (2, 2),  # v2: include_fenced_brokers / is_fenced
    "AlterPartitionReassignments": (1, 1),  # v1: allow_replication_factor_change (KIP-860)
}


# ------------------------------------------------------------ Kafka's definitions


@functools.cache
def kafka_message(name: str) -> dict:
    """One vendored definition, e.g. ``ProduceRequest``, parsed after dropping ``//`` comment lines."""
    text = (KAFKA_DIR / f"{name}.json").read_text(encoding="utf-8")
    kept = [line for line in text.splitlines() if not line.lstrip().startswith("//")]
    return json.loads("\n".join(kept))


def kafka_range(text: str | None) -> tuple[int, int]:
    """Kafka's version notation ("3+", "0-7", "5", "none") as an inclusive (low, high); empty is (1, 0)."""
    if text is None or text == "none":
        return 1, 0
    if text.endswith("+"):
        return int(text[:-1]), MAX_VERSION
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def in_kafka_range(version: int, text: str | None) -> bool:
    low, high = kafka_range(text)
    return low <= version <= high


def snake_case(kafka_name: str) -> str:
    """Kafka's CamelCase field names in the project's spelling: ``ThrottleTimeMs`` -> ``throttle_time_ms``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", kafka_name).lower()


def kafka_default(field: dict, kafka_type: str) -> Any:
    """The value Kafka assumes for an absent field, in the project's Python terms."""
    text = field.get("default")
    if text is not None and not isinstance(text, str):  # a few definitions write a bare JSON number or bool
        return text
    if kafka_type == "bool":
        return text == "true"
    if kafka_type in ("string", "bytes", "records"):
        if text == "null" or (text is None and kafka_type == "records"):
            return None
        return text or ("" if kafka_type == "string" else b"")
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    if kafka_type == "float64":
        return float(text or 0)
    return int(text, 0) if text else 0


# ----------------------------------------------------------- one version's layout
# Both sides are rendered into the same list of lines, one per field present in a
# version, e.g. "topics[].partitions[].records: records, nullable". Comparing two
# lists of lines makes a mismatch name the field path and what differs.


def _kafka_type_and_children(field: dict, common: dict[str, list]) -> tuple[str, str, list | None]:
    """(description, element type, struct fields) of a Kafka field; element type is the scalar type."""
    ktype = field["type"]
    is_array = ktype.startswith("[]")
    element = ktype[2:] if is_array else ktype
    if element in KAFKA_PRIMITIVES:
        return ktype, element, None
    children = field.get("fields", common.get(element))
    return ("[]struct" if is_array else "struct"), "struct", children


def kafka_lines(fields: Sequence[dict], version: int, common: dict[str, list], prefix: str = "") -> list[str]:
    """The fields of one Kafka struct present in ``version``, untagged in order, then tagged by tag."""
    untagged: list[str] = []
    tagged: list[tuple[int, list[str]]] = []
    for field in fields:
        if not in_kafka_range(version, field.get("versions")):
            continue
        name = snake_case(field["name"])
        description, element, children = _kafka_type_and_children(field, common)
        attributes = [description]
        if in_kafka_range(version, field.get("nullableVersions")):
            attributes.append("nullable")
        is_tagged = "tag" in field and in_kafka_range(version, field.get("taggedVersions"))
        if is_tagged:
            attributes.append(f"tag {field['tag']}")
            if children is None and not description.startswith("[]"):
                attributes.append(f"default {kafka_default(field, element)!r}")
        block = [f"{prefix}{name}: {', '.join(attributes)}"]
        if children is not None:
            inner = f"{prefix}{name}[]." if description.startswith("[]") else f"{prefix}{name}."
            block += kafka_lines(children, version, common, inner)
        if is_tagged:
            tagged.append((field["tag"], block))
        else:
            untagged += block
    return untagged + [line for _, block in sorted(tagged) for line in block]


def _project_type(t: Type) -> tuple[str, Sequence[Field] | None]:
    if isinstance(t, Array):
        element, children = _project_type(t.element)
        return ("[]struct" if children is not None else f"[]{element}"), children
    if isinstance(t, Struct):
        return "struct", t.fields
    return t.name, None


def project_lines(fields: Sequence[Field], version: int, flexible: bool, prefix: str = "") -> list[str]:
    """The same rendering as :func:`kafka_lines`, from logan-ray's declaration."""
    untagged: list[str] = []
    tagged: list[tuple[int, list[str]]] = []
    for field in fields:
        if version not in field.versions:
            continue
        description, children = _project_type(field.type)
        attributes = [description]
        if version in field.nullable:
            attributes.append("nullable")
        is_tagged = field.is_tagged_in(version)
        if is_tagged:
            attributes.append(f"tag {field.tag}")
            if children is None and not description.startswith("[]"):
                attributes.append(f"default {field.default_value()!r}")
        if flexible and field.compact is False:
            attributes.append("classic encoding in a flexible version")
        block = [f"{prefix}{field.name}: {', '.join(attributes)}"]
        if children is not None:
            inner = f"{prefix}{field.name}[]." if description.startswith("[]") else f"{prefix}{field.name}."
            block += project_lines(children, version, flexible, inner)
        if is_tagged:
            tagged.append((field.tag, block))
        else:
            untagged += block
    return untagged + [line for _, block in sorted(tagged) for line in block]


# --------------------------------------------------------------------- defaults
# A field's default is what an absent (older-version or omitted tagged) field decodes
# to and what a missing key encodes as, so it has to be Kafka's.


def kafka_defaults(fields: Sequence[dict], common: dict[str, list], prefix: str = "") -> dict[str, Any]:
    """Path -> default of every scalar field, at any version, nested structs included."""
    out: dict[str, Any] = {}
    for field in fields:
        name = snake_case(field["name"])
        description, element, children = _kafka_type_and_children(field, common)
        if children is not None:
            inner = f"{prefix}{name}[]." if description.startswith("[]") else f"{prefix}{name}."
            out |= kafka_defaults(children, common, inner)
        elif not description.startswith("[]"):
            out[prefix + name] = project_convention(field, kafka_default(field, element))
    return out


def project_convention(field: dict, default: Any) -> Any:
    """Deliberate difference: a nullable string with no default in Kafka defaults to None here.

    Kafka's generated classes start such a field as "". logan-ray starts every
    ever-nullable field as None (``Field.default_value``). An untagged field is only
    sent in versions where it exists, so the difference never reaches the wire: it
    only shows in what our decoder returns for a version without the field (None,
    not ""). A tagged field is omitted when it equals its default, so it would; the
    exception does not cover those.
    """
    if field["type"] == "string" and "default" not in field and "nullableVersions" in field and "tag" not in field:
        return None
    return default


def project_defaults(fields: Sequence[Field], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in fields:
        description, children = _project_type(field.type)
        if children is not None:
            inner = f"{prefix}{field.name}[]." if description.startswith("[]") else f"{prefix}{field.name}."
            out |= project_defaults(children, inner)
        elif not description.startswith("[]"):
            out[prefix + field.name] = field.default_value()
    return out


# ------------------------------------------------------------------ parameters

DECLARED: list[Api] = sorted(APIS.values(), key=lambda api: api.key)


def kafka_valid(api: Api) -> tuple[int, int]:
    return kafka_range(kafka_message(f"{api.name}Request")["validVersions"])


def checkable_versions(api: Api) -> range:
    """Declared versions that the vendored definitions describe."""
    return range(api.min_version, min(api.max_version, kafka_valid(api)[1]) + 1)


def _layout_cases() -> list:
    return [
        pytest.param(api, version, direction, id=f"{api.name}-v{version}-{direction}")
        for api in DECLARED
        for version in checkable_versions(api)
        for direction in ("request", "response")
    ]


by_api = pytest.mark.parametrize("api", DECLARED, ids=lambda api: api.name)


# ------------------------------------------------------------------------ tests


def test_every_declared_api_has_vendored_definitions():
    missing = [
        f"{api.name}{direction}.json"
        for api in DECLARED
        for direction in ("Request", "Response")
        if not (KAFKA_DIR / f"{api.name}{direction}.json").exists()
    ]
    assert missing == []


@by_api
def test_api_key_and_name_match_kafka(api: Api):
    for direction in ("Request", "Response"):
        message = kafka_message(f"{api.name}{direction}")
        assert (message["name"], message["apiKey"], message["type"]) == (
            f"{api.name}{direction}", api.key, direction.lower()
        )


@by_api
def test_declared_versions_lie_within_kafka_valid_versions(api: Api):
    kafka_low, kafka_high = kafka_valid(api)
    assert kafka_range(kafka_message(f"{api.name}Response")["validVersions"]) == (kafka_low, kafka_high)
    assert api.min_version >= kafka_low, f"{api.name} declares v{api.min_version}, Kafka starts at v{kafka_low}"
    newer = NEWER_THAN_VENDORED.get(api.name)
    if api.max_version > kafka_high:
        assert newer == (kafka_high + 1, api.max_version), (
            f"{api.name} declares v{api.max_version}, Kafka's definitions stop at v{kafka_high}"
        )
    else:
        assert newer is None, f"stale NEWER_THAN_VENDORED entry for {api.name}: Kafka now has v{kafka_high}"


@by_api
def test_flexible_versions_match_kafka(api: Api):
    """Where Kafka is flexible, we must use compact lengths and tagged fields, and only there."""
    request, response = kafka_message(f"{api.name}Request"), kafka_message(f"{api.name}Response")
    assert request["flexibleVersions"] == response["flexibleVersions"]
    wrong = [
        version
        for version in range(api.min_version, api.max_version + 1)
        if api.is_flexible(version) != in_kafka_range(version, request["flexibleVersions"])
    ]
    assert wrong == [], f"{api.name} flexible {api.flexible!r}, Kafka {request['flexibleVersions']!r}"


@by_api
def test_advertised_versions_are_declared_and_stable_in_kafka(api: Api):
    kafka_low, kafka_high = kafka_valid(api)
    if kafka_message(f"{api.name}Request").get("latestVersionUnstable"):
        kafka_high -= 1
    kafka_high = NEWER_THAN_VENDORED.get(api.name, (0, kafka_high))[1]
    if api.key in NOT_YET_SERVED:  # declared for the codec, not announced until a handler serves it
        assert api.key not in ADVERTISED
        return
    low, high = ADVERTISED[api.key]
    assert api.min_version == low <= high <= api.max_version
    assert kafka_low <= low and high <= kafka_high


def test_api_versions_response_lists_each_declared_api_once():
    advertised = supported_api_versions()
    assert [entry["api_key"] for entry in advertised] == sorted(set(APIS) - NOT_YET_SERVED)
    assert {e["api_key"]: (e["min_version"], e["max_version"]) for e in advertised} == ADVERTISED


@pytest.mark.parametrize("api, version, direction", _layout_cases())
def test_fields_match_kafka(api: Api, version: int, direction: str):
    message = kafka_message(f"{api.name}{direction.title()}")
    common = {struct["name"]: struct["fields"] for struct in message.get("commonStructs", [])}
    declared = api.request if direction == "request" else api.response
    expected = kafka_lines(message["fields"], version, common)
    assert project_lines(declared, version, api.is_flexible(version)) == expected


@pytest.mark.parametrize("direction", ["request", "response"])
@by_api
def test_field_defaults_match_kafka(api: Api, direction: str):
    """Fields only in versions newer than the vendored definitions are not compared."""
    message = kafka_message(f"{api.name}{direction.title()}")
    common = {struct["name"]: struct["fields"] for struct in message.get("commonStructs", [])}
    expected = kafka_defaults(message["fields"], common)
    declared = project_defaults(api.request if direction == "request" else api.response)
    assert {path: value for path, value in declared.items() if path in expected} == {
        path: value for path, value in expected.items() if path in declared
    }


def test_layout_check_covers_every_declared_version():
    """Only the versions listed in NEWER_THAN_VENDORED escape the field-by-field comparison."""
    unchecked = {
        api.name: (checkable_versions(api).stop, api.max_version)
        for api in DECLARED
        if checkable_versions(api).stop <= api.max_version
    }
    assert unchecked == NEWER_THAN_VENDORED
