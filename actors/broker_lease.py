"""Broker sessions: each node's gateway heartbeats the controller (the router), as a KRaft broker does.

Kafka's model (KIP-631): a broker sends a heartbeat every ``broker.heartbeat.interval.ms``
and the controller fences it when none arrived for ``broker.session.timeout.ms``; a
fenced broker leads nothing. Here both sides keep time with the monotonic clock and
the lease is what makes fencing safe without the zombie's cooperation:

* The controller (:class:`BrokerSessions`) counts a node's session from the moment a
  heartbeat *arrived*; it may elect other leaders for that node's partitions only once
  ``session_timeout_ms`` passed without one.
* The broker (:class:`BrokerLease`) counts its lease from the moment it *sent* the
  heartbeat that was answered, and stops acknowledging produce ``lease_ms`` =
  ``session_timeout_ms - heartbeat_interval_ms`` after it. Sending comes before arriving,
  and the lease is shorter than the session, so the broker stops before the controller may
  elect: there is never a moment with two acknowledging leaders (a stopped process, a
  lost network, a slow router only shorten the lease, never stretch it). ``acks=all`` writes
  to a partition whose ISR holds another replica need no lease: the high watermark keeps a
  replaced leader from acknowledging them, as in Kafka (``PartitionActor._refuse_if_fenced``).

A node that heartbeats again after being fenced gets a new broker epoch (Kafka's
re-registration): everything its gateway knew under the old one (routes, a lease) is void.
A node Ray declares dead is different: Ray's health check fails when the raylet stops,
while the node's gateway and partition actors may still run and reach the router. Its
heartbeats are refused from then on (it never registers again under that node id), and
what it leads is replaced only once its last lease has surely run out.

A controller that hears from nobody cannot tell dead brokers from its own trouble (an overloaded
machine that delays every Ray call, its own event loop starved): time in which *no* heartbeat
arrived for more than two heartbeat intervals does not count against any session (the
spirit of KAFKA-15019 and KAFKA-17793, where an overloaded KRaft controller stopped fencing
live brokers). Fencing then only took partitions offline with nobody left to elect: on two
loaded cores every broker was fenced together a dozen times a minute. Delaying a fence never
breaks the lease rule above; a broker that dies while the others beat is fenced on time.
Pure bookkeeping: no Ray, no I/O, so the rules are tested as such (tests/actors/test_broker_lease.py).
"""
from __future__ import annotations

import time

#: Kafka's broker.heartbeat.interval.ms is 2000 and broker.session.timeout.ms 9000; a Ray node's
#: gateway is one process on a local network, so both are shorter here (failover <= 5 s).
DEFAULT_BROKER_HEARTBEAT_INTERVAL_MS = 500
DEFAULT_BROKER_SESSION_TIMEOUT_MS = 3000
#: how long after its first call a router Ray restarted fences nobody: at its start the machine is busiest
#: (a process start, every gateway's queued calls at once), and a gateway whose heartbeats were late then
#: was fenced, dropped its routes and had its leaderships moved (write gaps of 30-40 s after router
#: restarts on two loaded cores). Delaying a fence never breaks the lease rule; the price is that a node
#: dying while the router restarts is fenced up to this much later.
CONTROLLER_RESTART_GRACE_MS = 10_000


def lease_ms(session_timeout_ms: int, heartbeat_interval_ms: int) -> int:
    """How long a broker may acknowledge after sending an answered heartbeat: shorter than the session."""
    if heartbeat_interval_ms <= 0 or session_timeout_ms <= heartbeat_interval_ms:
        raise ValueError(f"broker.session.timeout.ms ({session_timeout_ms}) must be above "
                         f"broker.heartbeat.interval.ms ({heartbeat_interval_ms}) > 0")
    return session_timeout_ms - heartbeat_interval_ms


class NodeDeclaredDeadError(Exception):
    """A heartbeat from a node Ray declared dead: refused, so its gateway's lease runs out."""


class BrokerLease:
    """The broker's side: may this node still acknowledge writes to the partitions it leads?"""

    def __init__(self, session_timeout_ms: int = DEFAULT_BROKER_SESSION_TIMEOUT_MS,
                 heartbeat_interval_ms: int = DEFAULT_BROKER_HEARTBEAT_INTERVAL_MS) -> None:
        self.lease_s = lease_ms(session_timeout_ms, heartbeat_interval_ms) / 1000.0
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000.0
        self.broker_epoch = -1  # none yet: nothing may be acknowledged before the first answer
        self._until = 0.0

    def granted(self, sent_at: float, broker_epoch: int) -> bool:
        """The controller answered a heartbeat sent at ``sent_at`` (monotonic) with ``broker_epoch``.

        Returns True when the epoch is new (a first registration, or the controller had fenced
        this node): the caller must drop what it knew under the old one before acknowledging.
        """
        renewed = broker_epoch != self.broker_epoch
        if renewed:
            self.broker_epoch = broker_epoch
            self._until = 0.0
        self._until = max(self._until, sent_at + self.lease_s)
        return renewed

    def extend(self, asked_at: float) -> bool:
        """Ray's GCS, asked at ``asked_at`` (monotonic, before the question was sent), said the router is
        being restarted: no controller can fence this node before one session after the next incarnation
        serves its first call (see :meth:`BrokerSessions.serving`), which is after that answer. So a lease
        still running at ``asked_at`` may run on until ``asked_at`` + the lease, under the same epoch. A
        lease that already ran out is never revived (a controller may have fenced the node since). True
        when extended."""
        if asked_at >= self._until:
            return False
        self._until = max(self._until, asked_at + self.lease_s)
        return True

    @property
    def until(self) -> float:
        """When (monotonic) the lease runs out, for the node's lease board (``lease_board.py``)."""
        return self._until

    def valid(self, broker_epoch: int | None = None, now: float | None = None) -> bool:
        """True while the lease runs (and, given ``broker_epoch``, under that same epoch)."""
        if broker_epoch is not None and broker_epoch != self.broker_epoch:
            return False
        return (time.monotonic() if now is None else now) < self._until


