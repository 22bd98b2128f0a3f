"""Jepsen's Kafka "queue" workload with confluent-kafka, recorded into a queue_checker History.

``N`` idempotent ``acks=all`` producers (a thread each) send unique values ``p<i>-<seq>`` over
every partition; a consumer group of ``M`` consumers (a thread each, no auto commit) polls
and commits synchronously after every poll that returned records; an observer thread reads
the group's committed offsets twice a second. The caller runs its faults (the nemesis)
while this runs, then :meth:`QueueWorkload.stop` ends the clients and :meth:`QueueWorkload.drain`
reads every partition from offset 0 with a fresh consumer, so writes that vanished show up
as unseen. Every thread is a daemon and every wait is bounded: a broker that never answers
cannot keep the workload from ending.
"""
from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from queue_checker import History


@dataclass
class WorkloadConfig:
    bootstrap: str
    topic: str
    partitions: int
    producers: int = 3
    consumers: int = 2
    rate: float = 40.0  # sends per second per producer
    group: str = field(default_factory=lambda: "queue-" + uuid.uuid4().hex[:8])
    #: librdkafka waits this for an answer before it gives up on a broker (60 s by default): a
    #: stopped broker would otherwise hold every client for a minute
    socket_timeout_ms: int = 4000
    #: an idempotent send not acknowledged within this is reported as failed (indeterminate here)
    message_timeout_ms: int = 30000
    drain_timeout_s: float = 60.0


def _producer_conf(cfg: WorkloadConfig) -> dict[str, Any]:
    debug = _debug_logger()
    return {**debug, "bootstrap.servers": cfg.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2,
            "socket.timeout.ms": cfg.socket_timeout_ms, "message.timeout.ms": cfg.message_timeout_ms,
            "topic.metadata.refresh.interval.ms": 2000}


def _debug_logger() -> dict[str, Any]:
    """librdkafka's idempotence log (PID and epoch changes, retries) to the file named by
    QUEUE_WORKLOAD_LOG, when set: what explains a duplicate or a lost write."""
    import logging
    import os

    path = os.environ.get("QUEUE_WORKLOAD_LOG")
    if not path:
        return {}
    logger = logging.getLogger("queue_workload.librdkafka")
    if not logger.handlers:
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(relativeCreated)d %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    return {"debug": "eos,protocol", "logger": logger}


def _consumer_conf(cfg: WorkloadConfig, group: str) -> dict[str, Any]:
    return {"bootstrap.servers": cfg.bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "socket.timeout.ms": cfg.socket_timeout_ms,
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
            "topic.metadata.refresh.interval.ms": 2000}


