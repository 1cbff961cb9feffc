"""The exact speed-ups of ``oasis-rp``'s re-pack path (issue 14, task 9c) change nothing.

Each fast device is held against its literal reference: the run-compressed latest-completion
search of ``repack_late`` (:func:`psched.policies.rp_late.search_latest_runs`) against
:func:`~psched.policies.rp_late.search_latest_reference` on ledgers changed by random plans
added and taken out (the strategy of ``tests/test_rp_search.py``); whole runs with the fast
search on and off make the same decisions (``tests/test_rp_search.py``).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from test_rp_search import _ledgers

from psched.model import Job
from psched.policies.rp_book import PlanLedger
from psched.policies.rp_late import search_latest_reference, search_latest_runs
from psched.policies.rp_search import Schedule

SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(case=_ledgers())
def test_run_compressed_latest_search_is_the_reference_latest_search(
        case: tuple[list[PlanLedger], Job, dict[str, int]]) -> None:
    (fast, ref), job, call = case
    got = search_latest_runs(fast, job, **call)
    want = search_latest_reference(ref, job, **call)
    assert got.payoff == want.payoff
    assert got.schedule == want.schedule
    if got.schedule:
        assert isinstance(got.schedule, Schedule)
        rebuilt = Schedule(dict(got.schedule))
        for role in ("workers", "ps"):
            for a, b in zip(got.schedule.groups(role), rebuilt.groups(role), strict=True):
                assert (a == b).all()
