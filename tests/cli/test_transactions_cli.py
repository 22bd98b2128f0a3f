"""``logan-ray transactions list | describe | abort`` (logan_ray/transactions_cli.py) on the session's broker.

list and describe show a transaction confluent-kafka keeps open, through Ray and over the Kafka
protocol; abort ends a hanging transaction (a producer no coordinator knows left it open) so the
last stable offset moves past it and a read_committed consumer reads on; bad ids and bad
arguments give one error line and exit 1.
"""
from __future__ import annotations

import time
import uuid

import pytest
import ray
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from logan_ray import cli, transactions_cli
from logan_ray.storage.record_builder import build_batch


@pytest.fixture
def run(client, monkeypatch, capsys):
    monkeypatch.setattr(transactions_cli, "connect", lambda args: client)

    def go(*argv: str) -> tuple[int, str, str]:
        rc = cli.main(list(argv))
        got = capsys.readouterr()
        return rc, got.out, got.err
    return go


def _open_transaction(gateway: str, topic: str) -> tuple[str, Producer]:
    tid = f"cli-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": gateway, "transactional.id": tid, "linger.ms": 0})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"open", partition=0)
    p.flush(10)
    return tid, p


def test_list_and_describe_show_an_ongoing_transaction(client, gateway, run, topic_name):
    client.create_topic(topic_name, partitions=1)
    tid, p = _open_transaction(gateway, topic_name)
    try:
        for where in ((), ("--bootstrap-server", gateway)):
            rc, out, err = run("transactions", "list", *where)
            assert (rc, err) == (0, ""), err
            head, *rows = out.splitlines()
            assert head.split() == ["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "TRANSACTION-STATE"]
            mine = [r.split() for r in rows if r.split()[0] == tid]
            assert len(mine) == 1 and mine[0][3] == "Ongoing", out
            pid = mine[0][2]
            rc, out, err = run("transactions", "describe", "--transactional-id", tid, *where)
            assert (rc, err) == (0, ""), err
            head, row = out.splitlines()
            assert head.split()[:6] == ["COORDINATOR", "TRANSACTIONAL-ID", "PRODUCER-ID", "PRODUCER-EPOCH", "STATE",
                                        "TIMEOUT-MS"]
            cells = row.split()
            assert cells[1:3] == [tid, pid] and cells[4] == "Ongoing" and cells[-1] == f"{topic_name}-0", row
            assert int(cells[5]) > 0 and cells[6].startswith(time.strftime("%Y-", time.gmtime()))
        p.commit_transaction(10)
        rc, out, _ = run("transactions", "describe", "--transactional-id", tid)
        assert rc == 0 and out.splitlines()[1].split()[4] == "CompleteCommit"
    finally:
        p.flush(1)


def test_unknown_ids_and_bad_arguments_are_one_line_errors(client, gateway, run):
    for where in ((), ("--bootstrap-server", gateway)):
        rc, out, err = run("transactions", "describe", "--transactional-id", f"nobody-{uuid.uuid4().hex[:6]}", *where)
        assert rc == 1 and out == "" and err.count("\n") == 1
        assert "TRANSACTIONAL_ID_NOT_FOUND" in err and "transactions list" in err
    rc, out, err = run("transactions", "abort", "--topic", "t", "--partition", "0")
    assert rc == 1 and err.count("\n") == 1 and "--start-offset" in err
    rc, out, err = run("transactions", "abort", "--topic", "t", "--partition", "0", "--start-offset", "0",
                       "--bootstrap-server", gateway)
    assert rc == 1 and err.count("\n") == 1 and "through Ray" in err
    rc, out, err = run("transactions", "abort", "--topic", f"missing-{uuid.uuid4().hex[:6]}", "--partition", "0",
                       "--start-offset", "0")
    assert rc == 1 and err.count("\n") == 1 and "missing-" in err


def _read_committed(gateway: str, topic: str, want: int, deadline_s: float = 10.0) -> list[bytes]:
    c = Consumer({"bootstrap.servers": gateway, "group.id": f"r-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "fetch.wait.max.ms": 100})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[bytes] = []
        end = time.monotonic() + deadline_s
        while len(out) < want and time.monotonic() < end:
            out += [m.value() for m in c.consume(100, 0.3) if m.error() is None]
        return out
    finally:
        c.close()


def test_abort_of_a_hanging_transaction_moves_the_last_stable_offset(client, gateway, run, topic_name):
    client.create_topic(topic_name, partitions=1)
    tid, p = _open_transaction(gateway, topic_name)  # the gateway bounds this topic's read_committed by the LSO
    p.commit_transaction(10)
    leader = ray.get(client.router.activate.remote(topic_name, 0))
    pid = ray.get(client.router.allocate_producer_id.remote())  # a producer no coordinator knows: it hangs
    start = ray.get(leader.append_durable.remote(build_batch(
        [b"hanging"], [None], is_transactional=True, producer_id=pid, producer_epoch=0, base_sequence=0)))[0]
    ray.get(leader.append_durable.remote(build_batch([b"after"], [None])))

    def lso() -> int:
        return ray.get(leader.locate_committed.remote(0, 1 << 20))[3]

    assert lso() == start
    rc, out, err = run("transactions", "abort", "--topic", topic_name, "--partition", "0", "--start-offset",
                       str(start - 1))  # the committed transaction's marker: not an open transaction
    assert rc == 1 and "not in a transaction" in err and lso() == start
    rc, out, err = run("transactions", "abort", "--topic", topic_name, "--partition", "0", "--start-offset",
                       str(start))
    assert (rc, err) == (0, ""), err
    assert f"producer {pid} (epoch 0)" in out and f"{topic_name}-0" in out
    hw = ray.get(leader.offsets.remote())[1]
    assert lso() == hw > start + 1
    assert _read_committed(gateway, topic_name, 2) == [b"open", b"after"]
    # the same by producer id and epochs, as kafka-transactions abort takes them: a second one is harmless
    rc, out, err = run("transactions", "abort", "--topic", topic_name, "--partition", "0", "--producer-id", str(pid),
                       "--producer-epoch", "0", "--coordinator-epoch", "0")
    assert (rc, err) == (0, "") and "ABORT marker at offset" in out
