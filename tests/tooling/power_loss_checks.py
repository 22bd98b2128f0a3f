"""What must hold after a power loss, whatever path the records took (shared by the power-loss tests)."""
from __future__ import annotations


def check_recovered(recovered: list[tuple[int, bytes]], acked: dict[int, tuple[bytes, str]]) -> int:
    """Assert the Kafka durability contract; returns the recovered log end.

    ``recovered``: (offset, value) of every record read back after the crash.
    ``acked``: offset -> (value, "all" or "1") of every acknowledged record.
    - every acks=all record is there, at its offset, with its value;
    - every recovered record at an acknowledged offset is the one acknowledged there
      (no offset was given to two records);
    - acknowledged acks=1 records are missing only from the tail (offsets at or past the
      recovered log end), never from the middle;
    - the power loss really dropped something (else this proves nothing).
    """
    offsets = [o for o, _ in recovered]
    assert offsets == list(range(len(offsets))), "recovered offsets are not contiguous from 0"
    end = len(offsets)
    got = dict(recovered)
    for offset, (value, kind) in acked.items():
        if offset < end:
            assert got[offset] == value, f"offset {offset} holds another record than the one acknowledged"
        else:
            assert kind == "1", f"acks=all record at offset {offset} lost (recovered log end {end})"
    durable = [o for o, (_, kind) in acked.items() if kind == "all"]
    assert durable and end > max(durable)
    lost = [o for o in acked if o >= end]
    assert lost, "nothing unsynced was lost: the power loss did not drop writes"
    return end