class QueueWorkload:
    """The clients of one run; ``errors`` counts what clients reported, by kind, for the report."""

    def __init__(self, cfg: WorkloadConfig, history: History) -> None:
        self.cfg = cfg
        self.history = history
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: dict[str, int] = {}
        self._lock = threading.Lock()

    def _count(self, kind: str) -> None:
        with self._lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1

    def start(self) -> QueueWorkload:
        for i in range(self.cfg.producers):
            self._spawn(self._produce, i)
        for i in range(self.cfg.consumers):
            self._spawn(self._consume, i)
        self._spawn(self._observe_commits)
        return self

    def _spawn(self, target: Any, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, daemon=True, name=f"{target.__name__}{args}")
        t.start()
        self._threads.append(t)

    def _produce(self, i: int) -> None:
        from confluent_kafka import KafkaError, Producer

        history, cfg = self.history, self.cfg

        def delivered(err: Any, msg: Any) -> None:
            value = msg.value().decode()
            if err is None:
                history.ack(value, msg.partition(), msg.offset())
            elif err.code() == KafkaError._PURGE_QUEUE:  # never sent
                history.fail(value, err.name())
            else:  # timed out or refused after retries: it may still be in the log
                history.indeterminate(value, err.name())
                self._count("send " + err.name())

        fatal = threading.Event()

        def on_error(err: Any) -> None:
            self._count("producer " + err.name())
            if err.fatal():
                fatal.set()

        producer = Producer({**_producer_conf(cfg), "error_cb": on_error})
        seq, interval, incarnation = 0, 1.0 / cfg.rate, 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            if fatal.is_set():  # an idempotent producer with a fatal error must be replaced (Kafka's rule)
                producer.purge(in_queue=True, in_flight=False)
                producer.flush(1)
                incarnation += 1
                fatal.clear()
                producer = Producer({**_producer_conf(cfg), "error_cb": on_error})
            value = f"p{i}-{seq}"
            partition = seq % cfg.partitions
            history.send(f"p{i}.{incarnation}", f"k{seq % (4 * cfg.partitions)}", value, partition)
            try:
                producer.produce(cfg.topic, value.encode(), key=f"k{seq}".encode(), partition=partition,
                                 on_delivery=delivered)
            except BufferError:
                history.fail(value, "local queue full")
            except Exception as e:  # noqa: BLE001  (a fatal producer refuses new sends)
                history.fail(value, repr(e))
            seq += 1
            producer.poll(0)
            next_at += interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))
        producer.flush(cfg.message_timeout_ms / 1000 + 5)  # what is still pending stays indeterminate

    def _consume(self, i: int) -> None:
        from confluent_kafka import Consumer, KafkaException

        history, cfg = self.history, self.cfg
        state = {"generation": 0, "assignment": frozenset()}

        def assigned(_c: Any, parts: list) -> None:
            state["generation"] += 1
            state["assignment"] = frozenset(p.partition for p in parts)

        def revoked(_c: Any, _parts: list) -> None:
            state["generation"] += 1
            state["assignment"] = frozenset()

        consumer = Consumer(_consumer_conf(cfg, cfg.group))
        consumer.subscribe([cfg.topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
        name = f"c{i}"
        try:
            while not self._stop.is_set():
                msgs = consumer.consume(num_messages=200, timeout=0.5)
                records = []
                for m in msgs:
                    if m.error() is None:
                        records.append((m.partition(), m.offset(), m.value().decode()))
                    else:
                        self._count("poll " + m.error().name())
                if not records:
                    continue
                history.poll(name, records, generation=(name, state["generation"]), assignment=state["assignment"])
                try:
                    consumer.commit(asynchronous=False)
                except KafkaException as e:
                    self._count("commit " + e.args[0].name())
        finally:
            consumer.close()

    def _observe_commits(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        cfg = self.cfg
        observer = Consumer(_consumer_conf(cfg, cfg.group))  # never subscribes: does not join the group
        parts = [TopicPartition(cfg.topic, p) for p in range(cfg.partitions)]
        try:
            while not self._stop.wait(0.5):
                try:
                    for tp in observer.committed(parts, timeout=5):
                        self.history.committed(cfg.group, tp.partition, tp.offset)
                except KafkaException as e:
                    self._count("committed() " + e.args[0].name())
        finally:
            observer.close()

    def stop(self, timeout: float | None = None) -> None:
        """Stop sending and polling; wait for the producers' last deliveries (bounded)."""
        self._stop.set()
        deadline = time.monotonic() + (timeout or self.cfg.message_timeout_ms / 1000 + 20)
        for t in self._threads:
            t.join(max(0.1, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            self.errors["threads still running at stop"] = len(alive)

    def drain(self) -> dict[int, int]:
        """Read every partition from offset 0 up to its high watermark with a fresh consumer (no group
        position involved) as the final polls; returns each partition's high watermark."""
        from confluent_kafka import Consumer, TopicPartition

        cfg = self.cfg
        consumer = Consumer({**_consumer_conf(cfg, "drain-" + uuid.uuid4().hex[:8]), "enable.partition.eof": False})
        deadline = time.monotonic() + cfg.drain_timeout_s
        ends: dict[int, int] = {}
        try:
            for p in range(cfg.partitions):
                while p not in ends and time.monotonic() < deadline:
                    try:
                        ends[p] = consumer.get_watermark_offsets(TopicPartition(cfg.topic, p), timeout=5)[1]
                    except Exception:  # noqa: BLE001  (a partition without a leader for a moment)
                        time.sleep(0.5)
            consumer.assign([TopicPartition(cfg.topic, p, 0) for p in ends])
            at = {p: 0 for p in ends}
            while any(at[p] < ends[p] for p in ends) and time.monotonic() < deadline:
                records = [(m.partition(), m.offset(), m.value().decode())
                           for m in consumer.consume(num_messages=500, timeout=0.5) if m.error() is None]
                if records:
                    self.history.poll("final", records, generation="final")
                    for p, o, _v in records:
                        at[p] = max(at[p], o + 1)
            short = {p: (at[p], ends[p]) for p in ends if at[p] < ends[p]}
            if short or len(ends) < cfg.partitions:
                self.errors["drain incomplete"] = len(short) + cfg.partitions - len(ends)
        finally:
            consumer.close()
        return ends
