"""A router that replaced a dead one (killed for good, a new one started on the same data dir) learns
the running gateways at once: the gateway's next heartbeat gets a new broker epoch and registers its
addresses again, and until then a gateway names itself in Metadata while its lease runs. Before, the
new router listed no gateway for up to 10 s (the periodic registration), and librdkafka's admin
client, told of no broker, stalled its CreateTopics for more than 30 s."""
from __future__ import annotations

import time

import ray
from confluent_kafka.admin import AdminClient, NewTopic


def test_a_replaced_router_knows_the_gateway_at_once_and_admin_requests_go_through(
        client, gateway, restart_router, topic_name):
    here = ray.get_runtime_context().get_node_id()
    router = restart_router()
    started = time.monotonic()
    admin = AdminClient({"bootstrap.servers": gateway})
    assert [f"{b.host}:{b.port}" for b in admin.list_topics(timeout=10).brokers.values()] == [gateway]
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(timeout=20)
    assert time.monotonic() - started < 15
    assert topic_name in client.list_topics()
    deadline = time.monotonic() + 10
    while here not in ray.get(router.gateways.remote()):
        assert time.monotonic() < deadline, "the new router never learned the running gateway"
        time.sleep(0.1)
