"""Topics as Ray Datasets: ``read_topic`` and ``write_topic``.

Reads go to the segment files on the node holding each partition (located by
the partition actor) and decode whole chunks of batches into Arrow; writes
build whole batches per partition and append them through the partition
actors with the producer's murmur2 partitioning.
"""
from __future__ import annotations

from .arrow_records import RECORD_SCHEMA, decode_to_table
from .murmur import murmur2_column, partitions_for_keys
from .sink import write_topic
from .source import read_topic

__all__ = ["read_topic", "write_topic", "RECORD_SCHEMA", "decode_to_table", "murmur2_column", "partitions_for_keys"]
