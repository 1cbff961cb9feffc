"""Pricing that charges a job for its own usage: lever (f) of ``oasis-rp``.

OASiS prices every container of an arriving job at the price *before* the job's own usage,
``p_h^r(g)``: a job whose containers fill a server alone pays the zero-load price ``L`` for all
of them (the paper assumes demands small against capacities). Here the ``k``-th container a
job puts on server ``h`` in a slot pays for the stretch of the price curve it occupies,
``g + (k-1) w .. g + k w`` on every resource ``r`` (``p(g + x) = p(g) exp(a x)``,
``a = ln(U^r/L) / c_h^r``):

* ``"integral"``: the mean price over that stretch,
  ``w~ p(g) exp(a (k-1) w) (exp(a w) - 1) / (a w)`` -- the integral of the price curve over
  the job's own usage;
* ``"after"``: the price at its end, ``w~ p(g) exp(a k w)``.

Both are increasing in ``k`` on each server (convex), so the cheapest ``n`` containers of a
slot are the ``n`` cheapest *marginal* units over all servers (greedy is exact for separable
convex costs with one count), and the exact best-schedule search
(:func:`psched.oasis.solve_fast`, which takes any slot-cost table) stays exact for this cost.
With ``a = 0`` (``U = L``) both equal OASiS's price. Ties: the lower server index, then the
lower ``k`` (the stable order of the unit table).

Only the *decision* changes (which job is admitted, with which schedule); the ledger's usage,
the prices others see and the dual certificate (:func:`psched.oasis.dual.dual_objective`, at
the final prices, valid for any non-negative prices) are those of OASiS.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from psched.model import Alloc, Job
from psched.oasis.fast import solve_fast
from psched.oasis.ledger import JobInputs, PoolInputs
from psched.oasis.schedule import placement_tables
from psched.policies.rp_book import Found, PlanLedger, window_inputs
from psched.policies.rp_dp import solve_compiled
from psched.policies.rp_search import Schedule, priced_pools, window_tables
from psched.policies.rp_units import marginal_units_kept
from psched.prices import log_utility

__all__ = ["OWN_PRICES", "OwnUnits", "cheapest_units", "marginal_units", "search_own",
           "search_own_reference", "search_own_runs"]

#: The options of ``oasis-rp``'s ``own_price``: "off" is OASiS's price before the usage.
OWN_PRICES = ("off", "integral", "after")


@dataclass(frozen=True, kw_only=True)
class OwnUnits:
    """Marginal unit prices of one pool over a job's window, one row per run of slots."""

    marg: np.ndarray  #: (U, H, K) price of the k-th container on server h; inf beyond capacity
    #: (U, min(limit, H*K)) the cheapest units of each run, cheapest first (stable)
    order: np.ndarray
    costs: np.ndarray  #: (U, K_max + 1) cost of the n cheapest units; inf beyond capacity


def marginal_units(pool: PoolInputs, caps: np.ndarray, a: np.ndarray, limit: int,
                   mode: str) -> OwnUnits:
    """Marginal unit prices and cheapest-``n`` costs of one pool.

    Parameters
    ----------
    pool : the pool's inputs restricted to one slot per run (price (U, H, R) in cost units).
    caps : (U, H) containers that fit per run and server.
    a : (H, R) ``ln(U^r/L) / c_h^r`` (0 where the capacity is 0).
    limit : the most containers of this pool the job ever needs in a slot.
    mode : ``"integral"`` or ``"after"``.

    Complexity O(U H K R + U H K log(H K)), ``K = min(limit, max caps)``.
    """
    n_runs, n_srv = caps.shape
    k_max = int(min(limit, caps.max(initial=0)))
    if k_max == 0 or n_srv == 0:
        z = np.zeros((n_runs, n_srv, 0))
        costs = np.full((n_runs, limit + 1), np.inf)
        costs[:, 0] = 0.0
        return OwnUnits(marg=z, order=np.zeros((n_runs, 0), dtype=np.intp), costs=costs)
    ad = a * pool.demand[None, :]  # (H, R) exponent per container
    with np.errstate(invalid="ignore", divide="ignore"):
        stretch = (np.where(ad > 0, np.expm1(ad) / np.where(ad > 0, ad, 1.0), 1.0)
                   if mode == "integral" else np.exp(ad))
    k = np.arange(k_max)
    # (U, H, K): sum_r norm_r p_hr exp(ad_hr k) stretch_hr
    weight = pool.price * (pool.norm[None, None, :] * stretch[None, :, :])  # (U, H, R)
    grow = np.exp(ad[None, :, :] * k[:, None, None])  # (K, H, R)
    marg = np.einsum("uhr,khr->uhk", weight, grow)
    marg = np.where(k[None, None, :] < caps[:, :, None], marg, np.inf)
    flat = marg.reshape(n_runs, -1)
    order = cheapest_units(flat, limit)
    ranked = np.take_along_axis(flat, order, axis=1)
    costs = np.full((n_runs, limit + 1), np.inf)
    costs[:, 0] = 0.0
    costs[:, 1:ranked.shape[1] + 1] = np.cumsum(ranked, axis=1)
    return OwnUnits(marg=marg, order=order, costs=costs)


