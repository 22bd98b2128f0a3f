from hypothesis import given, settings
from hypothesis import strategies as st

from logan_ray.storage.verified_ranges import VerifiedRanges


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), max_size=30), st.integers(0, 1100), st.integers(0, 1100))
@settings(max_examples=300, deadline=None)
def test_ranges_match_a_set_model(adds, q1, q2):
    r = VerifiedRanges()
    covered = set()
    for a, b in adds:
        s, e = min(a, b), max(a, b)
        r.add(s, e)
        covered.update(range(s, e))
    s, e = min(q1, q2), max(q1, q2)
    gaps = r.missing(s, e)
    missing = set()
    for gs, ge in gaps:
        assert s <= gs < ge <= e
        missing.update(range(gs, ge))
    assert missing == set(range(s, e)) - covered
    assert r.covered() == len(covered)
    # stored ranges are disjoint, sorted and not touching
    assert all(e1 < s2 for e1, s2 in zip(r._ends, r._starts[1:]))
