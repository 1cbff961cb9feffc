"""As-late-as-possible plans within a promise: the ``repack_late`` lever of ``oasis-rp``.

When a re-pack must move admitted jobs to make room for an urgent arrival, the cheapest
schedule within each job's promise (:func:`psched.policies.oasis_rp.book.search` with a constant
utility) packs it *early* whenever prices are flat (near the floor ``L``, the usual case:
the earliest completion wins ties), so it takes back exactly the slots the newcomer needed.
:func:`search_latest` plans a job's remaining work to complete **as late as its promise
allows**, and within that completion as late as possible (the search's tie rule: the most
workers in the latest slots), leaving the early slots to jobs with closer deadlines -- the
earliest-deadline-first order, applied to plans.

One job alone decides its own slots (the others' plans are fixed in the ledger), so the
workers it can have in a slot are a prefix ``0..n_t`` (the finite slot costs of
:func:`psched.oasis.schedule.slot_costs`: workers and the PS they need both fit), and a
completion in slot ``d`` is feasible iff ``n_d >= 1`` and ``sum_{t <= d} n_t >= W``. The
latest such ``d`` is taken and the work filled backwards from it, each slot at its most (the
search's tie rule 2, most workers in the latest slots); placement within a slot is the usual
cheapest-first greedy. Prices do not enter (cost is not minimised). Exactness of the
completion slot is tested against enumeration.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from psched.core.model import Job
from psched.oasis.schedule import placement_tables, schedule_allocs, slot_costs, unit_prices
from psched.policies.oasis_rp.book import PlanLedger
from psched.policies.oasis_rp.plans import Found
from psched.policies.oasis_rp.search import priced_pools, slot_allocs, window_inputs, window_tables

__all__ = ["search_latest", "search_latest_reference", "search_latest_runs"]


def search_latest(ledger: PlanLedger, job: Job, *, start: int, work: int,
                  deadline: int) -> Found:
    """A schedule of ``work`` worker-slots of ``job`` in ``start..deadline`` that completes
    as late as possible and is filled backwards from there (most workers in the latest
    slots), at the ledger's residual capacities; empty if none exists. ``payoff`` is
    meaningless (0, or ``-inf`` if none).

    Run-compressed (:func:`search_latest_runs`) unless the ledger was made with
    ``fast=False`` (:func:`search_latest_reference`); both give the same result.
    Complexity: the slot costs over the window, O(Tw (H + K) R + Tw N log(H + K)) for the
    reference, O(U (H + K) R + U N log(H + K) + Tw) for U runs of identical slots.
    """
    if ledger.fast:
        return search_latest_runs(ledger, job, start=start, work=work, deadline=deadline)
    return search_latest_reference(ledger, job, start=start, work=work, deadline=deadline)


def search_latest_reference(ledger: PlanLedger, job: Job, *, start: int, work: int,
                            deadline: int) -> Found:
    """:func:`search_latest` composed literally: the job's priced inputs over the whole
    window, its slot costs, the latest feasible completion, the work filled backwards."""
    none = Found(payoff=-math.inf, schedule={})
    inp = window_inputs(ledger, job, start=start, work=work, deadline=deadline)
    if inp is None:
        return none
    tables = placement_tables(inp)
    finite = np.isfinite(slot_costs(inp, tables))
    n_cap = np.where(finite.all(axis=1), finite.shape[1], np.argmin(finite, axis=1)) - 1
    ok = np.flatnonzero((n_cap >= 1) & (np.cumsum(n_cap) >= work))
    if ok.size == 0:
        return none
    counts = np.zeros(inp.n_slots, dtype=np.int64)
    left = int(work)
    for i in range(int(ok[-1]), -1, -1):
        counts[i] = min(left, int(n_cap[i]))
        left -= int(counts[i])
        if left == 0:
            break
    return Found(payoff=0.0, schedule=schedule_allocs(inp, counts, tables))


def search_latest_runs(ledger: PlanLedger, job: Job, *, start: int, work: int,
                       deadline: int) -> Found:
    """Exactly :func:`search_latest_reference`, run-compressed: container caps once per run
    of identical slots (:func:`~psched.policies.oasis_rp.search.run_tables`, the same operations
    on the same rows as the reference), the feasibility count first (when the window cannot
    hold the work no completion is feasible), the workers per slot from the caps alone (the
    count of finite slot costs; prices are finite), the backward fill vectorised, prices
    only for the placement, one placement per (run, workers)
    (:func:`~psched.policies.oasis_rp.search.slot_allocs`). O(U (H + K) R + U H log H + Tw)."""
    none = Found(payoff=-math.inf, schedule={})
    last = min(job.last_slot, deadline)
    t0 = max(job.arrival, start)
    if work <= 0 or last < t0:
        return none
    sub = replace(job, work=int(work), window=last - job.arrival + 1)
    tab, fit = window_tables(ledger, sub, t0, last + 1)
    if fit < sub.work:
        return none
    # the reference's count of finite slot costs, per run: n workers cost a finite amount
    # iff they fit (n <= min(N, containers that fit)) and so do their PS (ps_needed[n] <=
    # PS containers that fit; ps_needed is non-decreasing), as prices are finite
    n_ps = np.searchsorted(tab.ps_needed, tab.caps[1].sum(axis=1), side="right") - 1
    n_run = np.minimum(np.minimum(tab.caps[0].sum(axis=1), sub.max_workers), n_ps)
    n_cap = n_run[tab.row_of]
    ok = np.flatnonzero((n_cap >= 1) & (np.cumsum(n_cap) >= work))
    if ok.size == 0:
        return none
    # backwards from the latest feasible completion, each slot at its most until the work
    # is placed (n_cap >= 0: the slot cost of no workers is 0)
    d = int(ok[-1])
    back = np.cumsum(n_cap[d::-1])  # work placed in slots d, d-1, ..., d-i
    k = int(np.searchsorted(back, work, side="left"))  # the slot d-k completes the work
    counts = np.zeros(tab.n_slots, dtype=np.int64)
    counts[d - k + 1:d + 1] = n_cap[d - k + 1:d + 1]
    counts[d - k] = work - (int(back[k - 1]) if k else 0)
    w_pool, p_pool = priced_pools(ledger, tab)  # the placement's prices, as the reference's
    return Found(payoff=0.0, schedule=slot_allocs(tab, (unit_prices(w_pool), unit_prices(p_pool)),
                                              counts))
