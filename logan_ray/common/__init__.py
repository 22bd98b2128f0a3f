"""What the Ray layer and the public face share: plain Python below both, no Ray, no I/O.

Dependencies point one way, storage <- actors <- public face; what both upper
layers need lives below them (like Kafka's ``org.apache.kafka.common``):

- :mod:`.errors` — the typed errors that are not storage's (storage defines its own
  in ``logan_ray.storage.errors``); users import all of them from ``logan_ray.errors``.
- :mod:`.partitioner` — key -> partition with Kafka's murmur2, for producers and for
  the group coordinator's choice of ``__consumer_offsets`` partition.

The other shared pure packages are ``logan_ray.protocol`` (the wire codec and
Kafka's error codes) and ``logan_ray.groups`` (the group coordinator's state
machine). docs/architecture.md draws the layers; tests/test_layering.py keeps them.
"""