def cheapest_units(flat: np.ndarray, limit: int) -> np.ndarray:
    """Per row of ``flat`` (U, M), the positions of its ``min(limit, M)`` cheapest entries,
    cheapest first, ties by position: exactly the first ``limit`` columns of
    ``np.argsort(flat, axis=1, kind="stable")``, without sorting whole rows. The
    ``limit``-th smallest value ``v`` of each row (``np.partition``) splits it: every entry
    below ``v`` is taken, then the entries equal to ``v`` by position, and the ``limit``
    taken (kept in position order) are sorted stably by value. No NaN in ``flat`` (prices
    and ``inf`` only). O(U M) plus O(U limit log limit)."""
    n_rows, m = flat.shape
    k = min(limit, m)
    if k == 0:
        return np.zeros((n_rows, 0), dtype=np.intp)
    if k == 1:
        return np.asarray(np.argmin(flat, axis=1)[:, None])  # the first smallest: stable
    if 4 * k >= m:
        return np.argsort(flat, axis=1, kind="stable")[:, :k]
    v = np.partition(flat, k - 1, axis=1)[:, k - 1:k]
    below = flat < v
    tie = flat == v
    room = k - below.sum(axis=1, keepdims=True)
    take = below | (tie & (np.cumsum(tie, axis=1) <= room))
    pos = np.nonzero(take)[1].reshape(n_rows, k)  # each row's k, in position order
    vals = np.take_along_axis(flat, pos, axis=1)
    return np.take_along_axis(pos, np.argsort(vals, axis=1, kind="stable"), axis=1)


def _slope(ledger: PlanLedger, pool: int) -> np.ndarray:
    """``ln(U^r/L) / c_h^r`` per server and resource of ``pool`` (0 where ``c = 0``)."""
    cap = ledger.capacity[pool]
    span = ledger.params.log_u[pool] - ledger.params.log_l[pool]
    return np.asarray(np.where(cap > 0, span[None, :] / np.where(cap > 0, cap, 1.0), 0.0))


def _rows(pool: PoolInputs, starts: np.ndarray) -> PoolInputs:
    return PoolInputs(servers=pool.servers, price=pool.price[starts],
                      resid=pool.resid[starts], demand=pool.demand, norm=pool.norm)


