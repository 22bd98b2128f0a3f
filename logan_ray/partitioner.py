"""Key -> partition as Kafka's clients compute it (public name; defined in ``logan_ray.common.partitioner``,
where the group coordinator's offsets log uses it too)."""
from __future__ import annotations

from logan_ray.common.partitioner import murmur2, partition_for_key

__all__ = ["murmur2", "partition_for_key"]
