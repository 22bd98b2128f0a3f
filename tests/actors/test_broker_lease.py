"""Broker sessions and leases (actors/broker_lease.py): the rules that keep two leaders from acknowledging."""
import pytest

from logan_ray.actors.broker_lease import BrokerLease, BrokerSessions, lease_ms


class Witness:
    """Another broker heartbeating every 0.5 s: the controller hears from somebody, so the silence of one
    node counts against its session (a controller that hears from nobody fences nobody)."""

    def __init__(self, sessions: BrokerSessions, start: float, node: str = "w") -> None:
        self.sessions, self.node, self.at = sessions, node, start
        sessions.heartbeat(node, -1, now=start)

    def upto(self, now: float) -> None:
        while self.at + 0.5 <= now:
            self.at += 0.5
            self.sessions.heartbeat(self.node, -1, now=self.at)


def lapse(sessions: BrokerSessions, now: float, witness: Witness) -> list[str]:
    witness.upto(now)
    return [n for n in sessions.lapse(now=now) if n != witness.node]


def test_the_lease_ends_before_the_controller_may_fence():
    sessions, lease = BrokerSessions(3000), BrokerLease(3000, 500)
    sent = 100.0
    w = Witness(sessions, sent)
    epoch = sessions.heartbeat("n1", lease.broker_epoch, now=sent + 0.2)  # arrives after it was sent
    lease.granted(sent, epoch)
    assert lease.valid(epoch, now=sent + 2.49)
    assert not lease.valid(epoch, now=sent + 2.5)  # the broker stops acknowledging here...
    assert lapse(sessions, sent + 2.5, w) == [] and lapse(sessions, sent + 3.1, w) == []
    assert lapse(sessions, sent + 3.2, w) == ["n1"]  # ...and is fenced (others may lead) only after
    assert sessions.fenced("n1")


def test_nothing_is_acknowledged_before_the_first_heartbeat_is_answered():
    lease = BrokerLease(3000, 500)
    assert not lease.valid(now=0.0) and not lease.valid(lease.broker_epoch, now=0.0)


def test_a_fenced_node_registers_again_under_a_new_epoch_and_its_old_lease_is_void():
    sessions, lease = BrokerSessions(3000), BrokerLease(3000, 500)
    w = Witness(sessions, 0.0)
    first = sessions.heartbeat("n1", -1, now=0.0)
    assert lease.granted(0.0, first)  # a first registration is new
    assert sessions.heartbeat("n1", first, now=1.0) == first  # a retried or regular heartbeat: same epoch
    assert not lease.granted(1.0, first)
    assert lapse(sessions, 4.5, w) == ["n1"]
    second = sessions.heartbeat("n1", first, now=5.0)
    assert second != first and not sessions.fenced("n1")
    assert lease.granted(5.0, second)  # the gateway must drop its routes
    assert not lease.valid(first, now=5.1)  # a request begun under the old epoch cannot be acknowledged
    assert lease.valid(second, now=5.1)


def test_a_stalled_controller_does_not_fence_brokers_whose_heartbeats_waited_for_it():
    sessions = BrokerSessions(3000)
    sessions.heartbeat("n1", -1, now=0.0)
    sessions.stalled(5.0)  # the router did not run from 0.5 to 5.5
    w = Witness(sessions, 5.5)
    assert lapse(sessions, 5.6, w) == []
    assert lapse(sessions, 8.1, w) == ["n1"]


def test_a_broker_that_goes_silent_while_the_others_beat_is_fenced_on_time():
    sessions = BrokerSessions(3000, 500)
    w = Witness(sessions, 0.0)
    sessions.heartbeat("n1", -1, now=10.0)  # its last
    assert lapse(sessions, 12.99, w) == []
    assert lapse(sessions, 13.0, w) == ["n1"]  # not a moment later than a session after its last heartbeat


