"""oasis-rp's fast search returns what the reference search returns, bit for bit.

Three devices are held against their reference: the compiled recursion
(:mod:`psched.policies.oasis_rp.dp`) against :func:`psched.oasis.solve_fast`; the run-compressed
search with the feasibility test first (:mod:`psched.policies.oasis_rp.search`) against the literal
composition (:func:`psched.policies.oasis_rp.book.search_reference`) on ledgers changed by random
plans added and taken out; the incremental run boundaries against a full comparison of rows.
Then whole runs: the policy on a reference ledger (``fast=False``) makes the same decisions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oasis_cases import make_cluster, make_job, priced_inputs, utilities
from strategies import Instance, instances

from psched.core.model import Alloc, Job
from psched.core.records import RunResult
from psched.core.simulator import simulate
from psched.oasis.fast import solve_fast
from psched.oasis.ledger import JobInputs, Ledger
from psched.oasis.prices import fixed_params
from psched.oasis.schedule import slot_costs
from psched.policies import make_policy
from psched.policies.oasis_rp import policy as policy_module
from psched.policies.oasis_rp.book import PlanLedger
from psched.policies.oasis_rp.dp import solve_compiled
from psched.policies.oasis_rp.plans import Found, Schedule
from psched.policies.oasis_rp.search import feasible_work, run_tables, search_reference, search_runs
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _same(a: Found, b: Found) -> bool:
    return a.payoff == b.payoff and a.schedule == b.schedule


@SETTINGS
@given(inp=priced_inputs(servers=5, ps_servers=3, max_workers=8, max_work=30, slots=12),
       floor=st.sampled_from([-math.inf, 0.0]), flat=st.booleans())
def test_compiled_recursion_is_solve_fast(inp: JobInputs, floor: float, flat: bool) -> None:
    if flat:  # the cheapest-schedule search of a re-pack: a constant utility
        inp = JobInputs(job=inp.job, start=inp.start, util=np.ones(inp.n_slots),
                        workers=inp.workers, ps=inp.ps, ps_needed=inp.ps_needed, runs=inp.runs)
    ref = solve_fast(inp, floor)
    got = solve_compiled(inp, slot_costs(inp), floor)
    assert got.payoff == ref.payoff
    assert (got.counts is None) == (ref.counts is None)
    if ref.counts is not None:
        assert got.counts is not None
        assert np.array_equal(got.counts, ref.counts)


@st.composite
def _step_inputs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int]:
    """``h``, ``c`` and ``hi`` of one min-plus step, tie-heavy: small integer costs (exact
    ties), some nudged by a relative ``1e-13``, ``1e-12`` or ``1e-11`` (ties within
    ``ARG_RTOL`` and just past it), unreachable entries (``inf``)."""
    k = draw(st.integers(0, 9))
    size = draw(st.integers(1, 16))
    nudge = st.sampled_from([1.0, 1.0, 1.0 + 1e-13, 1.0 + 1e-12, 1.0 - 1e-12, 1.0 + 1e-11])
    h = np.array([draw(st.integers(0, 12)) * draw(nudge) for _ in range(size)], dtype=float)
    h[0] = 0.0
    h[np.array(draw(st.lists(st.booleans(), min_size=size, max_size=size)))] = np.inf
    c = np.array([0.0] + [draw(st.integers(0, 6)) * draw(nudge) for _ in range(k)])
    return h, c, draw(st.integers(0, size - 1))


@settings(max_examples=300, deadline=None)
@given(case=_step_inputs())
def test_compiled_step_is_the_literal_minplus_step(
        case: tuple[np.ndarray, np.ndarray, int]) -> None:
    """The one-pass compiled step (running minimum and threshold per entry) gives the values
    and the minimisers of :func:`psched.oasis.fast.minplus_step`: the largest ``n`` within
    ``ARG_RTOL`` of the minimum, ``k`` where every sum is infinite."""
    from psched.oasis.fast import minplus_step
    from psched.policies.oasis_rp import dp

    h, c, hi = case
    want, want_arg = minplus_step(h, c, hi)
    new, arg = np.full(hi + 1, -1.0), np.full(hi + 1, -1, dtype=np.int32)
    scratch = [np.empty(hi + 1) for _ in range(3)]
    dp._step(h, c, c.size - 1, hi, new, arg, *scratch)
    assert np.array_equal(new, want)
    assert np.array_equal(arg, want_arg)


@st.composite
def _ledgers(draw: st.DrawFn) -> tuple[list[PlanLedger], Job, dict[str, int]]:
    """The same random plans added to (and some taken out of) a fast and a reference ledger,
    and a job to search for with its start, work and deadline."""
    n_w, n_p = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    cluster = make_cluster(
        [(float(draw(st.integers(1, 4))), float(draw(st.integers(2, 8))), 8.0, 10.0)
         for _ in range(n_w)],
        [(float(draw(st.integers(2, 8))), 8.0, 10.0) for _ in range(n_p)])
    horizon = draw(st.integers(2, 14))
    params = fixed_params(draw(st.sampled_from([5.0, 50.0])), 0.01, 20.0, 0.01)
    books = [PlanLedger(cluster, horizon, params, fast=f) for f in (True, False)]
    w_idx, p_idx = cluster.indices(cluster.servers[0].pool), np.arange(n_w, n_w + n_p)
    for i in range(draw(st.integers(0, 6))):
        other = make_job(work=1, window=horizon, max_workers=4, job_id=f"o{i}",
                         worker=(1.0, float(draw(st.integers(1, 3))), 1.0, 1.0))
        slots = draw(st.lists(st.integers(0, horizon - 1), min_size=1, max_size=horizon,
                              unique=True))
        plan = {t: Alloc.of({int(w_idx[draw(st.integers(0, n_w - 1))]): draw(st.integers(1, 2))},
                            {int(p_idx[draw(st.integers(0, n_p - 1))]): 1}) for t in slots}
        out = draw(st.booleans())
        for book in books:
            book.add(other, plan)
            if out:
                book.add(other, plan, sign=-1)
    n = draw(st.integers(1, 6))
    job = make_job(work=draw(st.integers(1, 20)), window=horizon, max_workers=n,
                   worker=(float(draw(st.integers(0, 2))), 1.0, 1.0, 1.0),
                   ps=(1.0, 1.0, draw(st.sampled_from([1.0, 2.0, 5.0]))),
                   utility=draw(utilities))
    call = {"start": draw(st.integers(0, horizon - 1)), "work": draw(st.integers(0, 20)),
            "deadline": draw(st.integers(0, horizon))}
    return books, job, call


@SETTINGS
@given(case=_ledgers(), flat=st.booleans(), floor=st.sampled_from([-math.inf, 0.0]))
def test_run_compressed_search_is_the_reference_search(
        case: tuple[list[PlanLedger], Job, dict[str, int]], flat: bool, floor: float) -> None:
    (fast, ref), job, call = case
    got = search_runs(fast, job, flat=flat, floor=floor, **call)
    want = search_reference(ref, job, flat=flat, floor=floor, **call)
    assert _same(got, want)
    _same_groups(got.schedule)


def _same_groups(schedule: dict[int, Alloc]) -> None:
    """The container groups a searched schedule carries are those its items give, and its
    worker-slots are :func:`work_of`'s."""
    from psched.policies.oasis_rp.plans import work_of

    rebuilt = Schedule(dict(schedule))
    for role in ("workers", "ps"):
        if isinstance(schedule, Schedule):
            for a, b in zip(schedule.groups(role), rebuilt.groups(role), strict=True):
                assert np.array_equal(a, b) and a.dtype == b.dtype
            assert schedule.distinct(role)
    for since in (0, *schedule):
        assert work_of(schedule, since) == sum(a.n_workers for t, a in schedule.items()
                                               if t >= since)


