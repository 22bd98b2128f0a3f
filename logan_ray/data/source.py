"""``read_topic``: a bounded Ray Dataset over a topic, read where its partitions live.

Planning (on the caller) fixes every partition's [start, end) offsets, so the
dataset is repeatable: "latest" means the log end offset at planning time.
Each read task covers one partition (or one slice of a large one) and asks its
partition actor only *where* the batches are (``locate``: file slices); the
bytes are read straight from the segment files, which is why the tasks are
pinned to the node that holds the partition (a label selector on Ray's node id
label). Ray Data applies scheduling options per read operator, not per task, so
partitions are grouped by node into one read operator each (a single operator
on a single-node cluster) and the operators are unioned. The selector has a
match-anything fallback: a task that runs elsewhere anyway (the node was full
or gone) fetches the bytes through the actor instead.

``isolation_level="read_committed"`` reads as Kafka's read_committed consumer: planning
ends "latest" at each partition's last stable offset (ListOffsets with isolation level 1),
and each chunk is located with ``locate_committed``, whose aborted transactions
``read_committed.committed_batches`` drops together with the markers.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence, Union

import numpy as np
import pyarrow as pa
import ray
from ray.data import Dataset
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from logan_ray._ray import ACTOR_GONE, get
from logan_ray.common.errors import NotRunningError, PartitionHibernatedError
from logan_ray.read_committed import committed_batches
from logan_ray.storage.batch_header import iter_headers
from logan_ray.storage.errors import CorruptRecordError, OffsetOutOfRangeError
from logan_ray.storage.slice_reader import read_slices

from .arrow_records import COLUMNS, RECORD_SCHEMA, decode_to_table
from .values import check_format, decode_values, expand, settle_type

OffsetSpec = Union[str, int, Mapping[str, int], _dt.datetime]

READ_CHUNK_BYTES = 16 << 20  # bytes per locate/fetch call and per output block (before decoding)
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
DEFAULT_RECORDS_PER_TASK = 2_000_000  # larger partitions are split into several read tasks
SAMPLE_BYTES = 256 << 10  # per partition, to infer the value type of json/msgpack values
NODE_ID_LABEL = "ray.io/node-id"  # Ray's built-in label holding each node's id


@dataclass(frozen=True)
class ReadRange:
    """One read task's work: offsets [start, end) of one partition."""

    topic: str
    partition: int
    actor: Any
    node_id: str
    start: int
    end: int

    @property
    def records(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class ReadOptions:
    columns: tuple[str, ...]
    value_format: str | None
    value_type: pa.DataType | None
    expand_value: bool
    verify_crc: bool
    chunk_bytes: int = READ_CHUNK_BYTES
    read_committed: bool = False


# ------------------------------------------------------------------ planning


def timestamp_ms(spec: Any) -> int | None:
    """ms since epoch for ``{"timestamp": ms}`` or a datetime (naive = UTC, as ray.data.read_kafka)."""
    if isinstance(spec, _dt.datetime):
        if spec.tzinfo is None:
            spec = spec.replace(tzinfo=_dt.timezone.utc)
        return int(spec.timestamp() * 1000)
    if isinstance(spec, Mapping) and set(spec) == {"timestamp"}:
        ts = spec["timestamp"]
        return timestamp_ms(ts) if isinstance(ts, _dt.datetime) else int(ts)
    return None


def _spec_for(spec: Any, partition: int, default: str) -> Any:
    """A per-partition dict ({partition: spec}) picks this partition's spec."""
    if isinstance(spec, Mapping) and timestamp_ms(spec) is None:
        return spec.get(partition, spec.get(str(partition), default))
    return spec


def _check_spec(spec: Any, what: str) -> None:
    if spec in ("earliest", "latest") or timestamp_ms(spec) is not None:
        return
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        if spec < 0:
            raise ValueError(f"{what} offset must be >= 0, got {spec}")
        return
    raise ValueError(f"{what} must be 'earliest', 'latest', an offset, {{'timestamp': ms}} or a datetime; got {spec!r}")


def plan_ranges(client, topic: str, start: Any = "earliest", end: Any = "latest",
                partitions: Sequence[int] | None = None,
                records_per_task: int | None = DEFAULT_RECORDS_PER_TASK,
                read_committed: bool = False) -> list[ReadRange]:
    """Resolve start/end for every partition now and cut the result into read ranges; with
    ``read_committed`` none reaches past a partition's last stable offset."""
    routes = client.partitions(topic, refresh=True)
    offsets = client.partition_offsets(topic)
    chosen = list(range(len(routes))) if partitions is None else list(partitions)
    for p in chosen:
        if not 0 <= p < len(routes):
            from logan_ray.errors import UnknownPartitionError

            raise UnknownPartitionError(f"topic {topic!r} has no partition {p} (it has {len(routes)})")

    specs = {p: (_spec_for(start, p, "earliest"), _spec_for(end, p, "latest")) for p in chosen}
    lookups: dict[tuple[int, int], Any] = {}
    for p, (s, e) in specs.items():
        _check_spec(s, "start")
        _check_spec(e, "end")
        for i, spec in enumerate((s, e)):
            ts = timestamp_ms(spec)
            if ts is not None:
                lookups[(p, i)] = client.partition_actor(topic, p).offset_for_timestamp.remote(ts)
    found = dict(zip(lookups, get(list(lookups.values())))) if lookups else {}

    ranges: list[ReadRange] = []
    for p in chosen:
        log_start, log_end = offsets[p]
        bounds = []
        for i, spec in enumerate(specs[p]):
            if (p, i) in found:
                hit = found[(p, i)]
                bounds.append(log_end if hit is None else hit[0])  # nothing at/after ts: the end
            elif spec == "earliest":
                bounds.append(log_start)
            elif spec == "latest":
                bounds.append(log_end)
            else:
                bounds.append(min(max(int(spec), log_start), log_end))
        lo, hi = bounds
        if hi <= lo:
            continue
        if read_committed:
            lso = _last_stable_offset(client, topic, p)
            lo, hi = min(lo, lso), min(hi, lso)
            if hi <= lo:
                continue
        step = hi - lo if not records_per_task else records_per_task
        pieces = max(1, -(-(hi - lo) // step))
        cuts = np.linspace(lo, hi, pieces + 1).astype(np.int64).tolist()
        actor, node_id = client.partition_route(topic, p)  # starts only partitions that have records to read
        ranges.extend(ReadRange(topic, p, actor, node_id, a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a)
    return ranges


def _last_stable_offset(client, topic: str, partition: int) -> int:
    """The partition's last stable offset now: where a read_committed "latest" ends."""
    found = get(client.partition_actor(topic, partition).list_offset.remote(-1, -1, True))
    return found[0]


def infer_value_type(ranges: Sequence[ReadRange], fmt: str, read_committed: bool = False) -> pa.DataType:
    """Decode the first records of every range to agree on one value type for all blocks.

    Arrow's JSON reader infers a type per call; blocks read independently would
    otherwise disagree (an int field here, a missing one there) and a Dataset or
    a Spark DataFrame needs one schema.
    """
    if read_committed:  # only committed records: an aborted one must not shape the type
        chunks = [_read_committed_chunk(r, r.start, SAMPLE_BYTES, False)[0] for r in ranges]
    else:
        chunks = [data for data, _hw, _ls in get([r.actor.fetch.remote(r.start, SAMPLE_BYTES) for r in ranges])]
    samples = []
    for r, data in zip(ranges, chunks):
        t = decode_to_table(data, topic=r.topic, partition=r.partition, start=r.start, end=r.end, columns=["value"])
        samples.append(t.column("value").combine_chunks().cast(pa.binary()))
    sample = pa.concat_arrays(samples) if samples else pa.array([], pa.binary())
    sample = sample.filter(sample.is_valid())
    if len(sample) == 0:
        return pa.string()
    return settle_type(decode_values(sample, fmt).type)


def output_schema(opts: ReadOptions) -> pa.Schema:
    fields = []
    for name in opts.columns:
        f = RECORD_SCHEMA.field(name)
        if name == "value" and opts.value_format is not None:
            t = pa.string() if opts.value_format == "str" else opts.value_type
            if opts.expand_value and pa.types.is_struct(t):
                fields.extend(pa.field(c.name, c.type) for c in t)
                continue
            f = pa.field("value", t)
        fields.append(f)
    return pa.schema(fields)


# -------------------------------------------------------------------- reading


def _next_offset(data: bytes) -> int | None:
    last = None
    for _pos, h in iter_headers(data):
        last = h
    return None if last is None else last.next_offset


def read_range(rng: ReadRange, opts: ReadOptions) -> Iterator[pa.Table]:
    """Yield the range's records as Arrow tables of at most ``chunk_bytes`` of batches each."""
    local = ray.get_runtime_context().get_node_id() == rng.node_id
    raw_columns = list(opts.columns)
    offset = rng.start
    while offset < rng.end:
        try:
            read = _read_committed_chunk if opts.read_committed else _read_plain_chunk
            try:
                data, nxt = read(rng, offset, opts.chunk_bytes, local)
            except (*ACTOR_GONE, NotRunningError, PartitionHibernatedError):
                rng = _reresolved(rng)  # the partition hibernated (or restarted) since planning
                data, nxt = read(rng, offset, opts.chunk_bytes, local)
            if nxt is None or nxt <= offset:
                return  # nothing more below the planned end (e.g. records deleted meanwhile)
            if not data:  # only aborted records and markers in this chunk: read on
                offset = nxt
                continue
            try:
                table = decode_to_table(data, topic=rng.topic, partition=rng.partition, start=offset,
                                        end=rng.end, columns=raw_columns, verify_crc=opts.verify_crc)
            except CorruptRecordError:
                if not local:
                    raise
                local = False  # the file changed under us (compaction): ask the actor for the bytes
                continue
        except OffsetOutOfRangeError:
            log_start, _ = get(rng.actor.offsets.remote())
            if offset >= log_start:
                raise
            offset = log_start  # retention/DeleteRecords removed the head since planning
            continue
        offset = nxt
        yield finish_table(table, opts)


def _reresolved(rng: ReadRange) -> ReadRange:
    """The range with the partition's current actor (the router starts it if it hibernated)."""
    from logan_ray.actors.names import NAMESPACE, ROUTER_NAME

    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    handle, _hibernated = get(router.reactivate.remote(rng.topic, rng.partition, rng.actor._actor_id.hex()))
    return dataclasses.replace(rng, actor=handle)


def _read_plain_chunk(rng: ReadRange, offset: int, max_bytes: int, local: bool) -> tuple[bytes, int | None]:
    """(batches from ``offset``, the offset after them)."""
    data = _read_chunk(rng, offset, max_bytes, local)
    return data, (_next_offset(data) if data else None)


def _read_committed_chunk(rng: ReadRange, offset: int, max_bytes: int, local: bool) -> tuple[bytes, int | None]:
    """(the committed batches from ``offset`` below the last stable offset, the offset after the
    last batch looked at): aborted transactions' batches and markers are dropped, as Kafka's
    read_committed consumer does."""
    slices, _hw, _start, lso, aborted = get(rng.actor.locate_committed.remote(offset, max_bytes))
    if not slices:
        return b"", None
    data = read_slices(slices) if local else None
    if data is None:  # not this node's files (or a segment went away): the bytes by Ray
        data, _hw, _start = get(rng.actor.fetch.remote(offset, max_bytes))
    kept, nxt = committed_batches(data, aborted, lso)
    return kept, (nxt if nxt >= 0 else None)


def _read_chunk(rng: ReadRange, offset: int, max_bytes: int, local: bool) -> bytes:
    if local:
        slices, _hw, _ls = get(rng.actor.locate.remote(offset, max_bytes, 0, 1, rng.end))
        if not slices:  # the next batch straddles the planned end: locate it alone
            slices, _hw, _ls = get(rng.actor.locate.remote(offset, 1))
        if not slices:
            return b""
        data = read_slices(slices)
        if data is not None:
            return data
    data, _hw, _ls = get(rng.actor.fetch.remote(offset, max_bytes))
    return data


def finish_table(table: pa.Table, opts: ReadOptions) -> pa.Table:
    """Apply the value format (and expansion) to a decoded records table."""
    if opts.value_format is None or "value" not in table.column_names:
        return table
    idx = table.schema.get_field_index("value")
    col = table.column(idx)
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    decoded = decode_values(arr, opts.value_format, opts.value_type)
    table = table.set_column(idx, "value", decoded)
    if opts.expand_value and pa.types.is_struct(decoded.type):
        table = expand(table, "value")
    return table


class TopicDatasource(Datasource):
    """The read ranges of one node (one read operator)."""

    def __init__(self, ranges: Sequence[ReadRange], opts: ReadOptions, bytes_per_record: float) -> None:
        super().__init__()
        self._ranges = list(ranges)
        self._opts = opts
        self._bytes_per_record = bytes_per_record

    def get_name(self) -> str:
        return "LoganTopic"

    def estimate_inmemory_data_size(self) -> int | None:
        return int(sum(r.records for r in self._ranges) * self._bytes_per_record)

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                       data_context: Any = None) -> list[ReadTask]:
        # One task per planned range regardless of ``parallelism``: ranges are
        # already cut to a sensible size, and Ray's default (>= 200 blocks)
        # would shred small partitions into tiny reads.
        schema = output_schema(self._opts)
        tasks = []
        for rng in self._ranges:
            meta = BlockMetadata(num_rows=None, size_bytes=int(rng.records * self._bytes_per_record),
                                 input_files=None, exec_stats=None)
            tasks.append(ReadTask(_reader(rng, self._opts), meta, schema=schema,
                                  per_task_row_limit=per_task_row_limit))
        return tasks


def _reader(rng: ReadRange, opts: ReadOptions):
    def read() -> Iterator[pa.Table]:
        yield from read_range(rng, opts)

    return read


# ----------------------------------------------------------------------- API


def read_topic(
    topic: str,
    start: OffsetSpec | Mapping[int, OffsetSpec] = "earliest",
    end: OffsetSpec | Mapping[int, OffsetSpec] = "latest",
    *,
    partitions: Sequence[int] | None = None,
    value_format: str | None = None,
    value_type: pa.DataType | pa.Schema | None = None,
    expand_value: bool = False,
    columns: Sequence[str] | None = None,
    records_per_task: int | None = DEFAULT_RECORDS_PER_TASK,
    verify_crc: bool = True,
    client: Any = None,
    num_cpus: float = 1,
    isolation_level: str = "read_uncommitted",
) -> Dataset:
    """A bounded Ray Dataset of a topic's records.

    ``start``/``end``: "earliest", "latest" (the end offset now), an offset
    (``end`` exclusive), ``{"timestamp": ms}`` or a datetime (the first offset
    whose timestamp is >= it, as Kafka's ListOffsets), or a dict
    ``{partition: spec}``. Rows: topic, partition, offset, timestamp (ms),
    timestamp_type, key, value, headers (list of {key, value}); ``columns``
    picks some. ``value_format``: "str", "json" or "msgpack" decode values
    into typed columns; ``value_type`` (an Arrow type, or a schema for
    objects) fixes their type, otherwise it is inferred from the first records
    of each range. ``expand_value`` turns object fields into top-level columns.
    ``isolation_level``: "read_uncommitted" (the default, as Kafka's consumer) reads every
    record; "read_committed" only those of committed transactions (and non-transactional
    ones), and "latest" is then each partition's last stable offset, as Kafka's ListOffsets.
    """
    if isolation_level not in ISOLATION_LEVELS:
        raise ValueError(f"isolation_level must be one of {ISOLATION_LEVELS}, got {isolation_level!r}")
    read_committed = isolation_level == "read_committed"
    if client is None:
        import logan_ray

        client = logan_ray.connect()
    value_format = check_format(value_format)
    cols = tuple(COLUMNS if columns is None else columns)
    unknown = set(cols) - set(COLUMNS)
    if unknown:
        raise ValueError(f"unknown columns {sorted(unknown)}; choose from {list(COLUMNS)}")
    if isinstance(value_type, pa.Schema):
        value_type = pa.struct(list(value_type))
    if expand_value and value_format not in ("json", "msgpack"):
        raise ValueError("expand_value needs value_format='json' or 'msgpack'")

    ranges = plan_ranges(client, topic, start, end, partitions, records_per_task, read_committed)
    if value_format in ("json", "msgpack") and value_type is None and "value" in cols:
        value_type = infer_value_type(ranges, value_format, read_committed)
    opts = ReadOptions(cols, value_format, value_type, expand_value, verify_crc, read_committed=read_committed)
    if not ranges:
        return ray.data.from_arrow(output_schema(opts).empty_table())

    bytes_per_record = _bytes_per_record(client, topic, ranges)
    by_node: dict[str, list[ReadRange]] = {}
    for r in ranges:
        by_node.setdefault(r.node_id, []).append(r)
    datasets = []
    for node_id, node_ranges in by_node.items():
        # Prefer the node holding the files; any node will do if it cannot take the task.
        datasets.append(ray.data.read_datasource(
            TopicDatasource(node_ranges, opts, bytes_per_record),
            num_cpus=num_cpus,
            # one output stream per range: Ray would otherwise split every
            # task's output to reach its default 200-block parallelism, and
            # each extra block costs a task downstream (e.g. one Spark task).
            override_num_blocks=len(node_ranges),
            label_selector={NODE_ID_LABEL: node_id},
            fallback_strategy=[{"label_selector": {}}],
        ))
    return datasets[0] if len(datasets) == 1 else datasets[0].union(*datasets[1:])


def _bytes_per_record(client, topic: str, ranges: Sequence[ReadRange]) -> float:
    """Average stored bytes per record of the partitions read, for Ray Data's size estimates."""
    parts = {r.partition: r.actor for r in ranges}
    stats = get([a.stats.remote() for a in parts.values()])
    size = sum(s.get("size_bytes", 0) for s in stats)
    count = sum(max(0, s.get("log_end_offset", 0) - s.get("log_start_offset", 0)) for s in stats)
    return max(1.0, size / count) if count else 100.0
