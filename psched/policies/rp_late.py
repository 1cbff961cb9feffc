"""As-late-as-possible plans within a promise: the ``repack_late`` lever of ``oasis-rp``.

When a re-pack must move admitted jobs to make room for an urgent arrival, the cheapest
schedule within each job's promise (:func:`psched.policies.rp_book.search` with a constant
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

import numpy as np

from psched.model import Job
from psched.oasis.schedule import placement_tables, schedule_allocs, slot_costs
from psched.policies.rp_book import Found, PlanLedger, window_inputs

__all__ = ["search_latest"]


def search_latest(ledger: PlanLedger, job: Job, *, start: int, work: int,
                  deadline: int) -> Found:
    """A schedule of ``work`` worker-slots of ``job`` in ``start..deadline`` that completes
    as late as possible and is filled backwards from there (most workers in the latest
    slots), at the ledger's residual capacities; empty if none exists. ``payoff`` is
    meaningless (0, or ``-inf`` if none). Complexity: the slot costs over the window,
    O(Tw (H + K) R + Tw N log(H + K)).
    """
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