@SETTINGS
@given(case=_ledgers(), floor=st.sampled_from([-math.inf, 0.0]))
def test_run_compressed_own_usage_search_is_the_reference_own_usage_search(
        case: tuple[list[PlanLedger], Job, dict[str, int]], floor: float) -> None:
    from psched.policies.oasis_rp.own import search_own_reference, search_own_runs

    (fast, ref), job, call = case
    got = search_own_runs(fast, job, floor=floor, **call)
    want = search_own_reference(ref, job, floor=floor, **call)
    assert _same(got, want)
    _same_groups(got.schedule)


@SETTINGS
@given(case=_ledgers())
def test_feasible_work_decides_whether_any_schedule_exists(
        case: tuple[list[PlanLedger], Job, dict[str, int]]) -> None:
    """With no payoff floor the reference search finds a schedule iff the window holds the
    work: the test that lets the fast search skip prices, costs and recursion."""
    (fast, ref), job, _ = case
    tab = run_tables(fast, job, job.arrival, job.last_slot + 1)
    want = search_reference(ref, job, start=0, work=job.work, deadline=job.last_slot,
                            floor=-math.inf)
    assert (feasible_work(tab, job.max_workers, job.work) >= job.work) == bool(want.schedule)


@SETTINGS
@given(case=_ledgers(), lo=st.integers(0, 13), length=st.integers(0, 14))
def test_incremental_run_boundaries_match_a_full_comparison(
        case: tuple[list[PlanLedger], Job, dict[str, int]], lo: int, length: int) -> None:
    (fast, _), _, _ = case
    t0 = min(lo, fast.horizon - 1)
    t1 = min(fast.horizon, t0 + length)
    assert np.array_equal(fast.runs(t0, t1), Ledger.runs(fast, t0, t1))


