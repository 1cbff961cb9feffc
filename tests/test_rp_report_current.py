"""``oasis-rp``'s ``report()`` is current after every callback, including a boundary's work
ahead (it is cached between calls; a stale cache would make ``ahead_jobs`` lag until the next
arrival)."""

from __future__ import annotations

import pytest
from test_rp_ahead import _cluster, _spec

from psched.core.promises import broken_promises
from psched.core.simulator import simulate
from psched.policies import make_policy

COUNTERS = ("ahead_jobs", "ahead_moved", "repack_tried", "repack_kept", "soft_reserved")


@pytest.mark.parametrize("options", [{}, {"price_source": "hindsight"}])
def test_report_counts_every_ahead_move_at_the_boundary_it_happens(
        options: dict[str, object]) -> None:
    specs = [_spec("long", 0, n=4, work=10, deadline=4, value=10.0),
             _spec("mid", 0, n=2, work=2, deadline=1, value=10.0),
             _spec("burst", 2, n=4, work=4, deadline=2, value=50.0)]
    pol = make_policy("oasis-rp", **options)
    seen: list[tuple[int, int]] = []
    real_plan = pol.plan

    def plan_then_report(view):  # type: ignore[no-untyped-def]
        pol.report()  # fill the cache before the boundary's moves
        out = real_plan(view)
        state = pol.boundary_state()["stats"]
        rep = pol.report()
        assert {c: rep[c] for c in COUNTERS} == {c: state[c] for c in COUNTERS}
        seen.append((view.t, int(rep["ahead_jobs"])))
        return out

    pol.plan = plan_then_report  # type: ignore[method-assign]
    res = simulate(specs, _cluster(4, 8), pol, 8)
    assert broken_promises(res) == []
    assert res.report["ahead_jobs"] > 0  # the scenario does move a plan ahead
    assert seen and seen[-1][1] == res.report["ahead_jobs"]
