"""A Jepsen-style history and checker for Kafka's "queue" workload (issue 32 item 9).

Producers send unique values, consumers poll, an observer reads the group's committed
offsets; every event goes into a :class:`History`, and :func:`check` finds the anomaly
classes of Jepsen's Kafka analysis (``jepsen.tests.kafka``), plus committed offsets
that move backwards, which Jepsen does not check. Pure Python, no Ray and no client
library: the workload driver (queue_workload.py) and synthetic unit tests both feed it.

Definitions, as Jepsen builds them (a "key" there is a topic-partition here):

* The **log** of a partition: for each offset, the set of values any acknowledged send
  or any poll saw there. The **version order** lists the offsets that hold a value, in
  order; a value's **index** is the position of its first offset in it. Indexes, not
  raw offsets, measure skips, so offsets a log never fills (transaction markers in
  Kafka) are not skips.
* **inconsistent-offsets**: an offset holding two or more values.
* **duplicate**: a value at two or more offsets.
* **lost-write**: take the highest index any poll read in a partition; every value whose
  last appearance in the log is at or below it should have been read by some poll; an
  acknowledged one that never was is lost (a value never acknowledged but read is not
  a candidate: it was read).
* **unseen**: an acknowledged value no poll ever read (after the final drain read every
  partition from offset 0, these are acknowledged writes that vanished at the log's end).
* **nonmonotonic-send**: a producer's acknowledged sends to one partition, in the order
  it sent them, whose indexes do not increase.

  For the send and poll orders below, a record's index is the index of the offset it was
  acknowledged or read at, where Jepsen takes its value's first index: the same when no
  value is duplicated; with duplicates, Jepsen's choice reports a consumer that reads the
  second copy as going back and then skipping, although it read the log in order, and
  the duplicate is already reported as such.
* **nonmonotonic-poll** / **poll-skip**: one consumer's successive polls of a partition
  within one assignment (a rebalance resets what it may expect, as Jepsen resets on
  subscribe/assign): the first value of a poll must be at the index right after the last
  value of the consumer's previous poll of that partition; below it is nonmonotonic,
  above it a skip.
* **int-nonmonotonic-poll** / **int-poll-skip**: the same between neighbouring records
  of one poll.
* **committed-offset-regression**: a (group, partition)'s committed offset observed
  lower than an earlier observation of it.
"""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable

#: Anomaly classes in the order the report lists them.
CLASSES = (
    "lost-write",
    "duplicate",
    "inconsistent-offsets",
    "nonmonotonic-send",
    "nonmonotonic-poll",
    "poll-skip",
    "int-nonmonotonic-poll",
    "int-poll-skip",
    "unseen",
    "committed-offset-regression",
)
EXAMPLES = 10


@dataclass
class Send:
    producer: Hashable
    key: Any
    value: str
    partition: int | None
    seq: int
    outcome: str = "pending"  # "ok", "fail" (definitely not written), "info" (indeterminate)
    offset: int | None = None
    error: str | None = None
    t: float = 0.0  # seconds since the history began, when sent
    done_t: float | None = None  # and when its outcome came


@dataclass
class Poll:
    consumer: Hashable
    records: list[tuple[int, int, str]]  # (partition, offset, value)
    generation: Any
    assignment: frozenset[int] | None
    seq: int
    t: float


@dataclass
class Committed:
    group: str
    partition: int
    offset: int
    seq: int
    t: float