#: the options of oasis-rp whose admissions and re-packs take different paths
OPTIONS = [{}, {"price_source": "hindsight"}, {"repack_gap": 1.0},
           {"density_floor": 0.0}]


def _run(specs: list, cluster: object, horizon: int, fast: bool,
         **options: object) -> RunResult:
    """``oasis-rp`` with ``options``, its plan book searching run-compressed (``fast``) or
    by the reference composition."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(policy_module, "PlanLedger",
                   lambda cluster, horizon, params: PlanLedger(cluster, horizon, params,
                                                               fast=fast))
        return simulate(specs, cluster, make_policy("oasis-rp", **options),  # type: ignore[arg-type]
                        horizon)


def _decisions(res: RunResult) -> tuple[object, ...]:
    return (res.allocations, [(j, r.admitted, r.promised, r.completion)
                              for j, r in res.records.items()])


@pytest.mark.parametrize("options", OPTIONS,
                         ids=lambda o: ",".join(map(str, o.items())) or "default")
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(instance=instances())
def test_fast_search_makes_the_same_decisions(options: dict[str, object],
                                              instance: Instance) -> None:
    cluster, specs, horizon = instance
    runs = [_run(specs, cluster, horizon, f, **options) for f in (True, False)]
    assert _decisions(runs[0]) == _decisions(runs[1])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_search_makes_the_same_decisions_on_the_paper_scenario(seed: int) -> None:
    specs, _ = oasis_paper_jobs(100, seed=seed, slots=300)
    cluster = oasis_paper_cluster(seed=seed)
    runs = [_run(specs, cluster, 300, f, certificate=False) for f in (True, False)]
    assert _decisions(runs[0]) == _decisions(runs[1])
    assert runs[0].report["repack_tried"] > 0  # the re-pack paths were exercised


def test_a_schedule_rebuilds_its_arrays_after_any_change_and_copies_keep_their_own() -> None:
    import copy
    import pickle

    s = Schedule({3: Alloc.of({1: 2}, {5: 1}), 4: Alloc.of({2: 1}, {})})
    assert s.groups("workers")[2].tolist() == [2, 1]
    for other in (copy.copy(s), copy.deepcopy(s), pickle.loads(pickle.dumps(s))):
        other.pop(3)
        assert other.groups("workers")[2].tolist() == [1]
    assert s.groups("workers")[2].tolist() == [2, 1]
    s[5] = Alloc.of({1: 4}, {6: 2})
    assert s.groups("workers")[0].tolist() == [3, 4, 5]
    assert s.groups("ps")[1].tolist() == [5, 6]
    del s[3]
    assert s.groups("workers")[2].tolist() == [1, 4]
    s.groups("ps")
    s.pop(4)  # one slot out keeps the others' groups, in order
    assert [a.tolist() for a in s.groups("workers")] == [[5], [1], [4]]
    assert [a.tolist() for a in s.groups("ps")] == [[5], [6], [2]]
    assert s.pop(9, None) is None and s.work() == 4 and s.work(6) == 0


def test_adding_a_schedule_or_the_same_dict_changes_the_usage_alike() -> None:
    cluster = make_cluster([(4.0, 8.0, 8.0, 10.0)] * 2, [(8.0, 8.0, 10.0)])
    params = fixed_params(5.0, 0.01, 5.0, 0.01)
    books = [PlanLedger(cluster, 6, params) for _ in range(2)]
    job = make_job(work=4, window=6, max_workers=2)
    plan = {1: Alloc.of({0: 1, 1: 1}, {2: 1}), 3: Alloc.of({1: 2}, {2: 2})}
    for book, sched in zip(books, (Schedule(plan), dict(plan)), strict=True):
        book.add(job, sched)
        book.add(job, sched, sign=-1)
        book.add(job, sched)
    for a, b in zip(books[0].usage, books[1].usage, strict=True):
        assert np.array_equal(a, b)


def test_runs_follow_a_direct_write_after_refresh() -> None:
    cluster = make_cluster([(4.0, 8.0, 8.0, 10.0)], [(8.0, 8.0, 10.0)])
    book = PlanLedger(cluster, 5, fixed_params(5.0, 0.01, 5.0, 0.01))
    assert book.runs(0, 5).tolist() == [0]
    book.usage[0][2] += 1.0
    book.refresh_runs()
    assert book.runs(0, 5).tolist() == Ledger.runs(book, 0, 5).tolist() == [0, 2, 3]


@SETTINGS
@given(rows=st.integers(1, 4), servers=st.integers(0, 6), n_max=st.integers(0, 9),
       data=st.data())
def test_compiled_greedy_costs_are_greedy_costs(rows: int, servers: int, n_max: int,
                                                data: st.DataObject) -> None:
    from psched.oasis.schedule import greedy_costs
    from psched.policies.oasis_rp.kernels import greedy_costs_compiled

    prices = st.sampled_from([0.0, 1e-3, 0.1, 0.1, 0.3, 2.5, 7.0])  # ties on purpose
    unit = np.array(data.draw(st.lists(prices, min_size=rows * servers,
                                       max_size=rows * servers))).reshape(rows, servers)
    caps = np.array(data.draw(st.lists(st.integers(0, 3), min_size=rows * servers,
                                       max_size=rows * servers)),
                    dtype=np.int64).reshape(rows, servers)
    assert np.array_equal(greedy_costs_compiled(unit, caps, n_max),
                          greedy_costs(unit, caps, n_max))


@SETTINGS
@given(slots=st.integers(1, 4), servers=st.integers(1, 4), limit=st.integers(0, 6),
       data=st.data())
def test_compiled_unit_caps_are_unit_caps_of_the_residual(slots: int, servers: int, limit: int,
                                                         data: st.DataObject) -> None:
    from psched.oasis.ledger import PoolInputs
    from psched.oasis.schedule import unit_caps
    from psched.policies.oasis_rp.kernels import unit_caps_compiled

    amounts = st.sampled_from([0.0, 0.5, 1.0, 2.0, 1 / 3, 8.0, 7.999999999])
    cap = np.array(data.draw(st.lists(amounts, min_size=servers * 5, max_size=servers * 5))
                   ).reshape(servers, 5)
    usage = np.array(data.draw(st.lists(amounts, min_size=slots * servers * 5,
                                        max_size=slots * servers * 5))).reshape(slots, servers, 5)
    dem = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 1 / 3, 2.0]),
                                      min_size=5, max_size=5)))
    rows = np.array(data.draw(st.lists(st.integers(0, slots - 1), max_size=4)), dtype=np.int64)
    pool = PoolInputs(servers=np.arange(servers), price=np.zeros(0), resid=cap - usage[rows],
                      demand=dem, norm=dem)
    assert np.array_equal(unit_caps_compiled(usage, cap, rows, dem, limit),
                          unit_caps(pool, limit))


@SETTINGS
@given(rows=st.integers(1, 6), width=st.integers(1, 6), work=st.integers(1, 12),
       data=st.data())
def test_compiled_cost_lower_bound_is_cost_lower_bound(rows: int, width: int, work: int,
                                                       data: st.DataObject) -> None:
    from psched.oasis.fast import cost_lower_bound
    from psched.policies.oasis_rp.dp import cost_lower_bound_compiled

    values = st.sampled_from([0.0, 0.1, 0.3, 0.7, 1 / 3, 2.5, math.inf])  # ties on purpose
    costs = np.array(data.draw(st.lists(values, min_size=rows * width,
                                        max_size=rows * width))).reshape(rows, width)
    costs = np.sort(costs, axis=1)  # costs rise with n: the finite ones form a prefix
    costs[:, 0] = 0.0
    want = cost_lower_bound(costs, work)
    got = cost_lower_bound_compiled(costs, work)
    assert got == want or (math.isinf(got) and math.isinf(want))
