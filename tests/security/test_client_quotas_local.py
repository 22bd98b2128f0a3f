"""Client quotas (KIP-13/55/219/546) on a gateway in this process, over real sockets (no Ray).

The router is a stand-in made of the router's own quota storage (actors.security_meta)
saving to a file; partitions are stand-ins that count the bytes appended. Real clients:
kafka-python's admin client sends DescribeClientQuotas/AlterClientQuotas (its message
classes; it has no helper methods for them), confluent-kafka producers are throttled.
"""
from __future__ import annotations

import asyncio
import json
import threading
import time
from types import SimpleNamespace

import pytest

from actors.security_meta import SecurityMetadata
from logan_ray.gateway.connection import MuteAfter
from logan_ray.gateway.server import Gateway
from logan_ray.protocol import decode_response
from logan_ray.protocol import errors as codes
from logan_ray.security.acl import ALLOW, CLUSTER, CLUSTER_NAME, DESCRIBE_CONFIGS, LITERAL, Binding, Decider
from tests.tooling.served_gateway import NODE, gateway_thread

QUOTA = 200 * 1024  # producer_byte_rate of the throttled client, bytes/s


class _Remote:
    """``handle.method.remote(...)`` over a plain object's async methods, as a Ray handle offers them."""

    def __init__(self, target) -> None:
        self._target = target

    def __getattr__(self, name):
        fn = getattr(self._target, name)
        return SimpleNamespace(remote=lambda *args: fn(*args))


class StoredRouter(SecurityMetadata):
    """The router's quota storage, saving its metadata to ``path`` (what the router's file holds)."""

    def __init__(self, path) -> None:
        self.path = path
        self._meta = json.loads(path.read_text()) if path.exists() else {}
        self._lock = asyncio.Lock()

    def _save(self) -> None:
        self.path.write_text(json.dumps(self._meta))


class CountingCluster:
    """Topics of one partition each, led here; appends are counted per topic with their time."""

    cluster_id = "quotas"
    broker_id = 1

    def __init__(self, router, port_box: dict) -> None:
        self.router = router
        self.port_box = port_box
        self.appended: dict[str, list[tuple[float, int]]] = {}
        self.lease = None
        self.board_waits = SimpleNamespace(poke=lambda: None)

    async def gateways(self) -> dict:
        return {NODE: ("127.0.0.1", self.port_box["port"])}

    async def topic_names(self, ids) -> dict:
        return {}

    def topic_id(self, name: str):
        import uuid

        return uuid.uuid5(uuid.NAMESPACE_DNS, name)

    def forget(self, name: str) -> None:
        pass

    def close(self) -> None:
        pass

    async def refresh(self, names, auto_create: bool = False) -> dict:
        return {n: [SimpleNamespace(replicas=[NODE], isr=[NODE], node_id=NODE, offline=False, leader_epoch=0)]
                for n in names or sorted(self.appended)}

    async def partition(self, name: str, index: int):
        log = self.appended.setdefault(name, [])

        async def call(method, payload=None):
            log.append((time.monotonic(), len(payload)))
            return len(log) - 1, -1, 0
        return SimpleNamespace(offline=False, local=True, replicas=[NODE], call=call)


#: quota.window.num and quota.window.size.seconds of the test gateway: Kafka's default 11 one-second windows
#: let a client burst 10 s of its quota at once (the rate of a new client is taken over 10 s), so
#: holding it to its quota shows only over tens of seconds; 2 windows show it within seconds
WINDOWS = [{"name": "quota.window.num", "value": "2"}, {"name": "quota.window.size.seconds", "value": "1"}]


@pytest.fixture
def gateway(tmp_path):
    """(gateway, port, its router storage, the metadata file) with a given authorizer set later."""
    path = tmp_path / "cluster-meta.json"
    router = StoredRouter(path)
    box: dict = {}

    async def start():
        gw = Gateway(_Remote(router), NODE, broker_configs=WINDOWS)
        gw.cluster = CountingCluster(_Remote(router), box)
        box["port"] = gw.listen("127.0.0.1", 0)[1]
        return gw, box["port"]

    with gateway_thread(start) as (gw, port, loop):
        yield SimpleNamespace(gw=gw, port=port, router=router, path=path, loop=loop)


def admin(port: int):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", client_id="quota-admin",
                            request_timeout_ms=10000)


def send(client, request):
    return client._manager.run(client._manager.send, request)


def alter(client, entries: list[tuple[list[tuple[str, str | None]], list[tuple[str, float, bool]]]],
          validate_only: bool = False):
    from kafka.protocol.admin import AlterClientQuotasRequest as R

    return send(client, R(entries=[R.EntryData(
        entity=[R.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[R.EntryData.OpData(key=k, value=v, remove=rm) for k, v, rm in ops]) for entity, ops in entries],
        validate_only=validate_only))


def describe(client, components: list[tuple[str, int, str | None]], strict: bool = False):
    from kafka.protocol.admin import DescribeClientQuotasRequest as R

    return send(client, R(components=[R.ComponentData(entity_type=t, match_type=m, match=n)
                                      for t, m, n in components], strict=strict))


def entries(response) -> dict:
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}


