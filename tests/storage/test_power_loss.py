"""Power loss under a partition log: every write not yet fsynced is dropped (tests/tooling/volatile_fs.py).

Appends from four threads, half of them "acks=all" (acknowledged after
``flush_to``), half "acks=1" (after ``append``), with small segments so rolls,
folder fsyncs and background flushes happen; then the file system loses power.
"""
from __future__ import annotations

import os
import sys
import threading

from log_helpers import all_records, batch, lose_power, open_log

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tooling"))
from power_loss_checks import check_recovered  # noqa: E402


def test_power_loss_keeps_every_acks_all_record_and_loses_only_the_unsynced_tail(volatile):
    folder = os.path.join(volatile.mountpoint, "topic-0")
    lg = open_log(folder, segment_bytes=16 * 1024)
    acked: dict[int, tuple[bytes, str]] = {}
    lock = threading.Lock()

    def producer(t: int) -> None:
        for i in range(60):
            n = t * 1000 + i
            data = batch(n, pad=300)
            info = lg.append(data)
            kind = "1"
            if i % 2 == 0:
                lg.flush_to(info.last_offset + 1)
                kind = "all"
            with lock:
                acked[info.base_offset] = (b"value-%d" % n + b"x" * 300, kind)

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert lg.segment_count > 3
    for i in range(20):  # an unsynced tail, acknowledged with acks=1
        info = lg.append(batch(9000 + i, pad=300))
        acked[info.base_offset] = (b"value-%d" % (9000 + i) + b"x" * 300, "1")
    lose_power(volatile, lg)
    again = open_log(folder, segment_bytes=16 * 1024)
    end = check_recovered([(r.offset, r.value) for r in all_records(again)], acked)
    assert again.log_end_offset == end
    assert again.append(batch(123456)).base_offset == end  # offsets continue; none reused
    again.flush()
    again.close()


def test_power_loss_right_after_the_first_durable_append_of_a_new_log(volatile):
    """The first segment's name must be durable too, not only its bytes."""
    folder = os.path.join(volatile.mountpoint, "fresh-0")
    lg = open_log(folder)
    info = lg.append(batch(7))
    lg.flush_to(info.last_offset + 1)
    lose_power(volatile, lg)
    again = open_log(folder)
    assert [r.value for r in all_records(again)] == [b"value-7"]
    again.close()
