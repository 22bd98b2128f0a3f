"""Client-side partition assignors (run by the group leader), as Kafka's Java client defines them.

Same inputs give the same output as Kafka's RangeAssignor and RoundRobinAssignor
(without rack awareness), so a group led by a Python member looks just like one
led by a Kafka client. Members are ordered as Kafka orders them: static members
(with a group instance id) first, by instance id, then dynamic ones by member id.
"""
from __future__ import annotations

from typing import Callable, Mapping, NamedTuple, Sequence


class MemberSubscription(NamedTuple):
    member_id: str
    instance_id: str | None
    topics: Sequence[str]


Assignments = dict[str, dict[str, list[int]]]


def _order_key(m: MemberSubscription) -> tuple[int, str]:
    return (0, m.instance_id) if m.instance_id is not None else (1, m.member_id)


def range_assign(members: Sequence[MemberSubscription], partitions: Mapping[str, int]) -> Assignments:
    """Per topic: consecutive ranges, the first ``n % consumers`` members getting one extra."""
    out: Assignments = {m.member_id: {} for m in members}
    topics = sorted({t for m in members for t in m.topics})
    for topic in topics:
        count = partitions.get(topic, 0)
        if count <= 0:
            continue
        subscribers = sorted((m for m in members if topic in m.topics), key=_order_key)
        per, extra = divmod(count, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            n = per + (1 if i < extra else 0)
            if n:
                out[m.member_id][topic] = list(range(start, start + n))
            start += n
    return out


def roundrobin_assign(members: Sequence[MemberSubscription], partitions: Mapping[str, int]) -> Assignments:
    """All partitions sorted by (topic, partition) dealt in turn, skipping members not subscribed."""
    out: Assignments = {m.member_id: {} for m in members}
    ordered = sorted(members, key=_order_key)
    if not ordered:
        return out
    subscribed = {m.member_id: set(m.topics) for m in ordered}
    i = 0
    for topic in sorted({t for m in members for t in m.topics}):
        for p in range(partitions.get(topic, 0)):
            for _ in range(len(ordered)):
                m = ordered[i % len(ordered)]
                i += 1
                if topic in subscribed[m.member_id]:
                    out[m.member_id].setdefault(topic, []).append(p)
                    break
    return out


ASSIGNORS: dict[str, Callable[[Sequence[MemberSubscription], Mapping[str, int]], Assignments]] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
}
