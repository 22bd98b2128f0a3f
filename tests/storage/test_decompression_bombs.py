"""A zstd bomb stored in a log (a delete-policy topic takes batches without looking inside):
every place the broker decompresses refuses it within the per-batch limit, and nothing else is lost."""
from __future__ import annotations

import time
import tracemalloc

import pytest

from bombs import zstd_bomb_batch
from log_helpers import open_log
from logan_ray.storage.compaction import compact
from logan_ray.storage.compression import MAX_DECOMPRESSED_BYTES
from logan_ray.storage.config import TopicConfig
from logan_ray.storage.errors import CorruptRecordError
from logan_ray.storage.record_builder import build_batch

LIMIT_SLACK = 40 << 20


@pytest.fixture
def bombed_log(tmp_path):
    lg = open_log(tmp_path / "t-0", max_message_bytes=2 << 20)
    lg.append(build_batch([b"before"], [b"k1"], timestamps=1_000))
    lg.append(zstd_bomb_batch())  # 1 MiB, 32 GiB once decompressed
    lg.append(build_batch([b"after"], [b"k2"], timestamps=3_000))
    yield lg
    lg.close()


def bounded(fn):
    tracemalloc.start()
    started = time.monotonic()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1], time.monotonic() - started
    finally:
        tracemalloc.stop()


def test_timestamp_lookup_over_a_bomb_is_corrupt_message_within_the_limit(bombed_log):
    def lookup():
        with pytest.raises(CorruptRecordError, match="decompress to more than") as e:
            bombed_log.offset_for_timestamp(2_000)
        return e.value.code

    code, peak, took = bounded(lookup)
    assert code == 2  # CORRUPT_MESSAGE
    assert peak < MAX_DECOMPRESSED_BYTES + LIMIT_SLACK and took < 10
    assert bombed_log.offset_for_timestamp(500)[0] == 0  # lookups that stop before it still work
    assert [r.value for r in bombed_log.read_records(1001)] == [b"after"]


def test_compaction_keeps_a_bomb_uncleaned_and_compacts_the_rest(bombed_log):
    bombed_log.append(build_batch([b"newer"], [b"k1"], timestamps=4_000))
    bombed_log.roll()
    bombed_log.flush()
    bombed_log.update_config(TopicConfig.from_dict({"cleanup.policy": "compact", "max.message.bytes": str(2 << 20)}))
    done, peak, took = bounded(lambda: compact(bombed_log))
    stats = done[0].result.stats
    assert stats.malformed_batches == 1 and stats.records_removed == 1  # "before" replaced by "newer"
    assert peak < MAX_DECOMPRESSED_BYTES + LIMIT_SLACK and took < 20
    assert [r.value for r in bombed_log.read_records(1001)] == [b"after", b"newer"]
