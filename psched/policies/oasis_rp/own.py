"""Own-usage pricing of ``oasis-rp``'s admission searches: each container pays the mean price
over its own stretch of the price curve.

OASiS prices every container of an arriving job at the price *before* the job's own usage,
``p_h^r(g)``: a job whose containers fill a server alone pays the zero-load price ``L`` for all
of them (the paper assumes demands small against capacities). Here the ``k``-th container a
job puts on server ``h`` in a slot pays the mean price over the stretch of the price curve it
occupies, ``g + (k-1) w .. g + k w`` on every resource ``r`` (``p(g + x) = p(g) exp(a x)``,
``a = ln(U^r/L) / c_h^r``): ``w~ p(g) exp(a (k-1) w) (exp(a w) - 1) / (a w)``, the integral
of the price curve over the job's own usage.

It is increasing in ``k`` on each server (convex), so the cheapest ``n`` containers of a
slot are the ``n`` cheapest *marginal* units over all servers (greedy is exact for separable
convex costs with one count), and the exact best-schedule search
(:func:`psched.oasis.solve_fast`, which takes any slot-cost table) stays exact for this cost.
With ``a = 0`` (``U = L``) it equals OASiS's price. Ties: the lower server index, then the
lower ``k`` (the stable order of the unit table). The unit prices are
:mod:`psched.policies.oasis_rp.units`.

Only the *decision* changes (which job is admitted, with which schedule); the ledger's usage,
the prices others see and the dual certificate (:func:`psched.oasis.dual.dual_objective`, at
the final prices, valid for any non-negative prices) are those of OASiS.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from psched.core.model import Alloc, Job
from psched.oasis.fast import solve_fast
from psched.oasis.ledger import JobInputs, PoolInputs
from psched.oasis.prices import log_utility
from psched.oasis.schedule import placement_tables
from psched.policies.oasis_rp.book import PlanLedger
from psched.policies.oasis_rp.dp import solve_compiled
from psched.policies.oasis_rp.kernels import own_groups_compiled
from psched.policies.oasis_rp.plans import Found
from psched.policies.oasis_rp.search import (
    assemble,
    placed_slots,
    priced_pools,
    window_inputs,
    window_tables,
)
from psched.policies.oasis_rp.units import (
    OwnUnits,
    marginal_units,
    marginal_units_kept,
    price_slope,
)

__all__ = ["search_own", "search_own_reference", "search_own_runs"]


def _rows(pool: PoolInputs, starts: np.ndarray) -> PoolInputs:
    return PoolInputs(servers=pool.servers, price=pool.price[starts],
                      resid=pool.resid[starts], demand=pool.demand, norm=pool.norm)


def _place(units: OwnUnits, row: int, n: int) -> dict[int, int]:
    """Containers per server (pool position) of the ``n`` cheapest units of run ``row``."""
    k = units.k
    got: dict[int, int] = {}
    for h in (units.order[row, :n] // k).tolist():
        got[h] = got.get(h, 0) + 1
    return dict(sorted(got.items()))  # by position, as np.unique gave them


def search_own(ledger: PlanLedger, job: Job, *, start: int, work: int, deadline: int,
               floor: float = 0.0) -> Found:
    """The exact best schedule of ``work`` worker-slots of ``job`` in ``start..deadline``
    when each container pays the mean price over its own stretch of the price curve
    (the module docstring), at the ledger's prices and residual capacities.

    The same contract as :func:`psched.policies.oasis_rp.search.search` with ``flat=False``: the
    payoff ``f(d) - own-usage cost`` in cost units (``floor`` if nothing beats it).
    Run-compressed and compiled (:func:`search_own_runs`) unless the ledger was made with
    ``fast=False`` (:func:`search_own_reference`); both give the same result.
    Complexity: :func:`marginal_units` per run of identical slots, then the exact search.
    """
    if ledger.fast:
        return search_own_runs(ledger, job, start=start, work=work, deadline=deadline,
                               floor=floor)
    return search_own_reference(ledger, job, start=start, work=work, deadline=deadline,
                                floor=floor)


def search_own_runs(ledger: PlanLedger, job: Job, *, start: int, work: int, deadline: int,
                    floor: float = 0.0) -> Found:
    """Exactly :func:`search_own_reference`, run-compressed: container caps and prices per
    run of identical slots (:func:`~psched.policies.oasis_rp.search.run_tables`), the feasibility
    count first (nothing priced when the window cannot hold the work), the marginal units
    with their per-job terms kept and the selection compiled
    (:func:`~psched.policies.oasis_rp.units.marginal_units_kept`), the compiled
    recursion (:func:`~psched.policies.oasis_rp.dp.solve_compiled`). Each number is computed by the
    same operations on the same rows as there, so the result is bit-identical
    (``tests/test_rp_search.py``). O(U (H + K) R + U (H K + N log H) + Tw N) plus the
    recursion."""
    last = min(job.last_slot, deadline)
    t0 = max(job.arrival, start)
    if work <= 0 or last < t0:
        return Found(payoff=floor, schedule={})
    sub = replace(job, work=int(work), window=last - job.arrival + 1)
    t1 = last + 1
    tab, fit = window_tables(ledger, sub, t0, t1)
    if fit < sub.work:
        return Found(payoff=floor, schedule={})
    w_pool, p_pool = priced_pools(ledger, tab)
    psn = tab.ps_needed
    wu = marginal_units_kept(ledger, 0, w_pool, tab.caps[0], sub.max_workers)
    pu = marginal_units_kept(ledger, 1, p_pool, tab.caps[1], int(psn[-1]))
    costs = (wu.costs + pu.costs[:, psn])[tab.row_of]
    log_f = log_utility(sub, np.arange(t0 - sub.arrival + 1, t1 - sub.arrival + 1))
    inp = JobInputs(job=sub, start=t0, util=np.exp(log_f - ledger.log_scale), workers=w_pool,
                    ps=p_pool, ps_needed=psn, runs=tab.starts)  # the recursion reads these
    best = solve_compiled(inp, costs, floor, row_of=tab.row_of)
    if best.counts is None:
        return Found(payoff=best.payoff, schedule={})
    # one placement per (run, workers), compiled: the units _place takes, servers ascending
    slots, rows, ns, key = placed_slots(best.counts, tab.row_of)
    w, p = (own_groups_compiled(units.order, units.k, rows, need, pool.servers, key)
            for units, pool, need in ((wu, w_pool, ns), (pu, p_pool, psn[ns])))
    return Found(payoff=best.payoff, schedule=assemble(slots + t0, w, p))


def search_own_reference(ledger: PlanLedger, job: Job, *, start: int, work: int,
                         deadline: int, floor: float = 0.0) -> Found:
    """:func:`search_own` composed literally: the job's priced inputs over the whole window,
    its placement tables, the marginal units per run, then :func:`~psched.oasis.solve_fast`.
    The reference :func:`search_own_runs` is tested against."""
    inp = window_inputs(ledger, job, start=start, work=work, deadline=deadline)
    if inp is None:
        return Found(payoff=floor, schedule={})
    tables = placement_tables(inp)
    starts, row_of = inp.run_index()
    n_ps = int(inp.ps_needed[-1])
    wu = marginal_units(_rows(inp.workers, starts), tables.caps[0][starts], price_slope(ledger, 0),
                        job.max_workers)
    pu = marginal_units(_rows(inp.ps, starts), tables.caps[1][starts], price_slope(ledger, 1),
                        n_ps)
    costs = (wu.costs + pu.costs[:, inp.ps_needed])[row_of]
    best = solve_fast(inp, floor, costs=costs)
    if best.counts is None:
        return Found(payoff=best.payoff, schedule={})
    out: dict[int, Alloc] = {}
    for i in np.nonzero(best.counts)[0]:
        n, row = int(best.counts[i]), int(row_of[i])
        w = _place(wu, row, n)
        p = _place(pu, row, int(inp.ps_needed[n]))
        out[inp.start + int(i)] = Alloc.of(
            {int(inp.workers.servers[h]): c for h, c in w.items()},
            {int(inp.ps.servers[h]): c for h, c in p.items()})
    return Found(payoff=best.payoff, schedule=out)
