"""``producer.id.expiration.ms``: a dynamic broker config the partition actors apply, now and at every start."""
from __future__ import annotations

import time

import ray

from logan_ray.actors.names import NAMESPACE, ROUTER_NAME
from logan_ray.actors.partition import SEQUENCE_WAIT_S
from logan_ray.storage.record_builder import build_batch

SET, DELETE = 0, 1


def idem(pid: int, seq: int) -> bytes:
    return build_batch([b"p%d-s%d" % (pid, seq)], producer_id=pid, producer_epoch=0, base_sequence=seq)


def producers(actor) -> int:
    return ray.get(actor.stats.remote())["producers"]


def live(topic: str):
    """The partition's current actor: in a busy session the active-partition cap may have
    hibernated the one the test started (an idle partition is the least recently used)."""
    return ray.get(ray.get_actor(ROUTER_NAME, namespace=NAMESPACE).activate.remote(topic, 0))


def test_idle_producers_expire_and_stay_gone_after_a_restart_and_one_coming_back_is_accepted_as_kafka_does(
        client, topic_name):
    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    client.create_topic(topic_name, partitions=1)
    back, gone = 7_700_001, 7_700_002
    assert [ray.get(live(topic_name).append.remote(idem(pid, 0)))[0] for pid in (back, gone)] == [0, 1]
    previous_check = ray.get(router.set_producer_expiration_check_interval_ms.remote(100))
    # This test is about one partition actor's memory of producers: nothing may hibernate it in a busy
    # session (the active-partition cap or idleness would; a woken actor no longer knows whom it expired).
    previous_cap = ray.get(router.set_max_active_partitions.remote(100_000))
    previous_idle = ray.get(router.set_partition_idle_ms.remote(3_600_000))
    try:
        # a dynamic cluster-wide change, pushed to the running partition
        ray.get(router.alter_broker_configs.remote("", [(SET, "producer.id.expiration.ms", "800")]))
        deadline = time.monotonic() + 15
        while producers(live(topic_name)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert producers(live(topic_name)) == 0
        # back to the default (a day) before the next steps, which must not expire on a loaded machine
        ray.get(router.alter_broker_configs.remote("", [(DELETE, "producer.id.expiration.ms", None)]))
        # An expired producer's next batch has a non-zero sequence: Kafka (2.5+, KIP-360) accepts it
        # ("no current producer epoch: accept writes with any sequence number") and does not make it wait.
        actor = live(topic_name)
        started = time.monotonic()
        assert ray.get(actor.append.remote(idem(back, 5)))[0] == 2
        assert time.monotonic() - started < SEQUENCE_WAIT_S
        assert ray.get(live(topic_name).append.remote(idem(back, 5)))[0] == 2  # its state is back: a retry is a duplicate
        assert ray.get(live(topic_name).append.remote(idem(7_700_003, 0)))[0] == 3  # a fresh producer works
        actor = live(topic_name)
        # a clean restart (hibernation writes the producer snapshot): the expired producer stays gone
        assert ray.get(router.hibernate.remote(topic_name, 0, None, False))
        woken = ray.get(router.activate.remote(topic_name, 0))  # started again, from its files
        assert woken._actor_id != actor._actor_id
        assert producers(woken) == 2  # `back` and the fresh one, not `gone`
        assert ray.get(woken.append.remote(idem(back, 5)))[0] == 2  # still deduplicated after the restart
    finally:
        ray.get(router.alter_broker_configs.remote("", [(DELETE, "producer.id.expiration.ms", None)]))
        ray.get(router.set_producer_expiration_check_interval_ms.remote(previous_check))
        ray.get(router.set_max_active_partitions.remote(previous_cap))
        ray.get(router.set_partition_idle_ms.remote(previous_idle))
