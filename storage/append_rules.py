"""What a client's batch must obey beyond framing and checksums, checked before it is written.

The partition actor applies these to every append that does not come from the
broker itself; the log (``log.py``) stays able to hold any valid batch, as logs
written before these rules, or a topic switched to compaction later, may.

Kafka's LogValidator refuses, per batch: control batches from clients (only the
transaction coordinator writes markers), and records without a key on a
compacted topic (the cleaner could never compact them; Kafka answers
INVALID_RECORD at produce time instead of dropping them later). Transactional
batches are refused too until logan-ray has a transaction coordinator:
accepting them would expose records of transactions nobody can commit or
abort. The storage underneath is ready (markers, ``.txnindex``, the LSO: see
:mod:`.log_txn`); the partition turns the refusal off with
``transactions=True`` once a coordinator can end what it accepts.

On CreateTime topics with ``message.timestamp.before.max.ms`` / ``after.max.ms``
(or the older ``difference.max.ms``) set, every record's timestamp must lie in
the window around the broker's clock, else INVALID_TIMESTAMP, as Kafka's
LogValidator checks it.

Only compacted topics and topics with a timestamp window pay for looking inside a
batch (decompressing it, bounded by ``compression.MAX_DECOMPRESSED_BYTES``); other
topics are checked from the batch header alone.
"""
from __future__ import annotations

from .batch_header import BatchHeader, Buffer
from .errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError, InvalidTxnStateError
from .raw_records import iter_batch_records_raw


def check_client_batch(buf: Buffer, pos: int, h: BatchHeader, compacted: bool, where: str = "batch",
                       window: tuple[int, int] | None = None, *, transactions: bool = False) -> None:
    """Raise the error Kafka answers for a batch a client may not append; ``h`` is already validated.

    ``where`` names the batch in the message ("batch 2 at byte 4096 of 9000"); ``window`` is
    the topic's :meth:`TopicConfig.timestamp_window` at append time, if any. ``transactions``
    accepts transactional batches (only where a transaction coordinator exists).
    """
    if h.is_control:
        raise InvalidRecordError(f"{where}: clients are not allowed to write control records")
    if h.is_transactional and not transactions:
        raise InvalidTxnStateError(
            f"{where}: transactional batches are refused: logan-ray does not support transactions yet")
    if not compacted and window is None:
        return
    try:
        records = iter_batch_records_raw(buf, pos, verify_crc=False)
    except CorruptRecordError as e:
        raise CorruptRecordError(f"{where}: {e}") from None
    keyless: list[tuple[int, str]] = []
    for i, r in enumerate(records):
        if compacted and r.key is None:
            keyless.append((i, "Compacted topic cannot accept message without key"))
        if window is not None and not window[0] <= r.timestamp <= window[1]:
            raise InvalidTimestampError(
                f"{where}: timestamp {r.timestamp} of the record at offset delta {r.offset - h.base_offset} "
                f"is out of range: it must be within [{window[0]}, {window[1]}] "
                "(message.timestamp.before.max.ms / after.max.ms)")
    if keyless:
        raise InvalidRecordError(
            f"{where}: compacted topic cannot accept a record without a key "
            f"({len(keyless)} such, the first is record {keyless[0][0]} of the batch)", tuple(keyless))
