"""Only a broker fetches as a replica (issue 32, item 1): the LOGAN-RAY-BROKER login and the replica-fetch rule.

A follower's Fetch moves the leader's high watermark and ISR, so one forged by a plain
client (``replica_id`` = a follower's id, ``fetch_offset`` = 2**62) acknowledged
``acks=all`` writes no follower held. The gateway core runs here on real sockets, no Ray.
"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from logan_ray.gateway.broker_identity import may_fetch_as_replica
from logan_ray.gateway.broker_link import BrokerLink, InterBrokerListener
from logan_ray.protocol import errors as codes
from logan_ray.security import acl, broker_auth
from logan_ray.security.acl import ALLOW, LITERAL, Binding, Decider
from logan_ray.security.sasl import SaslFailed
from tests.gateway.wire_client import Wire, fetch_body
from tests.tooling.served_gateway import closed_by_peer, served_gateway

SECRET = broker_auth.new_secret()


class SecretRouter:
    """The router as the gateway asks it for the broker secret."""

    class _Method:
        def __init__(self, value):
            self._value = value

        def remote(self):
            async def answer():
                return self._value
            return answer()

    def __init__(self, secret: str) -> None:
        self.broker_secret = self._Method(secret)


def forged_fetch(replica_id: int) -> dict:
    body = fetch_body("t", [(0, 2 ** 62, 1 << 20)])
    body["replica_id"] = replica_id
    return body


def fetch_codes(body: dict) -> list[int]:
    return [p["error_code"] for t in body["responses"] for p in t["partitions"]]


def login(port: int, broker: int, secret: str = SECRET) -> None:
    """Log in as ``broker`` and hang up (raises SaslFailed when either side fails to prove itself)."""
    async def run() -> None:
        link = await BrokerLink.open(("127.0.0.1", port), broker, secret, InterBrokerListener(), "test")
        link.close()

    asyncio.run(run())


def test_a_plain_client_fetching_as_a_replica_is_refused_topic_authorization_failed():
    with served_gateway(router=SecretRouter(SECRET)) as (_gw, port), Wire(f"127.0.0.1:{port}") as w:
        for version in (4, 11, 12):
            w.send(1, version, forged_fetch(2))
            _corr, body = w.recv()
            assert fetch_codes(body) == [codes.TOPIC_AUTHORIZATION_FAILED], version


def test_the_broker_login_works_on_a_plaintext_listener_and_fetches_only_as_that_broker():
    async def run(port: int) -> list[list[int]]:
        link = await BrokerLink.open(("127.0.0.1", port), 7, SECRET, InterBrokerListener(), "replica-7")
        try:
            other = await link.call(1, 12, forged_fetch(8))  # logged in as 7, naming 8
            own = await link.call(1, 12, forged_fetch(7))
        finally:
            link.close()
        return [fetch_codes(other), fetch_codes(own)]

    with served_gateway(router=SecretRouter(SECRET)) as (_gw, port):
        other, own = asyncio.run(run(port))
    assert other == [codes.TOPIC_AUTHORIZATION_FAILED]
    assert own != [codes.TOPIC_AUTHORIZATION_FAILED]  # served (no such topic in this stand-in cluster)


def test_a_broker_login_with_the_wrong_secret_fails_and_closes_the_connection():
    with served_gateway(router=SecretRouter(SECRET)) as (_gw, port):
        with pytest.raises(SaslFailed, match="invalid LOGAN-RAY-BROKER proof"):
            login(port, 7, broker_auth.new_secret())


def test_a_follower_refuses_a_leader_that_cannot_prove_the_secret():
    """A fake leader (another secret) answers the login: the follower stops before any Fetch."""
    with served_gateway(router=SecretRouter(broker_auth.new_secret())) as (_gw, port):
        with pytest.raises(SaslFailed):
            login(port, 7)


def test_kafka_clients_on_a_plaintext_listener_still_get_illegal_sasl_state():
    with served_gateway(router=SecretRouter(SECRET)) as (_gw, port), Wire(f"127.0.0.1:{port}") as w:
        w.send(17, 1, {"mechanism": "PLAIN"})
        _corr, body = w.recv()
        assert body["error_code"] == codes.ILLEGAL_SASL_STATE and body["mechanisms"] == []


def test_a_recorded_login_cannot_be_replayed():
    """The server's nonce is fresh per login: a client proof copied from another exchange fails."""
    async def run() -> None:
        async def lookup(_u, _m):
            return {"secret": SECRET}
        client = broker_auth.BrokerAuthClient(SECRET, 3)
        first = client.first()
        one = broker_auth.BrokerAuthServer()
        proof = client.final(await one.step(first, lookup))
        client.verify(await one.step(proof, lookup))
        two = broker_auth.BrokerAuthServer()
        await two.step(first, lookup)
        with pytest.raises(SaslFailed):
            await two.step(proof, lookup)

    asyncio.run(run())


def test_under_an_authorizer_cluster_action_lets_a_principal_fetch_as_a_replica():
    """Kafka's own rule for operators' tools, next to the broker login."""
    def gateway(bindings):
        class Auth:
            async def decider(self, fresh: bool = False):
                return Decider(bindings)
        return SimpleNamespace(authorizer=Auth())

    conn = SimpleNamespace(state={}, session=None, peer=("127.0.0.1", 5555))
    granted = [Binding(acl.CLUSTER, acl.CLUSTER_NAME, LITERAL, "User:ANONYMOUS", "*", acl.CLUSTER_ACTION, ALLOW)]
    assert asyncio.run(may_fetch_as_replica(gateway(granted), conn, 2))
    assert not asyncio.run(may_fetch_as_replica(gateway([]), conn, 2))
    assert not asyncio.run(may_fetch_as_replica(SimpleNamespace(authorizer=None), conn, 2))


def test_a_garbage_broker_login_closes_only_that_connection():
    with served_gateway(router=SecretRouter(SECRET)) as (_gw, port):
        with Wire(f"127.0.0.1:{port}") as w:
            w.send(17, 1, {"mechanism": broker_auth.MECHANISM})
            assert w.recv()[1]["error_code"] == codes.NONE
            w.send(36, 2, {"auth_bytes": b"\xff" * 300})
            assert w.recv()[1]["error_code"] == codes.SASL_AUTHENTICATION_FAILED
            assert closed_by_peer(w.sock)
        login(port, 4)  # the gateway serves on

