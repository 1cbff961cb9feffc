"""The exact speed-ups of ``oasis-rp``'s re-pack path change nothing.

Each fast device is held against its literal reference: the run-compressed latest-completion
search of ``repack_late`` (:func:`psched.policies.oasis_rp.latest.search_latest_runs`) against
:func:`~psched.policies.oasis_rp.latest.search_latest_reference` on ledgers changed by random plans
added and taken out (the strategy of ``tests/test_rp_search.py``); whole runs with the fast
search on and off make the same decisions (``tests/test_rp_search.py``).
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oasis_cases import make_cluster, make_job
from test_rp_search import _ledgers

from psched.core.model import Alloc, Job
from psched.oasis.prices import fixed_params
from psched.oasis.schedule import unit_prices
from psched.policies.oasis_rp.book import PlanLedger
from psched.policies.oasis_rp.latest import search_latest_reference, search_latest_runs
from psched.policies.oasis_rp.plans import Schedule
from psched.policies.oasis_rp.search import _allocs_reference, priced_pools, run_tables, slot_allocs

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


def test_a_schedules_pool_positions_follow_every_change_and_the_position_map() -> None:
    s = Schedule({3: Alloc.of({1: 2}, {5: 1}), 4: Alloc.of({2: 1}, {})})
    pos_map = np.arange(10) * 10
    assert s.positions("workers", pos_map).tolist() == [10, 20]
    assert s.positions("workers", pos_map) is s.positions("workers", pos_map)  # kept
    assert s.positions("workers", np.arange(10)).tolist() == [1, 2]  # another map: re-read
    s[5] = Alloc.of({4: 1}, {6: 2})
    assert s.positions("workers", pos_map).tolist() == [10, 20, 40]
    assert s.positions("ps", pos_map).tolist() == [50, 60]
    s.pop(3)  # one slot out (a boundary)
    assert s.positions("workers", pos_map).tolist() == [20, 40]
    assert s.positions("ps", pos_map).tolist() == [60]
    del s[4]
    assert s.positions("workers", pos_map).tolist() == [40]


def test_a_ledger_adds_and_takes_out_a_schedule_as_the_same_dict() -> None:
    """The compiled add of a schedule's kept groups and positions changes the usage as the
    generic path for the same dict does, across a boundary pop and the fits test."""
    cluster = make_cluster([(4.0, 8.0, 8.0, 10.0)] * 3, [(8.0, 8.0, 10.0)] * 2)
    params = fixed_params(5.0, 0.01, 5.0, 0.01)
    books = [PlanLedger(cluster, 6, params) for _ in range(2)]
    job = make_job(work=6, window=6, max_workers=3, worker=(1.0, 1.5, 0.75, 1.0))
    plan = {1: Alloc.of({0: 1, 2: 1}, {3: 1}), 3: Alloc.of({1: 2}, {3: 1, 4: 1}),
            4: Alloc.of({2: 2}, {4: 2})}
    for book, sched in zip(books, (Schedule(plan), dict(plan)), strict=True):
        book.add(job, sched)
        book.add(job, sched, sign=-1)
        book.add(job, sched)
        assert book.fits(job, sched)
        sched.pop(1)
        book.add(job, sched, sign=-1)
    for a, b in zip(books[0].usage, books[1].usage, strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(books[0]._stale, books[1]._stale)


@SETTINGS
@given(case=_ledgers(), data=st.data())
def test_compiled_placements_are_the_reference_placements(
        case: tuple[list[PlanLedger], Job, dict[str, int]], data: st.DataObject) -> None:
    """Random worker counts per slot, each within what the slot holds, placed by the
    compiled groups and by the numpy reference: the same allocations and ledger arrays."""
    (fast, _), job, _ = case
    tab = run_tables(fast, job, job.arrival, job.last_slot + 1)
    w_pool, p_pool = priced_pools(fast, tab)
    unit = (unit_prices(w_pool), unit_prices(p_pool))
    n_ps = np.searchsorted(tab.ps_needed, tab.caps[1].sum(axis=1), side="right") - 1
    most = np.minimum(np.minimum(tab.caps[0].sum(axis=1), n_ps), job.max_workers)[tab.row_of]
    counts = np.array([data.draw(st.integers(0, int(m))) for m in most], dtype=np.int64)
    got, want = slot_allocs(tab, unit, counts), _allocs_reference(tab, unit, counts)
    assert got == want
    for role in ("workers", "ps"):
        for a, b in zip(got.groups(role), want.groups(role), strict=True):
            assert np.array_equal(a, b)
