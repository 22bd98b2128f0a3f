"""``--bootstrap-server``: the same commands and the same output through the Kafka protocol.

Each command runs twice as a subprocess against the session's broker: once
through Ray (``--address``) and once through the real Kafka gateway
(``--bootstrap-server``), and the outputs are compared. What Kafka cannot tell
(Ray node ids, segment counts and sizes, group generations) is masked.
"""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

CLI = [sys.executable, "-m", "logan_ray.cli"]


@pytest.fixture(scope="module")
def ray_address(client) -> str:
    import ray

    return ray.get_runtime_context().gcs_address


def cli(*argv: str, stdin: bytes | None = None, ok: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([*CLI, *argv], input=stdin, capture_output=True, timeout=120)
    if ok:
        assert r.returncode == 0, (argv, r.stderr.decode())
    return r


def both(gateway: str, ray_address: str, *argv: str, stdin: bytes | None = None) -> tuple[str, str]:
    """stdout of ``argv`` through Kafka and through Ray."""
    kafka = cli(*argv, "--bootstrap-server", gateway, stdin=stdin).stdout.decode()
    ray_ = cli(*argv, "--address", ray_address, stdin=stdin).stdout.decode()
    return kafka, ray_


def mask_nodes(text: str) -> str:
    return re.sub(r"node \S+", "node N", text)


def status_rows(text: str, topic: str) -> list[list[str]]:
    """(topic, partition, log start, log end) of a topic's rows in the status table."""
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")]
    return [[r[0], r[1], r[3], r[4]] for r in rows if r[0] == topic]


def test_topic_produce_consume_status_through_kafka_match_ray(client, gateway, ray_address, topic_name):
    t, ray_t = topic_name, topic_name + "-ray"
    r = cli("topic", "create", t, "--partitions", "3", "--config", "retention.ms=3600000", "--bootstrap-server", gateway)
    assert r.stdout == f"created topic {t} with 3 partitions\n".encode()
    cli("topic", "create", ray_t, "--partitions", "3", "--config", "retention.ms=3600000", "--address", ray_address)
    kafka, ray_ = both(gateway, ray_address, "topic", "list")
    assert kafka == ray_ and {t, ray_t} <= set(kafka.split())

    lines = b"".join(b"k%d:value-%d\n" % (i % 7, i) for i in range(60))
    r = cli("produce", t, "--key-separator", ":", "--compression", "lz4", "--bootstrap-server", gateway, stdin=lines)
    assert re.fullmatch(rb"produced 60 records to %s in \d+\.\d\d s\n" % t.encode(), r.stderr), r.stderr
    cli("produce", ray_t, "--key-separator", ":", "--address", ray_address, stdin=lines)
    # Same keys, same partitions (murmur2 both ways): the two topics' descriptions differ only in name and id.
    kafka, ray_ = both(gateway, ray_address, "topic", "describe", t)
    assert mask_nodes(kafka) == mask_nodes(ray_)
    ray_desc = cli("topic", "describe", ray_t, "--address", ray_address).stdout.decode()
    strip_ids = re.compile(r"^topic \S+: (\d+) partitions, id \S+", re.M)
    assert strip_ids.sub(r"\1", mask_nodes(ray_desc)) == strip_ids.sub(r"\1", mask_nodes(kafka))
    assert "  * retention.ms=3600000" in kafka

    expected = sorted(b"k%d=value-%d" % (i % 7, i) for i in range(60))
    for via in (["--bootstrap-server", gateway], ["--address", ray_address]):
        r = cli("consume", t, "--from-beginning", "--max-messages", "60", "--key-separator", "=", *via)
        assert sorted(r.stdout.splitlines()) == expected and r.stderr == b"consumed 60 records\n"
        r = cli("consume", t, "--partition", "1", "--offset", "2", "--timeout-ms", "1500", *via)
        end = client.partition_offsets(t)[1][1]
        assert len(r.stdout.splitlines()) == end - 2 and r.returncode == 0

    kafka, ray_ = both(gateway, ray_address, "status")
    assert status_rows(kafka, t) == status_rows(ray_, t) and len(status_rows(kafka, t)) == 3
    assert kafka.splitlines()[0].strip() == ray_.splitlines()[0].strip()  # "logan-ray: N topics"

    r = cli("topic", "alter", t, "--config", "retention.ms=1000", "--config", "segment.ms=60000",
            "--bootstrap-server", gateway)
    assert r.stdout == f'altered {t}: overrides now {{"retention.ms": "1000", "segment.ms": "60000"}}\n'.encode()
    r = cli("topic", "alter", t, "--delete-config", "segment.ms", "--address", ray_address)
    assert r.stdout == f'altered {t}: overrides now {{"retention.ms": "1000"}}\n'.encode()
    assert client.topic_config(t)["retention.ms"] == "1000"

    # Errors: the same one line either way.
    bad = [cli("topic", "describe", t + "-nope", *via, ok=False)
           for via in (["--bootstrap-server", gateway], ["--address", ray_address])]
    assert [b.returncode for b in bad] == [1, 1] and bad[0].stderr == bad[1].stderr
    assert bad[0].stderr == f"logan-ray: error: topic '{t}-nope' does not exist\n".encode()

    assert cli("topic", "delete", t, "--bootstrap-server", gateway).stdout == f"deleted topic {t}\n".encode()
    assert t not in client.list_topics()


def test_groups_through_kafka_match_ray(client, gateway, ray_address, topic_name):
    from confluent_kafka import Consumer

    t, group = topic_name, topic_name + "-g"
    client.create_topic(t, partitions=2)
    cli("produce", t, "--key-separator", ":", "--bootstrap-server", gateway,
        stdin=b"".join(b"k%d:v%d\n" % (i, i) for i in range(10)))
    c = Consumer({"bootstrap.servers": gateway, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe([t])
        got = []
        while len(got) < 10:
            got += [m for m in c.consume(10, timeout=10) if m.error() is None]
        c.commit(asynchronous=False)
    finally:
        c.close()

    kafka, ray_ = both(gateway, ray_address, "groups", "list")
    assert kafka == ray_ and re.search(rf"^{re.escape(group)}\s+Empty\s+consumer$", kafka, re.M)
    kafka, ray_ = both(gateway, ray_address, "groups", "describe", group)
    assert re.sub(r"generation \S+,", "", kafka) == re.sub(r"generation \S+,", "", ray_)
    assert re.findall(rf"^{re.escape(t)}\s+\d\s+(\d+)\s+(\d+)\s+0\s", kafka, re.M)  # committed = end, lag 0

    r = cli("groups", "reset-offsets", group, "--topic", t, "--to-earliest", "--bootstrap-server", gateway)
    rows = [ln.split() for ln in r.stdout.decode().splitlines()[1:]]
    assert [row[3] for row in rows] == ["0", "0"] and sum(int(row[2]) for row in rows) == 10
    offsets = {o["partition"]: o["committed"] for o in client.groups.describe(group)["offsets"]}
    assert offsets == {0: 0, 1: 0}

    r = cli("groups", "delete", group, "--bootstrap-server", gateway)
    assert r.stdout == f"deleted consumer group {group}\n".encode()
    bad = [cli("groups", "delete", group, *via, ok=False)
           for via in (["--bootstrap-server", gateway], ["--address", ray_address])]
    assert [b.returncode for b in bad] == [1, 1] and bad[0].stderr == bad[1].stderr
    assert b"does not exist" in bad[0].stderr
