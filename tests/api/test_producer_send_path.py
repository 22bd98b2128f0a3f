"""The compiled Producer.send (logan_ray/_send_path.c) against its Python twin, without Ray.

Both producers get the same random plan of sends (keyed, unkeyed and sticky, explicit
partitions, headers, None values, serializers, records over the topic's limit, batches
filling up) against a stub client that records every batch the producer ships. The
batches must be byte-identical and every future must give the same RecordMetadata or
the same error; errors raised by ``send`` itself (closed producer, bad partition, bad
key) must be the same type and text.
"""
from __future__ import annotations

import random

import pytest

from logan_ray import producer as producer_mod
from logan_ray.errors import LoganError, UnknownPartitionError
from logan_ray.storage.codec_choice import use_compiled

PARTITIONS = {"small": 3, "big": 5}
LIMITS = {"small": 4_000, "big": 1_048_588}


class StubClient:
    """What Producer asks of its client, with fixed partition counts and limits."""

    def __init__(self) -> None:
        self.routes: dict[str, list] = {}

    def partitions(self, topic: str, auto_create: bool = True) -> list:
        if topic not in self.routes:
            self.routes[topic] = [object() for _ in range(PARTITIONS[topic])]
        return self.routes[topic]

    def topic_config(self, topic: str) -> dict:
        return {"max.message.bytes": LIMITS[topic]}


class RecordingProducer(producer_mod.Producer):
    """Ships nothing: each batch is recorded and acknowledged at once with its next offsets."""

    def __init__(self, *args, **kwargs) -> None:
        self.shipped: list[tuple[str, int, bytes]] = []
        self.next_offset: dict[tuple[str, int], int] = {}
        super().__init__(*args, **kwargs)

    def _submit(self, b, state) -> None:
        tp = (b.topic, b.partition)
        self.shipped.append((b.topic, b.partition, bytes(b.payload)))
        b.base_offset = self.next_offset.get(tp, 0)
        self.next_offset[tp] = b.base_offset + len(b)


def _plan(seed: int) -> list[tuple[tuple, dict]]:
    rng = random.Random(seed)
    calls = []
    for i in range(1500):
        topic = rng.choice(["small", "big"])
        value = None if rng.random() < 0.05 else bytes(rng.randrange(256) for _ in range(rng.choice([0, 5, 60, 700])))
        if rng.random() < 0.01:
            value = b"x" * 5000  # over the small topic's max.message.bytes
        key = None if rng.random() < 0.5 else b"key-%d" % rng.randrange(40)
        kwargs: dict = {"timestamp_ms": 1_700_000_000_000 + i}
        if rng.random() < 0.1:
            kwargs["headers"] = [("h", b"v%d" % i), ("n", None)]
        if rng.random() < 0.15:
            kwargs["partition"] = rng.randrange(PARTITIONS[topic])
        args = (topic, value) if key is None and rng.random() < 0.5 else (topic, value, key)
        calls.append((args, kwargs))
    return calls


def _run(compiled: bool, calls: list, **producer_kwargs) -> tuple[list, list]:
    prev = use_compiled(compiled)
    try:
        random.seed(1234)  # the sticky partitioner's choices
        p = RecordingProducer(StubClient(), idempotent=False, acks=0, linger_ms=60_000, **producer_kwargs)
        assert (getattr(p.send, "__func__", None) is None) == compiled  # the C method has no __func__
        futures = [p.send(*args, **kwargs) for args, kwargs in calls]
        try:
            p.flush()
        except LoganError as e:  # flush raises the first failure no future reported; compared below
            assert "max.message.bytes" in str(e)
        results = []
        for f in futures:
            try:
                results.append(("ok", tuple(f.result())))
            except Exception as e:  # noqa: BLE001 - the error itself is compared
                results.append((type(e).__name__, str(e)))
        p.close()
        return p.shipped, results
    finally:
        use_compiled(prev)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_compiled_send_ships_the_same_batches_and_futures_as_python(seed):
    calls = _plan(seed)
    c_batches, c_results = _run(True, calls)
    py_batches, py_results = _run(False, calls)
    assert len(c_batches) > 10
    assert any(r[0] == "RecordTooLargeError" for r in c_results)
    assert c_batches == py_batches
    assert c_results == py_results


def test_compiled_send_with_serializers_matches_python():
    calls = [(("big", {"n": i}, f"k{i % 7}"), {"timestamp_ms": 1000 + i}) for i in range(3000)]
    c = _run(True, calls, value_serializer="json", key_serializer="str")
    py = _run(False, calls, value_serializer="json", key_serializer="str")
    assert c == py


@pytest.mark.parametrize("compiled", [True, False])
def test_send_errors_are_the_same_on_both_paths(compiled):
    prev = use_compiled(compiled)
    try:
        p = RecordingProducer(StubClient(), idempotent=False, acks=0)
        with pytest.raises(UnknownPartitionError, match=r"topic 'small' has no partition 3 \(it has 3\)"):
            p.send("small", b"v", partition=3)
        with pytest.raises(TypeError):
            p.send("small", b"v", "a str key")  # keys are bytes unless a key serializer is given
        with pytest.raises(TypeError):
            p.send("small", b"v", bogus=1)
        stamped = p.send("small", b"v", partition=1)
        p.flush()
        meta = stamped.result()
        assert meta.partition == 1 and abs(meta.timestamp - producer_mod._now() * 1000) < 60_000
        p.close()
        with pytest.raises(LoganError, match="producer is closed"):
            p.send("small", b"late")
    finally:
        use_compiled(prev)
