"""Consumer-protocol bytes and assignors, checked against kafka-python as an independent oracle."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KA
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KS

from logan_ray.groups.assignors import MemberSubscription, range_assign, roundrobin_assign
from logan_ray.groups.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    subscribed_topics,
)

names = st.text(alphabet="abcdefgh._-", min_size=1, max_size=8)
parts = st.lists(st.integers(0, 2000), max_size=6)


@settings(max_examples=150, deadline=None)
@given(topics=st.lists(names, max_size=5), user_data=st.one_of(st.none(), st.binary(max_size=20)),
       owned=st.lists(st.tuples(names, parts), max_size=3), gen=st.integers(-1, 10**6),
       rack=st.one_of(st.none(), names), version=st.integers(0, 3))
def test_subscription_bytes_match_kafka_python(topics, user_data, owned, gen, rack, version):
    ours = encode_subscription(topics, user_data, owned, gen, rack, version=version)
    theirs = KS(version=version, topics=topics, user_data=user_data,
                owned_partitions=[KS.TopicPartition(topic=t, partitions=p) for t, p in owned],
                generation_id=gen, rack_id=rack).encode(version=version)
    assert ours == theirs
    back = decode_subscription(theirs)
    assert back.topics == topics and back.user_data == user_data and back.version == version
    if version >= 1:
        assert back.owned_partitions == [(t, p) for t, p in owned]
    if version >= 2:
        assert back.generation_id == gen
    if version >= 3:
        assert back.rack_id == rack


@settings(max_examples=100, deadline=None)
@given(assigned=st.lists(st.tuples(names, parts), max_size=4), user_data=st.one_of(st.none(), st.binary(max_size=9)),
       version=st.integers(0, 3))
def test_assignment_bytes_match_kafka_python(assigned, user_data, version):
    assigned = [(t, sorted(p)) for t, p in assigned]
    ours = encode_assignment(assigned, user_data, version=version)
    theirs = KA(version=version, assigned_partitions=[KA.TopicPartition(topic=t, partitions=p) for t, p in assigned],
                user_data=user_data).encode(version=version)
    assert ours == theirs
    back = decode_assignment(theirs)
    assert back.partitions == assigned and back.user_data == user_data
    assert back.topic_partitions() == [(t, p) for t, ps in assigned for p in ps]


def test_decode_tolerates_newer_versions_and_empty_assignment():
    newer = encode_subscription(["a"], b"u", [("a", [0])], 3, "rack", version=3) + b"\x00\x00future"
    sub = decode_subscription(b"\x00\x09" + newer[2:])
    assert sub.topics == ["a"] and sub.version == 9
    assert decode_assignment(b"").partitions == []
    assert subscribed_topics(b"\x00") is None
    with pytest.raises(ValueError):
        decode_subscription(b"\x00\x00\x00\x00\x00\x05\x00\x01a")


class _Cluster:
    def __init__(self, counts):
        self.counts = counts

    def partitions_for_topic(self, topic):
        n = self.counts.get(topic)
        return None if n is None else set(range(n))


def _kafka_python(assignor, members, counts):
    ms = [SimpleNamespace(member_id=m.member_id, group_instance_id=m.instance_id,
                          metadata=SimpleNamespace(topics=list(m.topics))) for m in members]
    out = assignor.assign(_Cluster(counts), ms)
    return {mid: {t: list(p) for t, p in a.assigned_partitions if p} for mid, a in out.items()}


member_sets = st.lists(st.tuples(st.text("xyz0123", min_size=1, max_size=5), st.sets(st.sampled_from("abcd"), min_size=1)),
                       min_size=1, max_size=6, unique_by=lambda x: x[0])


@settings(max_examples=200, deadline=None)
@given(members=member_sets, counts=st.fixed_dictionaries({t: st.integers(1, 9) for t in "abcd"}))
def test_range_and_roundrobin_agree_with_kafka_python(members, counts):
    subs = [MemberSubscription(f"m-{mid}", None, sorted(topics)) for mid, topics in members]
    assert range_assign(subs, counts) == _kafka_python(RangePartitionAssignor, subs, counts)
    same = [MemberSubscription(m.member_id, None, subs[0].topics) for m in subs]
    # (kafka-python's round robin crashes on unequal subscriptions; Kafka's own example covers those below)
    assert roundrobin_assign(same, counts) == _kafka_python(RoundRobinPartitionAssignor, same, counts)


def test_roundrobin_unequal_subscriptions_kafka_doc_example():
    subs = [MemberSubscription("C0", None, ["t0"]), MemberSubscription("C1", None, ["t0", "t1"]),
            MemberSubscription("C2", None, ["t0", "t1", "t2"])]
    out = roundrobin_assign(subs, {"t0": 1, "t1": 2, "t2": 3})
    assert out == {"C0": {"t0": [0]}, "C1": {"t1": [0]}, "C2": {"t1": [1], "t2": [0, 1, 2]}}


def test_range_six_partitions_three_members_disjoint_and_static_first():
    subs = [MemberSubscription("b", None, ["t"]), MemberSubscription("a", None, ["t"]),
            MemberSubscription("z", "inst-1", ["t"])]
    out = range_assign(subs, {"t": 6})
    assert out == {"z": {"t": [0, 1]}, "a": {"t": [2, 3]}, "b": {"t": [4, 5]}}
    rr = roundrobin_assign(subs, {"t": 6, "u": 0})
    assert rr == {"z": {"t": [0, 3]}, "a": {"t": [1, 4]}, "b": {"t": [2, 5]}}