def test_quotas_set_with_kafkas_admin_api_are_described_and_kept_in_the_cluster_metadata(gateway):
    client = admin(gateway.port)
    try:
        r = alter(client, [([("user", "alice"), ("client-id", None)], [("producer_byte_rate", 1024, False),
                                                                       ("consumer_byte_rate", 2048, False)]),
                           ([("client-id", None)], [("consumer_byte_rate", 4096, False)])])
        assert [e.error_code for e in r.entries] == [0, 0]
        got = entries(describe(client, [("user", 0, "alice")]))
        assert got == {(("client-id", None), ("user", "alice")): {"consumer_byte_rate": 2048.0,
                                                                   "producer_byte_rate": 1024.0}}
        assert set(entries(describe(client, [("client-id", 1, None)], strict=True))) == {(("client-id", None),)}
        r = alter(client, [([("user", "alice"), ("client-id", None)], [("producer_byte_rate", 0, True)])])
        assert r.entries[0].error_code == 0
        assert entries(describe(client, [("user", 0, "alice")])) == {
            (("client-id", None), ("user", "alice")): {"consumer_byte_rate": 2048.0}}
    finally:
        client.close()
    # durable: what the router saved is what a restarted router reads back
    restarted = StoredRouter(gateway.path)
    version, stored = asyncio.run(restarted.quotas())
    assert version == 2 and len(stored) == 2


def test_bad_quota_entries_are_refused_with_invalid_request_and_change_nothing(gateway):
    client = admin(gateway.port)
    try:
        r = alter(client, [([("user", "bob")], [("producer_byte_rate", 1.5, False)]),
                           ([("user", "bob"), ("user", "eve")], [("producer_byte_rate", 10, False)]),
                           ([("user", "bob")], [("no_such_quota", 10, False)]),
                           ([("ip", "10.0.0.1")], [("connection_creation_rate", 10, False)])])
        assert [e.error_code for e in r.entries] == [codes.INVALID_REQUEST] * 4
        assert "Long" in r.entries[0].error_message
        r = alter(client, [([("user", "bob")], [("producer_byte_rate", 10, False)])], validate_only=True)
        assert r.entries[0].error_code == 0
        assert describe(client, []).entries == []
        bad = describe(client, [("user", 0, None)])
        assert bad.error_code == codes.INVALID_REQUEST and bad.entries is None
    finally:
        client.close()


def test_quota_apis_need_describe_configs_and_alter_configs_on_the_cluster(gateway):
    gateway.gw.authorizer = SimpleNamespace(decider=_decider(Decider([Binding(
        CLUSTER, CLUSTER_NAME, LITERAL, "User:ANONYMOUS", "*", DESCRIBE_CONFIGS, ALLOW)], [])), invalidate=lambda: 0)
    client = admin(gateway.port)
    try:
        r = alter(client, [([("user", "bob")], [("producer_byte_rate", 10, False)])])
        assert r.entries[0].error_code == codes.CLUSTER_AUTHORIZATION_FAILED
        assert describe(client, []).error_code == codes.NONE
        gateway.gw.authorizer = SimpleNamespace(decider=_decider(Decider([], [])), invalidate=lambda: 0)
        assert describe(client, []).error_code == codes.CLUSTER_AUTHORIZATION_FAILED
    finally:
        client.close()
    assert asyncio.run(StoredRouter(gateway.path).quotas()) == (0, [])


def _decider(d):
    async def decider(fresh: bool = False):
        return d
    return decider


def _produce_flat_out(port: int, client_id: str, topic: str, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "client.id": client_id, "linger.ms": 5,
                  "batch.size": 32 * 1024, "acks": 1, "enable.idempotence": False,
                  "queue.buffering.max.kbytes": 256})
    value = b"v" * 1000
    while not stop.is_set():
        try:
            p.produce(topic, value)
        except BufferError:
            p.poll(0.05)
    p.flush(10)


def test_a_producer_over_its_byte_rate_is_held_to_it_while_an_unthrottled_one_goes_on(gateway):
    client = admin(gateway.port)
    try:
        assert alter(client, [([("client-id", "slow")], [("producer_byte_rate", QUOTA, False)])]).entries[0].error_code == 0
    finally:
        client.close()
    stop = threading.Event()
    threads = [threading.Thread(target=_produce_flat_out, args=(gateway.port, cid, topic, stop))
               for cid, topic in (("slow", "slow-topic"), ("fast", "fast-topic"))]
    for t in threads:
        t.start()
    warm, measured = 3.0, 6.0  # past the first windows' burst: the steady rate
    time.sleep(warm + measured)
    stop.set()
    for t in threads:
        t.join(30)
    appended = gateway.gw.cluster.appended

    def rate(topic: str) -> float:
        t0 = appended[topic][0][0]
        return sum(n for at, n in appended[topic] if t0 + warm <= at < t0 + warm + measured) / measured

    slow, fast = rate("slow-topic"), rate("fast-topic")
    assert 0.85 * QUOTA <= slow <= 1.15 * QUOTA, (slow, QUOTA)
    assert fast > 3 * QUOTA, fast
    assert gateway.gw.client_quotas.throttled > 0