class BrokerSessions:
    """The controller's side: which nodes' brokers are fenced (no heartbeat for the session timeout)."""

    def __init__(self, session_timeout_ms: int = DEFAULT_BROKER_SESSION_TIMEOUT_MS,
                 heartbeat_interval_ms: int = DEFAULT_BROKER_HEARTBEAT_INTERVAL_MS, restarted: bool = False) -> None:
        self.session_timeout_s = session_timeout_ms / 1000.0
        #: a restarted controller fences nobody this long after its first call (``CONTROLLER_RESTART_GRACE_MS``)
        self.grace_s = max(session_timeout_ms, CONTROLLER_RESTART_GRACE_MS) / 1000.0 if restarted else 0.0
        self._served_at: float | None = None
        #: no heartbeat from anybody for longer than this is a silence of the controller's, not of a broker
        self.silence_s = 2 * heartbeat_interval_ms / 1000.0
        self._last_any: float | None = None  # when the last heartbeat from any node arrived
        #: when the leases granted by an earlier incarnation of the controller (this one replaced a dead
        #: router) have surely run out: one session after this incarnation served its first call
        #: (:meth:`serving`); until then a node it never heard from may still acknowledge under one
        self._inherited_leases_end = float("inf")
        self._last: dict[str, float] = {}  # node -> when its last heartbeat arrived
        self._epoch: dict[str, int] = {}  # node -> its broker epoch
        self._fenced: set[str] = set()
        #: nodes Ray declared dead -> when (monotonic) their last lease has surely run out
        self._dead: dict[str, float] = {}
        self._dead_reported: set[str] = set()
        #: registrations a predecessor persisted and nobody has heartbeated under yet (node -> epoch)
        self._restored: dict[str, int] = {}
        # above any epoch a previous router handed out (a restarted router must not repeat one)
        self._next_epoch = time.time_ns() // 1000

    def restore(self, registered: dict[str, int]) -> None:
        """Registrations the previous controller persisted (``registrations``), as KRaft's broker
        registrations live in the metadata log: a broker that heartbeats under its persisted epoch
        keeps it, so a controller's restart fences nobody (before, every gateway was answered a new
        epoch, dropped every route it knew and waited for the restarted router to answer them again,
        a write gap of 8 s and more after each router restart on a loaded machine). A fenced
        registration is never persisted as such (``registrations`` leaves it out), so a node fenced
        by a predecessor registers again, under a new epoch, as before."""
        self._restored = {n: int(e) for n, e in registered.items() if n not in self._epoch}

    def registrations(self) -> dict[str, int]:
        """Registrations to persist (node -> broker epoch): every unfenced one, those restored and not
        heard from yet included. The router persists them before it acts on a fence (an election), so a
        successor never continues a registration its predecessor fenced."""
        out = dict(self._restored)
        out.update((n, e) for n, e in self._epoch.items() if n not in self._fenced)
        return out

    def serving(self, now: float | None = None) -> None:
        """This controller serves its first call (once; later calls change nothing).

        Ray marks a restarted actor ALIVE in its GCS before any call reaches it, so a gateway that asked
        the GCS and heard "restarting" asked before ``now``, and extended its lease to at most the lease
        length after asking (:meth:`BrokerLease.extend`), which is shorter than a session. Hence: a node
        this incarnation never heard from is replaceable no sooner than one session after ``now``.
        """
        if self._inherited_leases_end == float("inf"):
            self._served_at = time.monotonic() if now is None else now
            self._inherited_leases_end = self._served_at + self.session_timeout_s

    def heartbeat(self, node: str, broker_epoch: int, now: float | None = None) -> int:
        """A heartbeat from ``node``'s broker, which knows ``broker_epoch``; returns its broker epoch now.

        A first heartbeat, or one after the node was fenced, registers it under a new epoch;
        otherwise the epoch stays (Ray retrying the call gets the same answer).
        """
        now = time.monotonic() if now is None else now
        if node in self._dead:
            raise NodeDeclaredDeadError(f"node {node[:8]} was declared dead by Ray: it leads nothing and gets no "
                                        "lease under this node id (its machine rejoins as a new Ray node)")
        restored = self._restored.pop(node, None)
        if node not in self._epoch and restored is not None and restored == broker_epoch:
            self._epoch[node] = broker_epoch  # a predecessor's registration, never fenced: it goes on
        if node not in self._epoch or node in self._fenced:
            self._fenced.discard(node)
            self._epoch[node] = self._next_epoch
            self._next_epoch += 1
        self._heard(now)
        self._last[node] = now
        return self._epoch[node]

    def _heard(self, now: float) -> None:
        """A heartbeat arrived: a silence before it beyond ``silence_s`` is the controller's and is not
        counted against any session."""
        if self._last_any is not None and now - self._last_any > self.silence_s:
            self.stalled(now - self._last_any - self.silence_s)
        self._last_any = now

    def _silent_for(self, now: float) -> float:
        """How much of the time since the last heartbeat from anybody is an ongoing silence."""
        return 0.0 if self._last_any is None else max(0.0, now - self._last_any - self.silence_s)

    def lapse(self, now: float | None = None) -> list[str]:
        """Fence every node whose session lapsed; returns the nodes fenced by this call, and the dead nodes
        whose last lease ran out since the last call (their partitions may be replaced now)."""
        now = time.monotonic() if now is None else now
        silent = self._silent_for(now)
        in_grace = self.grace_s > 0 and (self._served_at is None or now < self._served_at + self.grace_s)
        out = [] if in_grace else [n for n, at in self._last.items()
                                   if n not in self._fenced and now - at - silent >= self.session_timeout_s]
        self._fenced.update(out)
        ran_out = [n for n, at in self._dead.items() if n not in self._dead_reported and now >= at]
        self._dead_reported.update(ran_out)
        return out + ran_out

    def declare_dead(self, node: str, now: float | None = None) -> None:
        """Ray declared ``node`` dead. Its gateway may still run (only the raylet stopped) and hold a lease
        from its last answered heartbeat: that lease runs out at most ``session_timeout_s`` after the
        heartbeat arrived (it is shorter than the session and counted from before it was sent)."""
        if node in self._dead:
            return
        now = time.monotonic() if now is None else now
        last = self._last.get(node)
        if node in self._fenced:
            self._dead[node] = now
        elif last is None:  # no heartbeat to this controller: a predecessor's lease may still run
            self._dead[node] = max(now, self._inherited_leases_end)
        else:
            self._dead[node] = max(now, last + self.session_timeout_s)
        self._last.pop(node, None)
        self._epoch.pop(node, None)
        self._restored.pop(node, None)
        self._fenced.discard(node)

    def replaceable(self, node: str, now: float | None = None) -> bool:
        """May another node take over the partitions ``node`` leads? When it is fenced, or dead in Ray's
        view and its last lease has run out."""
        if node in self._fenced:
            return True
        until = self._dead.get(node)
        return until is not None and (time.monotonic() if now is None else now) >= until

    def fenced(self, node: str) -> bool:
        """Fenced: it had a session and let it lapse. A node that never heartbeated (no gateway) is
        judged by Ray's view of nodes alone."""
        return node in self._fenced

    def nodes(self) -> list[str]:
        """Every node with a session (fenced or not), or a predecessor's registration not heard from yet."""
        return [*self._epoch, *(n for n in self._restored if n not in self._epoch)]

    def stalled(self, seconds: float) -> None:
        """The controller itself did not run for ``seconds``: push every open session's start on by
        that much. Only ever delays fencing, so the lease rule still holds."""
        for n in self._last:
            self._last[n] += seconds
        if self._last_any is not None:
            self._last_any += seconds

    def forget(self, node: str) -> None:
        """A node Ray declared dead: it will never heartbeat under this id again."""
        self._last.pop(node, None)
        self._epoch.pop(node, None)
        self._restored.pop(node, None)
        self._fenced.discard(node)

    def next_lapse_in(self, now: float | None = None) -> float | None:
        """Seconds until :meth:`lapse` may next have something to report (None: nothing can lapse), so the
        controller's watch sleeps until then instead of scanning on a short timer: an open session may
        lapse one session after its last heartbeat, and a dead node's last lease runs out at its recorded
        time. A heartbeat only moves a lapse later, so nothing lapses before the time returned."""
        now = time.monotonic() if now is None else now
        # while nobody is heard from, no session ages: the next heartbeat ends the silence, and the
        # watch's own poll (at most a session later) looks again
        due = [] if self._silent_for(now) > 0 else \
            [at + self.session_timeout_s for n, at in self._last.items() if n not in self._fenced]
        if self.grace_s > 0 and self._served_at is not None:  # a restarted controller fences nobody before
            due = [max(d, self._served_at + self.grace_s) for d in due]
        due += [at for n, at in self._dead.items() if n not in self._dead_reported]
        return max(0.0, min(due) - now) if due else None
