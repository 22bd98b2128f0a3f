"""Session-wide fixtures: one embedded Ray runtime and one logan-ray broker per test session.

Ray takes seconds to start and every actor is a process, so tests share one
runtime and isolate themselves with unique topic names instead.
"""
from __future__ import annotations

import os
import uuid

import pytest

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # every Ray listener on 127.0.0.1
os.environ.setdefault("RAY_AUTH_MODE", "token")  # keep token auth on, also for child processes that attach


def _free_port_below_ephemeral_range() -> int:
    """A free loopback port under Linux's ephemeral range (32768+).

    A gateway restarted after SIGKILL binds its old port again; on a port from the
    ephemeral range a client connection may have taken that number meanwhile.
    """
    import random
    import socket

    for port in random.sample(range(20000, 32000), 200):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port between 20000 and 32000")


@pytest.fixture(scope="session")
def broker_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("logan-ray-data"))


@pytest.fixture(scope="session")
def client(broker_dir):
    """A logan-ray client on an embedded single-node Ray, closed (and Ray stopped) at session end."""
    import ray

    import logan_ray

    if ray.is_initialized():
        ray.shutdown()
    c = logan_ray.connect(data_dir=broker_dir)
    yield c
    c.close()


@pytest.fixture
def topic_name(request) -> str:
    """A topic name unique to this test; topics named with it are deleted afterwards.

    Every partition is an actor process (about 140 MiB): without the clean-up a
    session's thousands of tests would keep hundreds of them alive on two cores.
    """
    base = "".join(ch if ch.isalnum() else "-" for ch in request.node.name)[:60]
    name = f"{base}-{uuid.uuid4().hex[:8]}"
    yield name
    if "client" in request.fixturenames:
        _delete_topics_starting_with(request.getfixturevalue("client"), name)


def _delete_topics_starting_with(client, prefix: str) -> None:
    import logging

    try:
        for topic in client.list_topics():
            if topic.startswith(prefix):
                client.delete_topic(topic)
    except Exception as e:  # the test may have stopped or replaced the broker: nothing to free then
        logging.getLogger("tests").info("could not delete the topics of %s: %s", prefix, e)


@pytest.fixture(scope="session")
def gateway(client) -> str:
    """The Kafka gateway of the session's broker on a free loopback port: "127.0.0.1:<port>"."""
    import ray

    from logan_ray.gateway import start_gateways, stop_gateways

    here = ray.get_runtime_context().get_node_id()
    endpoints = start_gateways("127.0.0.1", _free_port_below_ephemeral_range(), nodes=[here])
    yield endpoints[here]
    stop_gateways([here])


@pytest.fixture
def short_partition_idle(client):
    """``partition.idle.ms`` of 300 ms (partitions hibernate fast); the broker's value back afterwards.

    Yields the router. It is looked up again at the end, since a test may have replaced it.
    """
    import ray

    from logan_ray.actors.names import NAMESPACE, ROUTER_NAME

    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    previous = ray.get(router.set_partition_idle_ms.remote(SHORT_IDLE_MS))
    try:
        yield router
    finally:
        ray.get(ray.get_actor(ROUTER_NAME, namespace=NAMESPACE).set_partition_idle_ms.remote(previous))


SHORT_IDLE_MS = 300



@pytest.fixture
def restart_router(client, broker_dir):
    """A function that stops the session's router cleanly and starts a new one on the same data dir
    (``router_kwargs`` as ``ensure_router``'s); returns the new router.

    One place for what a restart needs: ``ray.kill`` returns before Ray frees the detached
    router's name, and an ``ensure_router`` meanwhile got the dying router by that name, leaving
    every later test of the session without a broker (seen once in a full run).
    """
    import time

    import ray

    from logan_ray.actors.names import NAMESPACE, ROUTER_NAME
    from logan_ray.client import ensure_router

    def restart(**router_kwargs):
        try:
            ray.get(client.router.shutdown.remote(), timeout=120)
        except Exception as e:  # it is killed below all the same; its partitions recover their files
            import logging

            logging.getLogger("tests").warning("router did not shut down cleanly: %s", e)
        ray.kill(client.router, no_restart=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
            except ValueError:
                break
            assert time.monotonic() < deadline, "Ray did not free the killed router's name in 60 s"
            time.sleep(0.05)
        client._routes.clear()
        client.router = ensure_router(broker_dir, **router_kwargs)
        return client.router
    return restart
