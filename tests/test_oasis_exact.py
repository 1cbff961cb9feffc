"""The fast best-schedule search returns the exact optimum (paper Alg. 2, oasis.md section 7).

Tiny instances: against brute force over every placement and every worker-count vector.
Small instances: against the literal dynamic program. In both, the fast schedule is re-priced
independently (:func:`schedule_cost`) and must achieve the reported payoff.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from oasis_cases import make_cluster, make_job, priced_inputs

from psched.core.utility import Utility
from psched.oasis.brute import brute_slot_cost, solve_brute
from psched.oasis.fast import minplus_step, solve_fast
from psched.oasis.ledger import JobInputs, Ledger
from psched.oasis.literal import literal_slot_cost, solve_literal
from psched.oasis.prices import fixed_params
from psched.oasis.schedule import ARG_RTOL, Best, schedule_allocs, schedule_cost, slot_costs

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TINY = dict(servers=2, ps_servers=2, max_workers=3, max_work=5, slots=3)
SMALL = dict(servers=5, ps_servers=3, max_workers=8, max_work=30, slots=10)


def close(a: float, b: float) -> bool:
    return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def assert_achieves(inp: JobInputs, best: Best) -> None:
    """The reported schedule is feasible and its independent price gives the payoff."""
    assert best.counts is not None
    util, cost = schedule_cost(inp, schedule_allocs(inp, best.counts))
    assert close(util - cost, best.payoff)


@SETTINGS
@given(inp=priced_inputs(**TINY), floor=st.sampled_from([-math.inf, 0.0]))
def test_fast_search_matches_brute_force(inp: JobInputs, floor: float) -> None:
    truth = solve_brute(inp, floor=floor)
    fast = solve_fast(inp, floor=floor)
    assert close(fast.payoff, truth.payoff)
    assert (fast.counts is None) == (truth.counts is None)
    if fast.counts is not None:
        assert_achieves(inp, fast)


@SETTINGS
@given(inp=priced_inputs(**TINY))
def test_greedy_slot_cost_is_the_cheapest_placement(inp: JobInputs) -> None:
    """Theorem 1: greedy placement with the fewest PS equals the enumerated minimum."""
    costs = slot_costs(inp)
    for i in range(inp.n_slots):
        for n in range(inp.job.max_workers + 1):
            truth = brute_slot_cost(inp, i, n)
            assert close(costs[i, n], truth)
            assert close(literal_slot_cost(inp, i, n), truth)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(inp=priced_inputs(**SMALL), floor=st.sampled_from([-math.inf, 0.0]))
def test_fast_search_matches_literal_dp(inp: JobInputs, floor: float) -> None:
    ref = solve_literal(inp, floor=floor)
    fast = solve_fast(inp, floor=floor)
    assert close(fast.payoff, ref.payoff)
    assert (fast.counts is None) == (ref.counts is None)
    if fast.counts is not None:
        assert_achieves(inp, fast)
        assert_achieves(inp, ref)


@given(h=st.lists(st.one_of(st.floats(0, 100), st.just(math.inf)), min_size=1, max_size=12),
       c=st.lists(st.floats(0, 100), min_size=1, max_size=6))
@example(h=[1.0, math.inf, 1.0], c=[0.0, 0.0, 1e-12])  # a tie within ARG_RTOL
@settings(max_examples=60, deadline=None)
def test_minplus_step_is_the_min_plus_convolution(h: list[float], c: list[float]) -> None:
    ha, ca = np.array(h), np.sort(np.array(c))
    new, arg = minplus_step(ha, ca, len(h) - 1)
    for d in range(len(h)):
        vals = [ha[d - n] + ca[n] for n in range(min(d, len(c) - 1) + 1)]
        # the tie rule keeps the largest n within ARG_RTOL of the minimum (float noise)
        assert min(vals) <= new[d] <= min(vals) + ARG_RTOL * min(vals)
        if new[d] < math.inf:
            assert 0 <= arg[d] <= d and ha[d - arg[d]] + ca[arg[d]] == new[d]


def test_nonconvex_slot_costs_defeat_a_plain_greedy_but_not_the_search() -> None:
    """Two identical slots, one PS per 2 workers: 4 workers cost less as 2 + 2 than 3 + 1."""
    cluster = make_cluster([(4, 8, 8, 10)], [(8, 8, 10)])
    job = make_job(work=4, window=2, max_workers=3, worker=(1, 1, 1, 1), ps=(1, 1, 2),
                   utility=Utility(kind="constant", value=100.0))
    ledger = Ledger(cluster, 2, fixed_params(10.0, 1.0, 1000.0, 1.0))
    inp = ledger.inputs(job)
    best = solve_fast(inp, floor=-math.inf)
    assert best.counts is not None
    assert sorted(best.counts.tolist()) == [2, 2]
    assert close(best.payoff, solve_brute(inp, floor=-math.inf).payoff)


@pytest.mark.parametrize("window", [1, 5, 40])
def test_identical_idle_slots_give_the_same_optimum_as_the_literal_dp(window: int) -> None:
    """The stationary-run skip and the pruning leave the optimum unchanged on an idle cluster."""
    cluster = make_cluster([(4, 16, 16, 10)] * 3, [(8, 8, 10)] * 2)
    job = make_job(work=23, window=window, max_workers=5, ps=(1, 1, 3),
                   utility=Utility(kind="sigmoid", value=50.0, decay=0.1, target=8.0))
    ledger = Ledger(cluster, window, fixed_params(20.0, 0.5, 20.0, 0.5))
    inp = ledger.inputs(job)
    ref, fast = solve_literal(inp, floor=-math.inf), solve_fast(inp, floor=-math.inf)
    assert close(ref.payoff, fast.payoff)
    if fast.counts is not None:
        assert_achieves(inp, fast)


def test_no_feasible_schedule_gives_no_counts() -> None:
    cluster = make_cluster([(1, 8, 8, 10)], [(8, 8, 10)])
    job = make_job(work=5, window=2, max_workers=2)  # at most 1 worker per slot fits
    inp = Ledger(cluster, 2, fixed_params(5.0, 0.1, 5.0, 0.1)).inputs(job)
    for solve in (solve_fast, solve_literal, solve_brute):
        best = solve(inp, floor=-math.inf)
        assert best.counts is None and best.payoff == -math.inf


@st.composite
def convex_inputs(draw: st.DrawFn) -> JobInputs:
    """Integer prices and one PS per worker (b = B): every slot cost is convex in n."""
    from psched.oasis.ledger import PoolInputs

    n_slots, n_srv = draw(st.integers(1, 6)), draw(st.integers(1, 3))
    n = draw(st.integers(1, 4))
    work = draw(st.integers(1, n * n_slots))
    job = make_job(work=work, window=n_slots, max_workers=n, ps=(1, 1, 1))

    def pool(k: int) -> PoolInputs:
        price = np.array(draw(st.lists(st.integers(1, 9), min_size=n_slots * k,
                                       max_size=n_slots * k)), float).reshape(n_slots, k, 1)
        resid = np.array(draw(st.lists(st.integers(0, 3), min_size=n_slots * k,
                                       max_size=n_slots * k)), float).reshape(n_slots, k, 1)
        return PoolInputs(servers=np.arange(k), price=price, resid=resid,
                          demand=np.ones(1), norm=np.ones(1))

    util = np.sort(np.array(draw(st.lists(st.integers(0, 200), min_size=n_slots,
                                          max_size=n_slots)), float))[::-1]
    return JobInputs(job=job, start=0, util=util.copy(), workers=pool(n_srv), ps=pool(2),
                     ps_needed=np.arange(n + 1))


def min_cost_flow_cost(costs: np.ndarray, work: int, last: int) -> float:
    """Least cost of ``work`` workers in slots 0..last by networkx min-cost flow."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_node("s", demand=-work)
    g.add_node("z", demand=work)
    for i in range(last + 1):
        g.add_edge("s", ("slot", i), capacity=work, weight=0)
        for j in range(1, costs.shape[1]):
            if np.isfinite(costs[i, j]):
                g.add_edge(("slot", i), ("unit", i, j), capacity=1,
                           weight=round(float(costs[i, j] - costs[i, j - 1])))
                g.add_edge(("unit", i, j), "z", capacity=1, weight=0)
    try:
        flow = nx.min_cost_flow(g)
    except nx.NetworkXUnfeasible:
        return math.inf
    return float(nx.cost_of_flow(g, flow))


@settings(max_examples=40, deadline=None)
@given(inp=convex_inputs())
def test_fast_search_matches_min_cost_flow_when_slot_costs_are_convex(inp: JobInputs) -> None:
    costs = slot_costs(inp)
    assert np.all(np.diff(np.diff(costs[np.isfinite(costs).all(axis=1)], axis=1), axis=1)
                  >= -1e-9)  # convex rows (rows fully finite)
    best = -math.inf
    for last in range(inp.n_slots):
        best = max(best, float(inp.util[last]) - min_cost_flow_cost(costs, inp.job.work, last))
    fast = solve_fast(inp, floor=-math.inf)
    assert close(fast.payoff, best)
