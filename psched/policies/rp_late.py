"""As-late-as-possible plans within a promise: the ``repack_late`` lever of ``oasis-rp``.

When a re-pack must move admitted jobs to make room for an urgent arrival, the cheapest
schedule within each job's promise (:func:`psched.policies.rp_book.search` with a constant
utility) packs it *early* whenever prices are flat (near the floor ``L``, the usual case:
the earliest completion wins ties), so it takes back exactly the slots the newcomer needed.
:func:`search_latest` plans a job's remaining work to complete **as late as its promise
allows**, and within that completion as late as possible (the search's tie rule: the most
workers in the latest slots), leaving the early slots to jobs with closer deadlines -- the
earliest-deadline-first order, applied to plans.

It is the exact search (:func:`psched.oasis.solve_fast`) with the utility replaced by a steep
ramp ``big * (i + 1)`` for completion in window slot ``i``: ``big`` exceeds the cost of any
schedule, so a later feasible completion always wins, and among schedules completing there
the cheaper (then the tie rule) wins.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from psched.model import Job
from psched.oasis.fast import solve_fast
from psched.oasis.schedule import placement_tables, schedule_allocs, slot_costs
from psched.policies.rp_book import Found, PlanLedger

__all__ = ["search_latest"]


def search_latest(ledger: PlanLedger, job: Job, *, start: int, work: int,
                  deadline: int) -> Found:
    """A schedule of ``work`` worker-slots of ``job`` in ``start..deadline`` that completes
    as late as possible (then cheapest, then the tie rule) at the ledger's residual
    capacities; empty if none exists. ``payoff`` is meaningless (``-inf`` if none).

    Complexity: that of :func:`~psched.oasis.solve_fast` over the window (no pruning helps:
    the latest completion is searched first-to-last).
    """
    last = min(job.last_slot, deadline)
    if work <= 0 or last < max(start, job.arrival):
        return Found(payoff=-math.inf, schedule={})
    sub = replace(job, work=int(work), window=last - job.arrival + 1)
    inp = ledger.inputs(sub, start=start)
    if inp.n_slots == 0:
        return Found(payoff=-math.inf, schedule={})
    tables = placement_tables(inp)
    costs = slot_costs(inp, tables)
    finite = costs[np.isfinite(costs)]
    big = 1.0 + inp.n_slots * float(np.max(np.abs(finite), initial=0.0))
    ramp = replace(inp, util=big * np.arange(1, inp.n_slots + 1, dtype=float))
    best = solve_fast(ramp, -math.inf, costs=costs)
    if best.counts is None:
        return Found(payoff=-math.inf, schedule={})
    return Found(payoff=best.payoff, schedule=schedule_allocs(inp, best.counts, tables))