def test_a_controller_that_hears_from_nobody_fences_nobody():
    """Every heartbeat delayed for 10 s (an overloaded machine; the controller's own calls starved): the
    silence is the controller's. Fencing all would only take every partition offline with nobody to elect."""
    sessions = BrokerSessions(3000, 500)
    for t in range(0, 21):  # three brokers beating every 0.5 s until 10.0
        for n in ("n1", "n2", "n3"):
            sessions.heartbeat(n, -1, now=t / 2)
    assert sessions.lapse(now=20.0) == []
    assert sessions.next_lapse_in(now=20.0) is None  # nothing can lapse until somebody is heard again
    sessions.heartbeat("n2", -1, now=20.0)  # the first of the queued heartbeats is served...
    assert sessions.lapse(now=20.01) == []  # ...and the watch runs before the others: still nobody
    sessions.heartbeat("n1", -1, now=20.02)
    sessions.heartbeat("n3", -1, now=20.03)
    assert not any(sessions.fenced(n) for n in ("n1", "n2", "n3"))
    for t in (20.5, 21.0, 21.5, 22.0, 22.5, 23.0):  # heard again: n1 and n3 beat, n2 does not
        sessions.heartbeat("n1", -1, now=t)
        sessions.heartbeat("n3", -1, now=t)
    assert sessions.lapse(now=22.99) == [] and sessions.lapse(now=23.0) == ["n2"]


def test_nodes_without_a_session_are_never_fenced():
    sessions = BrokerSessions(3000)
    assert sessions.lapse(now=1e9) == [] and not sessions.fenced("gatewayless")
    sessions.heartbeat("n1", -1, now=0.0)
    sessions.forget("n1")  # dead in Ray's view
    assert sessions.lapse(now=1e9) == [] and sessions.nodes() == []


def test_the_session_must_be_longer_than_the_heartbeat_interval():
    assert lease_ms(3000, 500) == 2500
    with pytest.raises(ValueError):
        lease_ms(500, 500)


def test_a_node_ray_declared_dead_is_replaced_only_once_its_last_lease_ran_out_and_never_renews():
    """Ray declares a node dead when its raylet stops; its gateway may run on under its last lease."""
    import pytest

    from logan_ray.actors.broker_lease import NodeDeclaredDeadError

    sessions = BrokerSessions(session_timeout_ms=3000)
    lease = BrokerLease(3000, 500)
    sent = 100.0
    w = Witness(sessions, sent)
    lease.granted(sent, sessions.heartbeat("n1", -1, now=sent + 0.01))  # arrived 10 ms after it was sent
    sessions.declare_dead("n1", now=sent + 0.5)
    with pytest.raises(NodeDeclaredDeadError):  # its gateway's next heartbeat: no renewal
        sessions.heartbeat("n1", lease.broker_epoch, now=sent + 0.6)
    for t in (sent + 0.5, sent + 2.0, sent + 3.0):
        assert not sessions.replaceable("n1", now=t)
        assert lease.valid(now=t) or t >= sent + lease.lease_s  # the zombie may still acknowledge here
    assert not lease.valid(now=sent + 3.01) and sessions.replaceable("n1", now=sent + 3.01)
    assert lapse(sessions, sent + 3.02, w) == ["n1"] and lapse(sessions, sent + 4, w) == []  # reported once


def test_a_dead_node_that_never_heartbeated_or_was_fenced_is_replaceable_at_once():
    sessions = BrokerSessions(session_timeout_ms=3000)
    sessions.serving(now=0.0)
    sessions.declare_dead("no-gateway", now=10.0)
    assert sessions.replaceable("no-gateway", now=10.0)
    w = Witness(sessions, 0.0)
    sessions.heartbeat("n2", -1, now=0.0)
    assert lapse(sessions, 5.0, w) == ["n2"]  # fenced
    sessions.declare_dead("n2", now=6.0)
    assert sessions.replaceable("n2", now=6.0)
    assert not sessions.replaceable("alive-and-well", now=6.0)