def _place(units: OwnUnits, row: int, n: int) -> dict[int, int]:
    """Containers per server (pool position) of the ``n`` cheapest units of run ``row``."""
    k = units.marg.shape[2]
    got: dict[int, int] = {}
    for h in (units.order[row, :n] // k).tolist():
        got[h] = got.get(h, 0) + 1
    return dict(sorted(got.items()))  # by position, as np.unique gave them


def search_own(ledger: PlanLedger, job: Job, *, start: int, work: int, deadline: int,
               mode: str, floor: float = 0.0) -> Found:
    """The exact best schedule of ``work`` worker-slots of ``job`` in ``start..deadline``
    when each container pays for its own stretch of the price curve (``mode``, see the
    module docstring), at the ledger's prices and residual capacities.

    The same contract as :func:`psched.policies.rp_book.search` with ``flat=False``: the
    payoff ``f(d) - own-usage cost`` in cost units (``floor`` if nothing beats it).
    Run-compressed and compiled (:func:`search_own_runs`) unless the ledger was made with
    ``fast=False`` (:func:`search_own_reference`); both give the same result.
    Complexity: :func:`marginal_units` per run of identical slots, then the exact search.
    """
    if mode not in OWN_PRICES[1:]:
        raise ValueError(f"own-usage price mode must be one of {OWN_PRICES[1:]}, got {mode!r}")
    if ledger.fast:
        return search_own_runs(ledger, job, start=start, work=work, deadline=deadline,
                               mode=mode, floor=floor)
    return search_own_reference(ledger, job, start=start, work=work, deadline=deadline,
                                mode=mode, floor=floor)


def search_own_runs(ledger: PlanLedger, job: Job, *, start: int, work: int, deadline: int,
                    mode: str, floor: float = 0.0) -> Found:
    """Exactly :func:`search_own_reference`, run-compressed: container caps and prices per
    run of identical slots (:func:`~psched.policies.rp_search.run_tables`), the feasibility
    count first (nothing priced when the window cannot hold the work), the marginal units
    with their per-job terms kept and the selection compiled
    (:func:`~psched.policies.rp_units.marginal_units_kept`), the compiled
    recursion (:func:`~psched.policies.rp_dp.solve_compiled`). Each number is computed by the
    same operations on the same rows as there, so the result is bit-identical
    (``tests/test_rp_search.py``). O(U (H + K) R + U H K log(H K) + Tw N) plus the recursion."""
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
    wu = marginal_units_kept(ledger, 0, w_pool, tab.caps[0], sub.max_workers, mode)
    pu = marginal_units_kept(ledger, 1, p_pool, tab.caps[1], int(psn[-1]), mode)
    costs = (wu.costs + pu.costs[:, psn])[tab.row_of]
    log_f = log_utility(sub, np.arange(t0 - sub.arrival + 1, t1 - sub.arrival + 1))
    inp = JobInputs(job=sub, start=t0, util=np.exp(log_f - ledger.log_scale), workers=w_pool,
                    ps=p_pool, ps_needed=psn, runs=tab.starts)  # the recursion reads these
    best = solve_compiled(inp, costs, floor, row_of=tab.row_of)
    if best.counts is None:
        return Found(payoff=best.payoff, schedule={})
    out = Schedule()
    made: dict[tuple[int, int], Alloc] = {}  # one placement per (run, workers): the same rows
    for i in np.nonzero(best.counts)[0]:
        n, row = int(best.counts[i]), int(tab.row_of[i])
        alloc = made.get((row, n))
        if alloc is None:
            w = _place(wu, row, n)
            p = _place(pu, row, int(psn[n]))
            alloc = made[(row, n)] = Alloc.of(
                {int(w_pool.servers[h]): c for h, c in w.items()},
                {int(p_pool.servers[h]): c for h, c in p.items()})
        out[t0 + int(i)] = alloc
    return Found(payoff=best.payoff, schedule=out)


def search_own_reference(ledger: PlanLedger, job: Job, *, start: int, work: int,
                         deadline: int, mode: str, floor: float = 0.0) -> Found:
    """:func:`search_own` composed literally: the job's priced inputs over the whole window,
    its placement tables, the marginal units per run, then :func:`~psched.oasis.solve_fast`.
    The reference :func:`search_own_runs` is tested against."""
    inp = window_inputs(ledger, job, start=start, work=work, deadline=deadline)
    if inp is None:
        return Found(payoff=floor, schedule={})
    tables = placement_tables(inp)
    starts, row_of = inp.run_index()
    n_ps = int(inp.ps_needed[-1])
    wu = marginal_units(_rows(inp.workers, starts), tables.caps[0][starts], _slope(ledger, 0),
                        job.max_workers, mode)
    pu = marginal_units(_rows(inp.ps, starts), tables.caps[1][starts], _slope(ledger, 1),
                        n_ps, mode)
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
