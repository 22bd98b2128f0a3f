"""Ray actors of logan-ray that own the cluster's state: partitions, router, cleaners, group coordinator.

Shipped as ``logan_ray.actors``. They import storage and the shared pure packages, never the
public face; the Kafka gateway is a front end of the public face (docs/architecture.md).
"""
