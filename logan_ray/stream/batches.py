"""One record batch through the user's function: outputs, dead letters, and the offsets to commit.

Kept apart from the worker actor (no Ray here) so the fallback that isolates a poison
record can be read and tested on its own. Why record by record after a failure: a
batch is the unit the function sees, but the record is the unit that can be bad; the
good records of a failed batch must still reach the output, once, and only the bad ones
go to the dead-letter topic, each with where it came from and why it failed.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa

#: Header names a dead-lettered record carries (after the record's own headers).
DLQ_TOPIC = "logan.stream.source.topic"
DLQ_PARTITION = "logan.stream.source.partition"
DLQ_OFFSET = "logan.stream.source.offset"
DLQ_ERROR = "logan.stream.error"

#: The user's function: one Arrow record batch of the input columns (topic, partition, offset,
#: timestamp, timestamp_type, key, value, headers) in; a table or record batch with a ``value``
#: column (and optionally ``key``) out, or None to produce nothing.
BatchFunction = Callable[[pa.RecordBatch], "pa.RecordBatch | pa.Table | None"]

_ERROR_BYTES = 4096  # a traceback can be long; headers are small by convention


@dataclass
class DeadLetter:
    """A record the function failed on, ready for the dead-letter topic."""

    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


@dataclass
class Outcome:
    """What a batch produced: output tables to write, dead letters, and the input rows it consumed."""

    outputs: list[pa.Table] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    rows: int = 0

    @property
    def output_rows(self) -> int:
        return sum(t.num_rows for t in self.outputs)


class FunctionFailedError(Exception):
    """The function raised on a record and the pipeline has no dead-letter topic to put it in."""


def _as_table(result: Any, want_output: bool) -> pa.Table | None:
    """The function's result as a table, checked; raising here counts as the function failing."""
    if result is None:
        return None
    if isinstance(result, pa.RecordBatch):
        result = pa.Table.from_batches([result])
    if not isinstance(result, pa.Table):
        raise TypeError(f"the stream function must return a pyarrow RecordBatch, Table or None, "
                        f"not {type(result).__name__}")
    if want_output and result.num_rows and "value" not in result.column_names:
        raise ValueError(f"the stream function's output needs a 'value' column (has {result.column_names})")
    return result


def _error_text(error: BaseException) -> bytes:
    text = "".join(traceback.format_exception_only(type(error), error)).strip()
    return text.encode("utf-8", "replace")[:_ERROR_BYTES]


def dead_letter(batch: pa.RecordBatch, row: int, error: BaseException) -> DeadLetter:
    """Row ``row`` of ``batch`` as a dead letter: its key, value and headers, plus where it came from and why."""
    record = batch.slice(row, 1).to_pylist()[0]
    headers = [(h["key"], h["value"]) for h in record.get("headers") or ()]
    headers += [(DLQ_TOPIC, str(record["topic"]).encode()), (DLQ_PARTITION, str(record["partition"]).encode()),
                (DLQ_OFFSET, str(record["offset"]).encode()), (DLQ_ERROR, _error_text(error))]
    return DeadLetter(record.get("key"), record.get("value"), headers)


def apply(fn: BatchFunction, batch: pa.RecordBatch, *, want_output: bool, dead_letters: bool) -> Outcome:
    """Run ``fn`` over ``batch``; if it raises, over each record alone, collecting the failures.

    Without ``dead_letters`` a failing record raises FunctionFailedError (naming its offset):
    dropping it silently would lose a record, which at-least-once promises never to do.
    """
    out = Outcome(rows=batch.num_rows)
    try:
        table = _as_table(fn(batch), want_output)
    except Exception:
        pass
    else:
        if table is not None and table.num_rows:
            out.outputs.append(table)
        return out
    for row in range(batch.num_rows):
        one = batch.slice(row, 1)
        try:
            table = _as_table(fn(one), want_output)
        except Exception as e:
            if not dead_letters:
                place = one.to_pylist()[0]
                raise FunctionFailedError(f"the stream function failed on {place['topic']}-{place['partition']} "
                                          f"offset {place['offset']}: {e!r}") from e
            out.dead_letters.append(dead_letter(batch, row, e))
            continue
        if table is not None and table.num_rows:
            out.outputs.append(table)
    return out


def next_offsets(table: pa.Table) -> dict[tuple[str, int], int]:
    """{(topic, partition): last offset + 1} of the records in ``table``: what a commit of them stores."""
    if table.num_rows == 0:
        return {}
    last = table.group_by(["topic", "partition"]).aggregate([("offset", "max")])
    return {(t, p): o + 1 for t, p, o in zip(last.column("topic").to_pylist(), last.column("partition").to_pylist(),
                                             last.column("offset_max").to_pylist())}
