"""Consumer groups: the classic group protocol as plain Python (no Ray, no I/O).

- :mod:`.consumer_protocol` — the "consumer" embedded protocol (subscription and
  assignment bytes), byte-compatible with Kafka clients, so Python members and
  Kafka clients can share one group.
- :mod:`.assignors` — client-side range and round-robin assignors.
- the group coordinator's state machine, driven by an injectable clock so tests
  control time, one module per part: :mod:`.group` and :mod:`.member` (what it
  holds), :mod:`.timers`, :mod:`.core` (settings and shared state),
  :mod:`.rebalance` (join, sync, heartbeat, leave), :mod:`.offsets` (commit,
  fetch, delete) and :mod:`.coordinator` (the whole ``Coordinator``: admin and replay).
- :mod:`.offsets_log` — how commits and group metadata are stored as records in
  the internal ``__consumer_offsets`` topic, and how they are replayed.

The Ray actor that hosts the state machine is ``logan_ray.actors.group_coordinator``.
"""
from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"