# ------------------------------------------------------------ throttled answers (KIP-219)
class _Conn:
    def __init__(self, principal: str = "User:carol") -> None:
        self.session = SimpleNamespace(principal=principal)
        self.state: dict = {}
        self.muted: list[float] = []

    def mute(self, seconds: float) -> None:
        self.muted.append(seconds)


def _quotas(values: dict):
    from logan_ray.gateway.client_quotas import ClientQuotas

    router = StoredRouter.__new__(StoredRouter)
    router._meta, router._lock, router._save = {}, asyncio.Lock(), lambda: None
    asyncio.run(router.alter_quotas([[[["user", "carol"]], values]]))
    return ClientQuotas(_Remote(router), 2, 1000)


def _fetch_answer() -> dict:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "node_endpoints": [], "responses": [
        {"topic": "t", "topic_id": None, "partitions": [{
            "partition_index": 0, "error_code": 0, "high_watermark": 1, "last_stable_offset": 1,
            "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
            "records": b"r" * 50_000}]}]}


def _apply(quotas, api_key: int, version: int, response: dict | None, request_bytes: int = 0):
    from logan_ray.protocol import encode_response

    header = SimpleNamespace(api_key=api_key, api_version=version, correlation_id=7, client_id="app")
    conn = _Conn()

    async def run():
        chunks = encode_response(api_key, version, 7, response) if response is not None else None
        started = time.monotonic()
        out = await quotas.apply(conn, header, response, chunks, request_bytes)
        return out, time.monotonic() - started
    out, took = asyncio.run(run())
    return out, took, conn


def _decoded(api_key: int, version: int, chunks: list) -> dict:
    frame = b"".join(bytes(c) for c in chunks if not isinstance(c, MuteAfter))
    return decode_response(api_key, version, frame[4:])[1]


def test_a_fetch_over_its_quota_is_answered_empty_with_its_throttle_time_and_then_muted():
    quotas = _quotas({"consumer_byte_rate": 10_000})
    out, took, conn = _apply(quotas, 1, 12, _fetch_answer())
    answer = _decoded(1, 12, out)
    assert answer["responses"] == [] and answer["throttle_time_ms"] > 0
    assert isinstance(out[-1], MuteAfter) and out[-1].seconds == answer["throttle_time_ms"] / 1000
    assert took < 0.5  # KIP-219: answered at once, the channel muted after
    # what was not sent is not counted: the next fetch of the same is throttled the same
    out2, _, _ = _apply(quotas, 1, 12, _fetch_answer())
    assert abs(_decoded(1, 12, out2)["throttle_time_ms"] - answer["throttle_time_ms"]) < 100


def test_a_client_without_kip_219_gets_its_throttled_answer_late_instead():
    quotas = _quotas({"producer_byte_rate": 10_000})
    response = {"responses": [], "throttle_time_ms": 0}
    out, took, _ = _apply(quotas, 0, 5, response, request_bytes=13_000)  # 13 kB over 1 s: 30 % over
    answer = _decoded(0, 5, out)
    assert answer["throttle_time_ms"] == 300
    assert not isinstance(out[-1], MuteAfter) and took >= 0.29


def test_a_throttled_acks_0_produce_mutes_the_connection():
    quotas = _quotas({"producer_byte_rate": 10_000})
    out, _, conn = _apply(quotas, 0, 9, None, request_bytes=20_000)
    assert out is None and conn.muted == [1.0]


def test_a_muted_connection_reads_no_request_until_its_mute_ends():
    import socket

    from logan_ray.gateway.connection import Connection

    async def run():
        server = socket.create_server(("127.0.0.1", 0))
        theirs = socket.create_connection(server.getsockname())
        ours, _ = server.accept()
        server.close()
        seen: list[float] = []
        conn = Connection(ours, ("127.0.0.1", 1), lambda c, frame: seen.append(time.monotonic()), 1 << 20)
        started = time.monotonic()
        conn.mute(0.5)
        theirs.sendall(b"\x00\x00\x00\x01x")
        for _ in range(100):
            await asyncio.sleep(0.02)
            if seen:
                break
        conn.close()
        theirs.close()
        return seen[0] - started if seen else None
    waited = asyncio.run(run())
    assert waited is not None and 0.45 <= waited < 1.5