class History:
    """Everything clients did and saw, in the order it was recorded; safe to record from many threads.

    A send is recorded before it is attempted and completed by :meth:`ack`, :meth:`fail` or
    :meth:`indeterminate`: a send never completed counts as indeterminate, as in Jepsen
    (the client may have crashed after the broker wrote it).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = 0
        self.sends: dict[str, Send] = {}
        self.polls: list[Poll] = []
        self.commits: list[Committed] = []
        self.t0 = time.monotonic()

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def send(self, producer: Hashable, key: Any, value: str, partition: int | None = None) -> None:
        """A send attempted; values must be unique over the whole history (Jepsen's premise)."""
        with self._lock:
            if value in self.sends:
                raise ValueError(f"value {value!r} sent twice: values must be unique")
            self.sends[value] = Send(producer, key, value, partition, self._next(), t=time.monotonic() - self.t0)

    def ack(self, value: str, partition: int, offset: int) -> None:
        """The broker acknowledged ``value`` at ``offset`` of ``partition``."""
        with self._lock:
            s = self.sends[value]
            s.outcome, s.partition, s.offset = "ok", partition, offset
            s.done_t = time.monotonic() - self.t0

    def fail(self, value: str, error: str = "") -> None:
        """The send definitely did not write (an error the broker gave before writing)."""
        with self._lock:
            s = self.sends[value]
            s.outcome, s.error = "fail", error
            s.done_t = time.monotonic() - self.t0

    def indeterminate(self, value: str, error: str = "") -> None:
        """The send may or may not have written (a timeout, a lost connection)."""
        with self._lock:
            s = self.sends[value]
            s.outcome, s.error = "info", error
            s.done_t = time.monotonic() - self.t0

    def poll(self, consumer: Hashable, records: Iterable[tuple[int, int, str]], generation: Any = None,
             assignment: Iterable[int] | None = None) -> None:
        """One poll's records, in the order the consumer got them; ``generation`` names the consumer's
        current assignment (a rebalance must change it), ``assignment`` its partitions if known."""
        records = [(int(p), int(o), v) for p, o, v in records]
        with self._lock:
            self.polls.append(Poll(consumer, records, generation,
                                   None if assignment is None else frozenset(assignment), self._next(),
                                   time.monotonic() - self.t0))

    def committed(self, group: str, partition: int, offset: int) -> None:
        """An observation of ``group``'s committed offset for ``partition`` (negative: none yet)."""
        with self._lock:
            if offset >= 0:
                self.commits.append(Committed(group, partition, offset, self._next(), time.monotonic() - self.t0))

    def dump(self, path: str) -> None:
        """Write every event as JSON lines (sends, then polls, then commit observations): the evidence
        behind a report, for reading an anomaly's context."""
        import json
        from dataclasses import asdict

        with self._lock, open(path, "w") as f:
            for kind, events in (("send", self.sends.values()), ("poll", self.polls), ("committed", self.commits)):
                for e in events:
                    d = asdict(e)
                    if kind == "poll" and d["assignment"] is not None:
                        d["assignment"] = sorted(d["assignment"])
                    f.write(json.dumps({"kind": kind, **d}, default=str) + "\n")

    def counts(self) -> dict[str, int]:
        """How many events of each kind: for the report's header."""
        with self._lock:
            sends = list(self.sends.values())
            return {"sends": len(sends), "acked": sum(s.outcome == "ok" for s in sends),
                    "failed": sum(s.outcome == "fail" for s in sends),
                    "indeterminate": sum(s.outcome in ("info", "pending") for s in sends),
                    "polls": len(self.polls), "records read": sum(len(p.records) for p in self.polls),
                    "commit observations": len(self.commits)}


@dataclass
class Report:
    """Anomalies by class: a count and up to :data:`EXAMPLES` examples each."""

    counts: dict[str, int] = field(default_factory=lambda: {c: 0 for c in CLASSES})
    examples: dict[str, list[dict]] = field(default_factory=lambda: {c: [] for c in CLASSES})
    stats: dict[str, int] = field(default_factory=dict)

    def add(self, cls: str, example: dict) -> None:
        self.counts[cls] += 1
        if len(self.examples[cls]) < EXAMPLES:
            self.examples[cls].append(example)

    @property
    def valid(self) -> bool:
        return not any(self.counts.values())

    def table(self) -> str:
        """A plain-text table: the history's size, then each class's count and first example."""
        lines = ["  ".join(f"{k} {v}" for k, v in self.stats.items()), ""]
        width = max(len(c) for c in CLASSES)
        lines.append(f"{'anomaly':<{width}}  count  first example")
        for c in CLASSES:
            first = self.examples[c][0] if self.examples[c] else ""
            lines.append(f"{c:<{width}}  {self.counts[c]:>5}  {first}")
        lines.append("")
        lines.append("valid: " + ("yes" if self.valid else "NO"))
        return "\n".join(lines)


@dataclass
class _Order:
    """One partition's log and version order (see the module's docstring)."""

    log: dict[int, set[str]]
    by_index: list[str]  # index -> the value at that offset (the smallest, if several)
    first_index: dict[str, int]  # value -> index of its first offset
    last_index: dict[str, int]  # value -> index of its last offset
    offset_index: dict[int, int]  # offset -> its index


def _orders(history: History) -> dict[int, _Order]:
    logs: dict[int, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for s in history.sends.values():
        if s.outcome == "ok" and s.offset is not None:  # librdkafka reports no offset for some acks
            logs[s.partition][s.offset].add(s.value)
    for p in history.polls:
        for partition, offset, value in p.records:
            logs[partition][offset].add(value)
    orders = {}
    for partition, log in logs.items():
        offsets = sorted(log)
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        for i, o in enumerate(offsets):
            for v in log[o]:
                first.setdefault(v, i)
                last[v] = i
        orders[partition] = _Order(dict(log), [min(log[o]) for o in offsets], first, last,
                                   {o: i for i, o in enumerate(offsets)})
    return orders


def _log_anomalies(orders: dict[int, _Order], report: Report) -> None:
    for partition, order in sorted(orders.items()):
        at: dict[str, list[int]] = defaultdict(list)
        for offset in sorted(order.log):
            values = order.log[offset]
            if len(values) > 1:
                report.add("inconsistent-offsets", {"partition": partition, "offset": offset,
                                                    "values": sorted(values)})
            for v in values:
                at[v].append(offset)
        for v, offsets in at.items():
            if len(offsets) > 1:
                report.add("duplicate", {"partition": partition, "value": v, "offsets": offsets})


def _read_anomalies(history: History, orders: dict[int, _Order], report: Report) -> None:
    read: dict[int, set[str]] = defaultdict(set)
    for p in history.polls:
        for partition, _offset, value in p.records:
            read[partition].add(value)
    acked = {s.value: s for s in history.sends.values() if s.outcome == "ok"}
    for partition, order in sorted(orders.items()):
        seen = read.get(partition, set())
        bound = max((order.first_index[v] for v in seen), default=-1)
        for v, last in sorted(order.last_index.items(), key=lambda kv: kv[1]):
            if last <= bound and v not in seen and v in acked:
                report.add("lost-write", {"partition": partition, "value": v, "offset": acked[v].offset,
                                          "max_read_offset": sorted(order.log)[bound]})
    all_read = set().union(*read.values()) if read else set()
    for v, s in sorted(acked.items(), key=lambda kv: kv[1].seq):
        if v not in all_read:
            report.add("unseen", {"partition": s.partition, "value": v, "offset": s.offset})


def _send_order(history: History, orders: dict[int, _Order], report: Report) -> None:
    last: dict[tuple[Hashable, int], Send] = {}
    for s in sorted(history.sends.values(), key=lambda s: s.seq):
        if s.outcome != "ok" or s.offset is None:  # acknowledged without an offset: nothing to order by
            continue
        k = (s.producer, s.partition)
        prev = last.get(k)
        index = orders[s.partition].offset_index
        if prev is not None and index[s.offset] <= index[prev.offset]:
            report.add("nonmonotonic-send", {"producer": s.producer, "partition": s.partition,
                                             "values": [prev.value, s.value], "offsets": [prev.offset, s.offset]})
        last[k] = s


def _poll_order(history: History, orders: dict[int, _Order], report: Report) -> None:
    # consumer -> partition -> (generation, index of the last value read, that value)
    last: dict[Hashable, dict[int, tuple[Any, int, str]]] = defaultdict(dict)
    for p in sorted(history.polls, key=lambda p: p.seq):
        mine = last[p.consumer]
        for partition in list(mine):
            gen = mine[partition][0]
            if gen != p.generation or (p.assignment is not None and partition not in p.assignment):
                del mine[partition]  # a new assignment: the position may legitimately move
        in_poll: dict[int, tuple[int, str]] = {}
        for partition, offset, value in p.records:
            i = orders[partition].offset_index[offset]
            if partition in in_poll:
                prev_i, prev_v = in_poll[partition]
                inner = True
            elif partition in mine:
                _gen, prev_i, prev_v = mine[partition]
                inner = False
            else:
                in_poll[partition] = (i, value)
                continue
            delta = i - prev_i
            example = {"consumer": p.consumer, "partition": partition, "generation": p.generation,
                       "values": [prev_v, value], "delta": delta, "at_s": round(p.t, 3)}
            if delta > 1:
                example["skipped"] = orders[partition].by_index[prev_i + 1:i][:5]
                report.add("int-poll-skip" if inner else "poll-skip", example)
            elif delta < 1:
                report.add("int-nonmonotonic-poll" if inner else "nonmonotonic-poll", example)
            in_poll[partition] = (i, value)
        for partition, (i, value) in in_poll.items():
            mine[partition] = (p.generation, i, value)


def _commit_order(history: History, report: Report) -> None:
    highest: dict[tuple[str, int], Committed] = {}
    for c in sorted(history.commits, key=lambda c: c.seq):
        k = (c.group, c.partition)
        top = highest.get(k)
        if top is not None and c.offset < top.offset:
            report.add("committed-offset-regression", {"group": c.group, "partition": c.partition,
                                                       "offsets": [top.offset, c.offset],
                                                       "at_s": [round(top.t, 3), round(c.t, 3)]})
        if top is None or c.offset > top.offset:
            highest[k] = c


def check(history: History) -> Report:
    """Every anomaly class of the module's docstring over ``history``; call it once recording ended."""
    report = Report(stats=history.counts())
    with history._lock:
        orders = _orders(history)
        _log_anomalies(orders, report)
        _read_anomalies(history, orders, report)
        _send_order(history, orders, report)
        _poll_order(history, orders, report)
        _commit_order(history, report)
    return report
