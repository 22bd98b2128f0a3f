"""Keep the cyclic garbage collector off a long-lived server process's startup objects.

Why: a Ray worker that hosts the gateway (or a partition) holds hundreds of thousands of
objects made while it started (Ray's modules and state, ours) that live as long as the
process, and CPython's full collection walks all of them. The gateway makes thousands of
short-lived dicts per Fetch naming a thousand partitions, so collections come often: in one
process answering such Fetches over ``bench/closed_fetch.py``'s 1,000 views, one full collection
took 50 ms (the gateway's whole event loop waits meanwhile), and the gateway's p90 time per such Fetch fell from 6.9 to 4.9 ms with
this (docs/benchmarks.md, issue 14). ``gc.freeze()`` moves the objects alive at that point out
of the collector's generations (reference counting still frees them; it is a list splice, no
walk, so it costs an activation nothing); a larger first generation threshold makes young
collections less frequent. Garbage made later is collected as usual; cyclic garbage made
before the call stays.
"""
from __future__ import annotations

import gc

#: allocations between young collections (CPython's default: 700)
YOUNG_THRESHOLD = 20_000


def settle_heap() -> None:
    """Call once the process has started serving: its startup objects are kept from then on."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
