"""What a client's batch must obey beyond framing and checksums, checked before it is written.

The partition actor applies these to every append that does not come from the
broker itself; the log (``log.py``) stays able to hold any valid batch, as logs
written before these rules, or a topic switched to compaction later, may.

Kafka's LogValidator refuses, per batch: control batches from clients (only the
transaction coordinator writes markers), and records without a key on a
compacted topic (the cleaner could never compact them; Kafka answers
INVALID_RECORD at produce time instead of dropping them later). Transactional
batches are refused too until logan-ray has transactions: accepting them would
expose records of transactions nobody can commit or abort.

Only compacted topics pay for looking inside a batch (decompressing it, bounded
by ``compression.MAX_DECOMPRESSED_BYTES``); other topics are checked from the
batch header alone.
"""
from __future__ import annotations

from .batch_header import BatchHeader, Buffer
from .errors import CorruptRecordError, InvalidRecordError, InvalidTxnStateError
from .records import iter_batch_records_raw


def check_client_batch(buf: Buffer, pos: int, h: BatchHeader, compacted: bool, where: str = "batch") -> None:
    """Raise the error Kafka answers for a batch a client may not append; ``h`` is already validated.

    ``where`` names the batch in the message ("batch 2 at byte 4096 of 9000").
    """
    if h.is_control:
        raise InvalidRecordError(f"{where}: clients are not allowed to write control records")
    if h.is_transactional:
        raise InvalidTxnStateError(
            f"{where}: transactional batches are refused: logan-ray does not support transactions yet")
    if compacted:
        try:
            records = iter_batch_records_raw(buf, pos, verify_crc=False)
        except CorruptRecordError as e:
            raise CorruptRecordError(f"{where}: {e}") from None
        for r in records:
            if r.key is None:
                raise InvalidRecordError(
                    f"{where}: compacted topic cannot accept a record without a key "
                    f"(offset delta {r.offset - h.base_offset})")