def test_a_restarted_controller_replaces_a_node_it_never_heard_from_only_once_a_predecessors_lease_ran_out():
    """The router died just after answering n1's heartbeat and Ray restarted it; n1's raylet then stopped,
    its gateway still acknowledging under the lease the dead router granted, extended once while the
    GCS called the router restarting (asked just before the new incarnation served its first call)."""
    old, lease = BrokerSessions(3000), BrokerLease(3000, 500)
    sent = 50.0
    lease.granted(sent, old.heartbeat("n1", -1, now=sent + 0.01))
    assert lease.extend(sent + 2.0)  # asked the GCS at 52.0: "restarting"; the lease runs to 54.5 now
    new = BrokerSessions(3000)  # the router's next incarnation: it never heard from n1
    new.declare_dead("n1", now=sent + 2.05)  # before it served a call: not replaceable at all
    assert not new.replaceable("n1", now=sent + 100)
    new = BrokerSessions(3000)
    new.serving(now=sent + 2.1)  # its first call, after the GCS marked it alive (so after 52.0)
    new.declare_dead("n1", now=sent + 2.2)
    for t in (sent + 2.2, sent + 3.0, sent + 4.4):
        assert lease.valid(now=t) and not new.replaceable("n1", now=t)  # the zombie acknowledges: no election
    assert not lease.valid(now=sent + 5.1) and new.replaceable("n1", now=sent + 5.1)
    assert new.lapse(now=sent + 5.1) == ["n1"]


def test_a_lease_is_extended_only_while_it_still_runs():
    lease = BrokerLease(3000, 500)
    lease.granted(10.0, 1)  # runs to 12.5
    assert lease.extend(12.0) and lease.until == 14.5 and lease.broker_epoch == 1
    assert not lease.extend(14.5)  # ran out: a controller may have fenced the node since
    assert lease.until == 14.5 and not lease.valid(now=14.6)


def test_a_restarted_controller_continues_a_registration_its_predecessor_persisted():
    """KRaft keeps broker registrations in the metadata log: a controller's restart fences nobody, so a
    gateway keeps its routes and lease (before, each got a new epoch, dropped every route and waited for
    the restarted router: seconds of write gap after every router restart)."""
    first = BrokerSessions(3000)
    epoch = first.heartbeat("n1", -1, now=1.0)
    persisted = first.registrations()
    assert persisted == {"n1": epoch}
    second = BrokerSessions(3000)  # the router, restarted by Ray
    second.restore(persisted)
    assert second.registrations() == {"n1": epoch}  # saved again before n1 is heard: still continued
    assert second.heartbeat("n1", epoch, now=50.0) == epoch
    assert second.heartbeat("n2", -1, now=50.0) != -1  # a node it never knew registers as before


def test_a_registration_fenced_before_the_restart_is_not_continued():
    first = BrokerSessions(3000)
    w = Witness(first, 0.0)
    epoch = first.heartbeat("n1", -1, now=0.0)
    assert lapse(first, 3.5, w) == ["n1"]  # fenced: its partitions may be elected elsewhere now
    persisted = first.registrations()
    assert "n1" not in persisted  # what the router saves before any election acts on the fence
    second = BrokerSessions(3000)
    second.restore(persisted)
    assert second.heartbeat("n1", epoch, now=10.0) != epoch  # registers again: what it knew is void


def test_a_restored_registration_of_a_node_ray_declared_dead_is_dropped():
    second = BrokerSessions(3000)
    second.restore({"gone": 7})
    assert second.nodes() == ["gone"]
    second.declare_dead("gone", now=1.0)
    assert second.registrations() == {}


def test_a_restarted_controller_fences_nobody_during_its_restart_grace():
    """Its start is the busiest moment of a loaded machine: a gateway late then is not fenced (its routes
    dropped, its leaderships moved); once the grace is over, a silent node is fenced as before."""
    sessions = BrokerSessions(3000, restarted=True)
    sessions.serving(now=0.0)
    w = Witness(sessions, 0.0)
    sessions.heartbeat("n1", -1, now=0.0)
    assert lapse(sessions, 5.0, w) == []  # silent 5 s, within the grace
    assert sessions.next_lapse_in(now=5.0) >= 4.9  # the watch sleeps until the grace ends
    assert lapse(sessions, 10.0, w) == ["n1"]
    fresh = BrokerSessions(3000)  # a router that was not restarted: no grace
    fresh.serving(now=0.0)
    w2 = Witness(fresh, 0.0)
    fresh.heartbeat("n1", -1, now=0.0)
    assert lapse(fresh, 3.5, w2) == ["n1"]
