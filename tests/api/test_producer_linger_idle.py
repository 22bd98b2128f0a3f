"""An idle producer costs nothing: its linger thread sleeps until a batch opens (cost follows use).

It used to wake every ``linger.ms`` whether or not a batch was open; the 25 producers a test
session had left open took a quarter of a core between them. Counted here by the linger
thread's context switches (Linux's /proc), which a sleeping thread does not make.
"""
from __future__ import annotations

import time


def _switches(tid: int) -> int:
    """Voluntary and involuntary context switches of thread ``tid`` of this process so far."""
    with open(f"/proc/self/task/{tid}/status") as f:
        return sum(int(line.split()[1]) for line in f if line.split(":")[0].endswith("ctxt_switches"))


def test_an_idle_producer_sleeps_and_a_new_batch_still_leaves_after_linger_ms(client, topic_name):
    client.create_topic(topic_name, partitions=1)
    producer = client.producer(linger_ms=5)
    try:
        assert producer.send(topic_name, b"first", partition=0).result(30).offset == 0  # shipped by the linger
        thread = producer._linger_thread
        before = _switches(thread.native_id)
        time.sleep(1.0)
        woke = _switches(thread.native_id) - before
        assert woke <= 3, f"an idle producer's linger thread woke {woke} times in a second"
        # a batch opened after the pause wakes it: shipped without a flush, after linger.ms
        assert producer.send(topic_name, b"second", partition=0).result(30).offset == 1
    finally:
        producer.close()
    thread.join(5)
    assert not thread.is_alive()  # close ends it
