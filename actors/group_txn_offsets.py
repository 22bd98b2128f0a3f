"""TxnOffsetCommit for the group coordinator: offsets that take effect only if their transaction commits.

A consume-transform-produce loop sends its consumer's offsets inside the producer's
transaction (``send_offsets_to_transaction``): the group coordinator checks them as
an OffsetCommit and keeps them aside, by producer id, until the transaction
coordinator writes the transaction's marker into the group's ``__consumer_offsets``
partition and calls :meth:`TxnOffsets.complete_txn_offsets`: a commit appends and
applies them (acks=all, as any commit), an abort drops them. So an aborted
transaction never moves a group's offsets.

Pending offsets live in the coordinator's memory only (Kafka writes them to the log
as transactional records): if the group coordinator restarts while the transaction is
open, a later commit applies nothing and the consumer re-reads from the last
committed offsets, which is safe for exactly-once (the output of that transaction is
committed, so re-processing produces duplicates only for read_uncommitted readers).
"""
from __future__ import annotations

from typing import Any

from logan_ray.groups import offsets_log
from logan_ray.protocol import errors as E


class TxnOffsets:
    """Mixed into GroupCoordinatorActor (uses its ``_own``, ``_commit_parts``, ``coord``, ``_write_records``)."""

    _txn_pending: dict[int, list[tuple[str, list]]]

    def _pending(self) -> dict[int, list[tuple[str, list]]]:
        if not hasattr(self, "_txn_pending"):
            self._txn_pending = {}
        return self._txn_pending

    async def txn_offset_commit(self: Any, body: dict, version: int = 3) -> dict:
        """TxnOffsetCommit: checked like OffsetCommit, held until the transaction's marker."""
        gid = body["group_id"]
        await self._own(gid)
        parts, unknown = await self._commit_parts(body)
        errors, accepted = self.coord.validate_commit(gid, body.get("generation_id", -1),
                                                      body.get("member_id") or "", body.get("group_instance_id"),
                                                      parts, unknown, transactional=True)
        if accepted:
            TxnOffsets._pending(self).setdefault(body["producer_id"], []).append((gid, accepted))
        topics: dict[str, list[dict]] = {}
        for t, p, *_ in parts:
            topics.setdefault(t, []).append({"partition_index": p, "error_code": errors.get((t, p), E.NONE)})
        return {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

    async def complete_txn_offsets(self: Any, partition: int, producer_id: int, commit: bool) -> int:
        """The marker of ``producer_id``'s transaction is in ``__consumer_offsets``-``partition``:
        apply (commit) or drop (abort) its pending offsets of that partition's groups; returns how many."""
        pending = TxnOffsets._pending(self)
        held = pending.pop(producer_id, [])
        mine = [(gid, acc) for gid, acc in held if self._partition(gid) == partition]
        rest = [(gid, acc) for gid, acc in held if self._partition(gid) != partition]
        if rest:
            pending[producer_id] = rest
        if not commit or not mine:
            return 0
        records = [(gid, offsets_log.offset_key(gid, t, p), offsets_log.encode_offset(e))
                   for gid, acc in mine for t, p, e in acc]
        try:
            await self._write_records(records)
        except BaseException:
            pending.setdefault(producer_id, []).extend(mine)  # the marker is retried, and these with it
            raise
        for gid, acc in mine:
            self.coord.apply_commit(gid, acc)
        return len(records)
