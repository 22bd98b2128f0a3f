"""TxnOffsetCommit for the group coordinator: offsets that take effect only if their transaction commits.

A consume-transform-produce loop sends its consumer's offsets inside the producer's
transaction (``send_offsets_to_transaction``): the group coordinator checks them as
an OffsetCommit and keeps them aside, by producer id, until the transaction
coordinator writes the transaction's marker into the group's ``__consumer_offsets``
partition and calls the coordinator's ``complete_txn_offsets`` (:meth:`TxnOffsets.complete`): a commit appends and
applies them (acks=all, as any commit), an abort drops them. So an aborted
transaction never moves a group's offsets.

Pending offsets live in the coordinator's memory only (Kafka writes them to the log
as transactional records): if the group coordinator restarts while the transaction is
open, a later commit applies nothing and the consumer re-reads from the last
committed offsets, which is safe for exactly-once (the output of that transaction is
committed, so re-processing produces duplicates only for read_uncommitted readers).
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable

from logan_ray.groups import offsets_log
from logan_ray.protocol import errors as E

#: (group id, the accepted offsets: [(topic, partition, entry)]) held for one producer id
Held = list[tuple[str, list]]


class TxnOffsets:
    """The offsets transactions hold, by producer id; owned by the group coordinator actor, which
    serves its TxnOffsetCommit through :meth:`commit_request` and its markers through :meth:`complete`.

    What it needs of the coordinator is passed in: ``coord`` (the group state machine, which checks
    and applies commits), ``own`` (serve a group here, replaying its partition first),
    ``commit_parts`` (a request's partitions and the unknown ones), ``partition_of`` (a group's
    ``__consumer_offsets`` partition) and ``write`` (append records to it, acks=all).
    """

    def __init__(self, coord: Any, own: Callable[[str], Awaitable[Any]],
                 commit_parts: Callable[[dict], Awaitable[tuple[list[tuple], set[tuple[str, int]]]]],
                 partition_of: Callable[[str], int],
                 write: Callable[[list[tuple[str, bytes, bytes | None]]], Awaitable[None]]) -> None:
        self._coord = coord
        self._own = own
        self._commit_parts = commit_parts
        self._partition_of = partition_of
        self._write = write
        self._pending: dict[int, Held] = {}

    def held(self, producer_id: int) -> Held:
        """What ``producer_id``'s open transaction holds (a copy), for tests and views."""
        return list(self._pending.get(producer_id, ()))

    async def commit_request(self, body: dict) -> dict:
        """TxnOffsetCommit: checked like OffsetCommit, held until the transaction's marker."""
        gid = body["group_id"]
        await self._own(gid)
        parts, unknown = await self._commit_parts(body)
        errors, accepted = self._coord.validate_commit(gid, body.get("generation_id", -1),
                                                       body.get("member_id") or "", body.get("group_instance_id"),
                                                       parts, unknown, transactional=True)
        if accepted:
            self._pending.setdefault(body["producer_id"], []).append((gid, accepted))
        topics: dict[str, list[dict]] = {}
        for t, p, *_ in parts:
            topics.setdefault(t, []).append({"partition_index": p, "error_code": errors.get((t, p), E.NONE)})
        return {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

    async def complete(self, partition: int, producer_id: int, commit: bool) -> int:
        """The marker of ``producer_id``'s transaction is in ``__consumer_offsets``-``partition``:
        apply (commit) or drop (abort) its pending offsets of that partition's groups; returns how many."""
        held = self._pending.pop(producer_id, [])
        mine = [(gid, acc) for gid, acc in held if self._partition_of(gid) == partition]
        rest = [(gid, acc) for gid, acc in held if self._partition_of(gid) != partition]
        if rest:
            self._pending[producer_id] = rest
        if not commit or not mine:
            return 0
        records = [(gid, offsets_log.offset_key(gid, t, p), offsets_log.encode_offset(e))
                   for gid, acc in mine for t, p, e in acc]
        try:
            await self._write(records)
        except BaseException:
            self._pending.setdefault(producer_id, []).extend(mine)  # the marker is retried, and these with it
            raise
        for gid, acc in mine:
            self._coord.apply_commit(gid, acc)
        return len(records)
