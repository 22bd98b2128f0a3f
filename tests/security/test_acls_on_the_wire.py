"""ACL authorization on a real broker process: what Kafka checks, with Kafka's error codes.

The broker runs ``authorizer.class.name`` with ``super.users=User:admin`` on a
SASL_PLAINTEXT listener (SCRAM-SHA-256 and PLAIN); ACLs are made with the CLI and
with Kafka's admin API. Restarting the broker keeps users and ACLs.
"""
from __future__ import annotations

import os
import subprocess
import time
import uuid

import pytest
from certs import make_pki
from secure_broker import CLI, SecureBroker, write_properties

#: a real broker process (and, for ACLs, a restart): about 1.5 minutes per module
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    folder = tmp_path_factory.mktemp("authz-broker")
    pki = make_pki(str(folder / "pki"))
    props = write_properties(str(folder / "server.properties"), pki, {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "ssl.truststore.password": "ts-secret-pw",  # accepted, unused with PEM: DescribeConfigs must hide it
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    })
    b = SecureBroker(str(folder / "data"), props).start()
    try:
        b.add_user("admin", "admin-pw")
        b.add_user("alice", "alice-pw")
        yield b
    finally:
        b.stop()


def conf(broker, user: str, mechanism: str = "SCRAM-SHA-256") -> dict:
    return {"bootstrap.servers": broker.listeners["SASL_PLAINTEXT"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": f"{user}-pw"}


def create_topic(broker, name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf(broker, "admin"))  # kept alive until the future is done
    admin.create_topics([NewTopic(name, 1)])[name].result(30)


def produce(broker, user: str, topic: str, n: int = 3, mechanism: str = "SCRAM-SHA-256"):
    """Delivery reports: list of (error or None)."""
    from confluent_kafka import Producer

    reports = []
    p = Producer({**conf(broker, user, mechanism), "message.timeout.ms": 8000})
    for i in range(n):
        p.produce(topic, b"x%d" % i, on_delivery=lambda err, msg: reports.append(err))
    p.flush(20)
    return reports


def end_offset(broker, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**conf(broker, "admin"), "group.id": "offsets-reader"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)[1]
    finally:
        c.close()


def acls(broker, *args: str) -> None:
    r = broker.cli("acls", *args)
    assert r.returncode == 0, r.stderr.decode()
    time.sleep(1.5)  # gateways refresh their ACL snapshot within a second


def test_a_principal_without_write_gets_topic_authorization_failed_and_writes_nothing(broker):
    from confluent_kafka import KafkaError

    topic = f"locked-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic)
    reports = produce(broker, "alice", topic)
    assert reports and all(e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in reports)
    assert end_offset(broker, topic) == 0
    acls(broker, "add", "--principal", "User:alice", "--operation", "write", "--topic", topic)
    assert produce(broker, "alice", topic) == [None, None, None]
    assert end_offset(broker, topic) == 3


def test_prefixed_acl_grants_a_group_of_topics_and_plain_logs_in_too(broker):
    prefix = f"team-{uuid.uuid4().hex[:6]}-"
    for t in ("a", "b"):
        create_topic(broker, prefix + t)
    hidden = f"hidden-{uuid.uuid4().hex[:6]}"
    create_topic(broker, hidden)
    acls(broker, "add", "--principal", "User:alice", "--operation", "write", "--operation", "describe",
         "--topic", prefix, "--prefixed")
    assert produce(broker, "alice", prefix + "a") == [None] * 3
    assert produce(broker, "alice", prefix + "b", mechanism="PLAIN") == [None] * 3
    from confluent_kafka.admin import AdminClient

    alice = AdminClient(conf(broker, "alice"))
    visible = set(alice.list_topics(timeout=20).topics)
    assert {prefix + "a", prefix + "b"} <= visible
    assert hidden not in visible  # Metadata shows only what alice may describe


def test_deny_overrides_allow(broker):
    from confluent_kafka import KafkaError

    prefix = f"mixed-{uuid.uuid4().hex[:6]}-"
    create_topic(broker, prefix + "open")
    create_topic(broker, prefix + "closed")
    acls(broker, "add", "--principal", "User:alice", "--operation", "all", "--topic", prefix, "--prefixed")
    acls(broker, "add", "--principal", "User:*", "--operation", "write", "--topic", prefix + "closed", "--deny")
    assert produce(broker, "alice", prefix + "open") == [None] * 3
    reports = produce(broker, "alice", prefix + "closed")
    assert all(e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in reports)


def test_acl_admin_api_needs_cluster_alter_and_round_trips(broker):
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)

    topic = f"api-{uuid.uuid4().hex[:8]}"
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    alice = AdminClient(conf(broker, "alice"))
    with pytest.raises(Exception) as info:  # alice may not alter the cluster
        alice.create_acls([binding])[binding].result(20)
    assert "CLUSTER_AUTHORIZATION_FAILED" in str(info.value) or "uthoriz" in str(info.value)
    admin = AdminClient(conf(broker, "admin"))
    admin.create_acls([binding])[binding].result(20)
    flt = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    assert admin.describe_acls(flt).result(20) == [binding]
    assert admin.delete_acls([flt])[flt].result(20) == [binding]
    assert admin.describe_acls(flt).result(20) == []


def test_elect_leaders_needs_alter_on_the_cluster(broker):
    """Kafka authorizes ElectLeaders with ALTER on the cluster: alice (no ACL) gets CLUSTER_AUTHORIZATION_FAILED
    and nothing is elected; the super user's election runs (ELECTION_NOT_NEEDED: the one replica leads)."""
    from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = f"elect-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic)
    tp = TopicPartition(topic, 0)

    def codes(client):  # the request's error, or each partition's
        try:
            results = client.elect_leaders(ElectionType.PREFERRED, [tp]).result(20)
        except KafkaException as e:
            return [e.args[0].code()]
        return [None if e is None else (e.code() if hasattr(e, "code") else e.args[0].code())
                for e in results.values()]

    assert codes(AdminClient(conf(broker, "alice"))) == [KafkaError.CLUSTER_AUTHORIZATION_FAILED]
    assert codes(AdminClient(conf(broker, "admin"))) == [KafkaError.ELECTION_NOT_NEEDED]


def test_users_and_acls_survive_a_broker_restart(broker):
    topic = f"durable-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic)
    acls(broker, "add", "--principal", "User:alice", "--operation", "write", "--topic", topic)
    broker.stop()
    broker.start()
    assert produce(broker, "alice", topic) == [None] * 3  # alice's SCRAM credential and her ACL came back
    r = broker.cli("users", "list")
    assert b"alice: SCRAM-SHA-256" in r.stdout and b"admin:" in r.stdout
    data = open(f"{broker.data_dir}/cluster-metadata.json").read()
    assert "alice-pw" not in data and "admin-pw" not in data
    assert os.stat(f"{broker.data_dir}/cluster-metadata.json").st_mode & 0o077 == 0  # readable by its owner only


def consume(broker, user: str, topic: str, group: str, want: int, timeout: float = 25):
    """(values read, first error code) from a subscribed confluent-kafka consumer: stops at ``want`` values
    or at the first error, so a denied consumer must surface its error instead of hanging."""
    from confluent_kafka import Consumer

    c = Consumer({**conf(broker, user), "group.id": group, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 6000, "enable.auto.commit": False})
    values, error = [], None
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(values) < want and error is None and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                error = msg.error().code()
            else:
                values.append(msg.value())
    finally:
        c.close()
    return values, error


def test_consumer_groups_need_read_on_the_group_and_on_the_topic(broker):
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    topic, group = f"grp-{uuid.uuid4().hex[:8]}", f"readers-{uuid.uuid4().hex[:6]}"
    create_topic(broker, topic)
    assert produce(broker, "admin", topic) == [None] * 3
    broker.add_user("bob", "bob-pw")
    acls(broker, "add", "--principal", "User:bob", "--operation", "read", "--topic", topic)
    assert consume(broker, "bob", topic, group, 3) == ([], KafkaError.GROUP_AUTHORIZATION_FAILED)
    acls(broker, "add", "--principal", "User:bob", "--operation", "read", "--group", group)
    assert consume(broker, "bob", topic, group, 3) == ([b"x0", b"x1", b"x2"], None)

    other = f"{group}-b"  # group READ but no topic READ: the topic is refused, not the group
    acls(broker, "add", "--principal", "User:alice", "--operation", "read", "--group", other)
    assert consume(broker, "alice", topic, other, 3) == ([], KafkaError.TOPIC_AUTHORIZATION_FAILED)
    committer = Consumer({**conf(broker, "admin"), "group.id": other})
    try:
        committer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    finally:
        committer.close()
    reader = Consumer({**conf(broker, "alice"), "group.id": other})
    try:  # OffsetFetch naming a topic alice may not describe: TOPIC_AUTHORIZATION_FAILED, no offset
        [tp] = reader.committed([TopicPartition(topic, 0)], timeout=20)
        assert tp.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED and tp.offset < 0
    finally:
        reader.close()
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    alice = AdminClient(conf(broker, "alice"))  # kept alive until the future is done
    listing = alice.list_consumer_group_offsets([ConsumerGroupTopicPartitions(other)])
    assert listing[other].result(20).topic_partitions == []  # all topics: the hidden one is left out

    describer = f"{group}-c"  # may find its coordinator (DESCRIBE) but not commit (READ)
    acls(broker, "add", "--principal", "User:bob", "--operation", "describe", "--group", describer)
    c = Consumer({**conf(broker, "bob"), "group.id": describer})
    try:
        with pytest.raises(KafkaException) as info:
            c.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
        assert info.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        c.close()
    admin = Consumer({**conf(broker, "admin"), "group.id": describer})
    try:  # nothing was committed
        assert admin.committed([TopicPartition(topic, 0)], timeout=20)[0].offset < 0
    finally:
        admin.close()


def test_broker_describe_configs_shows_the_security_settings_as_kafka_does(broker):
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

    admin = AdminClient(conf(broker, "admin"))
    broker_id = next(iter(admin.list_topics(timeout=20).brokers))
    resource = ConfigResource(ResourceType.BROKER, str(broker_id))
    entries = admin.describe_configs([resource])[resource].result(20)
    got = {n: (e.value, ConfigSource(e.source), e.is_sensitive) for n, e in entries.items()}
    static, default = ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG
    assert got["listeners"] == ("SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0", static, False)
    assert got["sasl.enabled.mechanisms"] == ("PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", static, False)
    assert got["listener.name.sasl_plaintext.sasl.enabled.mechanisms"] == ("PLAIN,SCRAM-SHA-256", static, False)
    assert got["authorizer.class.name"] == ("kafka.security.authorizer.AclAuthorizer", static, False)
    assert got["ssl.client.auth"] == ("none", default, False)
    assert got["listener.name.ssl.ssl.client.auth"] == ("required", static, False)
    assert got["ssl.keystore.type"] == ("PEM", static, False) and got["ssl.keystore.location"][1] == static
    assert got["connections.max.reauth.ms"] == ("0", default, False)
    # passwords, and the authorizer's own settings that Kafka cannot type, are sensitive and shown without a value
    assert got["ssl.truststore.password"] == (None, static, True)
    assert got["ssl.key.password"] == (None, default, True)
    assert got["super.users"] == (None, static, True)
    assert "allow.everyone.if.no.acl.found" not in got  # not given: Kafka does not list it either
    from logan_ray.actors.broker_dynamic import DYNAMIC
    assert all(e.is_read_only for n, e in entries.items() if n not in DYNAMIC)  # dynamic ones can be altered
    assert not any("ts-secret-pw" in str(e.value) for e in entries.values())


def test_users_and_acls_over_bootstrap_server_act_as_the_logged_in_principal(broker, tmp_path):
    boot = broker.listeners["SASL_PLAINTEXT"]

    def kafka_cli(login: list[str], *args: str, password: str | None = None, stdin: bytes | None = None):
        env = {**os.environ, "LOGAN_RAY_SASL_PASSWORD": password or ""}
        r = subprocess.run([*CLI, *args, "--bootstrap-server", boot, *login], input=stdin, capture_output=True,
                           env=env, timeout=60)
        return r.returncode, r.stdout.decode(), r.stderr.decode()

    alice = ["--sasl-username", "alice", "--sasl-mechanism", "SCRAM-SHA-256"]
    admin_props = tmp_path / "admin.properties"  # a Kafka tool's --command-config file, unchanged
    admin_props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                           "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                           'username="admin" password="admin-pw";\n')
    admin = ["--command-config", str(admin_props)]
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic)
    acl = ["--principal", "User:carol", "--operation", "write", "--topic", topic]

    rc, out, err = kafka_cli(alice, "acls", "add", *acl, password="alice-pw")  # alice may not alter the cluster
    assert rc == 1 and len(err.strip().splitlines()) == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in err and "super.users" in err
    rc, out, err = kafka_cli(alice, "users", "list", password="wrong")
    assert rc == 1 and "login to" in err and "failed" in err

    assert kafka_cli(admin, "users", "set", "carol", "--password-stdin", stdin=b"carol-pw\n")[0] == 0
    rc, out, err = kafka_cli(admin, "users", "list")
    assert rc == 0, err
    assert "carol: SCRAM-SHA-256 (4096 iterations), SCRAM-SHA-512 (4096 iterations)" in out
    assert kafka_cli(admin, "acls", "add", *acl)[0] == 0
    rc, out, _ = kafka_cli(admin, "acls", "list", "--principal", "User:carol")
    assert out.strip() == f"ALLOW User:carol write on topic {topic} (literal) from host *"
    assert produce(broker, "carol", topic) == [None] * 3  # the new user, with the new ACL

    rc, out, _ = kafka_cli(admin, "acls", "remove", *acl)
    assert rc == 0 and out.startswith("removed: ALLOW User:carol write")
    rc, _, err = kafka_cli(admin, "acls", "remove", *acl)
    assert rc == 1 and "no such ACL" in err
    assert kafka_cli(admin, "users", "delete", "carol")[0] == 0
    assert "carol" not in kafka_cli(admin, "users", "list")[1]
