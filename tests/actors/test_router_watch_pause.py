"""The router's node watch sleeps until something can lapse, not on a 10 Hz timer (issue 37 item 2):
an idle router wakes about once per poll of Ray's view, and no session or dead node's last lease is
seen lapsing later than before (at most ``LAPSE_CHECK_S``). Ray-free: the pause is pure arithmetic."""
from types import SimpleNamespace

from logan_ray.actors.broker_lease import BrokerSessions
from logan_ray.actors.router_watch import LAPSE_CHECK_S, WATCH_INTERVAL_S, NodeWatch


def pause(sessions: BrokerSessions, now: float, polled: float) -> float:
    return NodeWatch._watch_pause(SimpleNamespace(_sessions=sessions), now, polled)


def test_an_idle_watch_sleeps_until_the_next_poll_and_a_session_lapse_wakes_it_in_time():
    sessions = BrokerSessions(3000)
    assert pause(sessions, now=10.0, polled=10.0) == WATCH_INTERVAL_S  # no session: the next poll of Ray's view
    assert pause(sessions, now=11.5, polled=10.0) == 0.5
    sessions.heartbeat("n1", -1, now=9.0)  # lapses at 12.0, while n2 beats
    for t in (9.0, 9.5, 10.0, 10.5, 11.0):
        sessions.heartbeat("n2", -1, now=t)
    p = pause(sessions, now=11.0, polled=11.0)
    assert 1.0 <= p <= 1.01  # woken at the lapse, not at the poll (13.0)
    # a heartbeat only moves the lapse later: sleeping to the earlier time is never late
    sessions.heartbeat("n2", -1, now=11.5)
    assert sessions.lapse(now=11.0 + p) == ["n1"]
    assert sessions.next_lapse_in(now=12.5) == 2.0  # n1 is fenced: n2's lapse at 14.5


def test_a_dead_nodes_last_lease_is_waited_for_exactly_and_the_sleep_never_spins():
    sessions = BrokerSessions(3000)
    sessions.heartbeat("n1", -1, now=0.0)
    sessions.declare_dead("n1", now=1.0)  # its last lease may run until 3.0
    assert sessions.next_lapse_in(now=1.0) == 2.0
    assert 1.0 < pause(sessions, now=2.0, polled=2.0) <= 1.01
    assert sessions.lapse(now=3.0) == ["n1"] and sessions.next_lapse_in(now=3.0) is None  # reported once
    sessions.heartbeat("n2", -1, now=0.0)
    # nobody heard from since: no session ages (the controller's silence), the watch sleeps to its poll
    assert sessions.next_lapse_in(now=5.0) is None and pause(sessions, now=5.0, polled=5.0) == WATCH_INTERVAL_S
    for t in (5.5, 6.0, 6.5, 7.0, 7.5, 8.0, 8.5):
        sessions.heartbeat("n3", -1, now=t)  # heard again: n2 lapses 3 s of hearing after its last beat (7.5)
    assert pause(sessions, now=8.5, polled=8.5) == LAPSE_CHECK_S  # overdue: the floor, never a busy loop


def test_a_session_opened_during_the_sleep_cannot_lapse_before_it_ends():
    sessions = BrokerSessions(1000)  # a session shorter than the poll interval
    assert pause(sessions, now=0.0, polled=0.0) <= 1.0  # a first heartbeat at 0.0+ lapses at 1.0 at the earliest
