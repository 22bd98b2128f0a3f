"""Kafka-format storage engine: record batches, segments, partition logs.

Pure Python and independent of Ray, so it can be tested, benchmarked and
recovered without a cluster. Shipped as ``logan_ray.storage``.
"""
