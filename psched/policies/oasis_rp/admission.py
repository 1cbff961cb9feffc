"""Admission in ``oasis-rp``: which arrivals are decided first, and which are turned away
before any search for room.

Two rules sit on top of the exact search at own-usage prices
(:mod:`psched.policies.oasis_rp.own`):

1. **Density order** (:func:`density_order`). The arrivals of one slot are held and decided
   together at that slot's boundary, before anything runs, densest first.
2. **Density floor** (``density_floor``, :func:`clearing_density`). An arrival whose best
   schedule earns too little per unit of capacity is rejected (:data:`REJECT_DENSITY`).

Density order
-------------
OASiS decides arrivals one at a time, in the order they come, and every admission is a promise
that later arrivals must respect. In a slotted model the jobs that arrive in the same slot are
simultaneous: their order in the trace is an accident. On the ElasticFlow traces a slot often
brings more jobs than the cluster can serve before their deadlines (ElasticFlow cluster10, slot
184: twelve 1-worker jobs whose utility is worth something only in that slot, two fit; the
first two in the trace, worth 36.9 and 33.7, took the slot, the 94.4 and 88.5 behind them were
rejected). Here a job arriving in slot ``t`` is held (the loop's deferred
admission, :meth:`psched.core.loop.SchedulerLoop.admit_held`) and the slot's arrivals are
decided at the boundary of the same slot, before anything runs, in the order of
:func:`density_order`: utility per unit of the cluster it would occupy. Each is then decided
exactly as an arrival (the exact search, re-pack, promise); nothing else changes, and with one
arrival per slot the order changes nothing.

The density of job ``i`` is ``f_i(fastest) / (W_i * s_i)``, with ``s_i`` the dominant share of
the cluster one of its workers occupies together with the PS it needs: per pool, one container
takes ``1 / C`` of it, ``C`` being how many such containers fit the empty pool (whole
containers per server, ``sum_h min_r floor(c_h^r / w^r)``: packing, not only volume, e.g. two
20 Gbps PS on a 50 Gbps server); ``s_i = max(1 / C_worker, rho_i / C_ps)`` with
``rho_i = ps_needed(N_i) / N_i`` PS per worker. Ties keep arrival order.

Density floor
-------------
OASiS's prices charge almost nothing until a server is nearly full (``ln(U/L)`` is 25-45 on
the scenarios here), and when an early job arrives the slots ahead are still empty, so any
job with a positive utility is admitted, however little it earns per unit of capacity; its
promise then holds that capacity against later, denser jobs (the worked Fig. 5 instances of
``BENCHMARKS.md`` section 11). The floor prices capacity by what the whole trace asks of it,
as U and L are priced ("hindsight": the trace; "history": a history trace).

A job's *size* is its work times its dominant share: per worker-slot, the largest fraction
of a pool's total capacity, over resources, that one worker (in the worker pool) or its PS
share (``b/B`` PS per worker, in the PS pool) takes. One slot of the whole cluster is size 1;
the horizon is size ``T``. Its *density* is its utility at the fastest duration over its size.
The **clearing density** ``rho*`` is the density at which the densest jobs' sizes first add
up to the horizon's capacity (0 if all of them fit: then no floor). With ``density_floor =
theta > 0`` an arrival whose best schedule earns less than ``theta * rho*`` per unit of size is
rejected (``REJECT_DENSITY``), before any re-pack.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from psched.core.model import RESOURCES, Cluster, Job, Pool, Resources
from psched.core.placement import room

__all__ = ["REJECT_DENSITY", "FitCounts", "clearing_density", "clearing_density_reference",
           "containers_that_fit", "density", "density_order", "job_size",
           "pool_totals"]


#: Rejection reason: the best schedule earns less per unit of capacity than the floor.
REJECT_DENSITY = "density<floor"


def pool_totals(cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
    """Total capacity per resource of the worker pool and of the PS pool. O(servers)."""
    return (cluster.capacity[cluster.indices(Pool.WORKER)].sum(axis=0),
            cluster.capacity[cluster.indices(Pool.PS)].sum(axis=0))


def job_size(job: Job, cluster: Cluster,
             totals: tuple[np.ndarray, np.ndarray] | None = None) -> float:
    """Work times dominant share (one slot of the whole cluster = 1); ``inf`` if a pool
    lacks a resource the job needs. ``totals``: :func:`pool_totals` of ``cluster``, if
    known. O(resources), plus O(servers) without ``totals``."""
    spec = job.spec
    worker_total, ps_total = pool_totals(cluster) if totals is None else totals
    share = 0.0
    for total, need in ((worker_total, spec.worker_demand.as_array()),
                        (ps_total, spec.ps_demand.as_array() * spec.ps_ratio)):
        ok = total > 0
        if np.any(need[~ok] > 0):
            return float("inf")
        if ok.any():
            share = max(share, float(np.max(need[ok] / total[ok])))
    return job.work * share


def clearing_density(jobs: Sequence[Job], cluster: Cluster, horizon: int) -> float:
    """The density at which the densest ``jobs`` first fill ``horizon`` slots of the whole
    cluster; 0.0 if they all fit (or there are none).

    Exactly :func:`clearing_density_reference`, vectorised: the dominant share is computed
    once per distinct demand (the same divisions and maximum as :func:`job_size`), the sizes
    and densities by the same float operations elementwise, the stable sort by density and a
    sequential running sum (``np.cumsum`` adds in order, as the loop does). At 80,000 jobs
    about 1 s instead of 4 s (``tests/test_rp_setup_fast.py``). O(n log n) in the jobs."""
    totals = pool_totals(cluster)
    shares: dict[tuple[float, ...], float] = {}
    utils: dict[tuple[Any, int], float] = {}  # f(fastest) per (utility, fastest)
    share = np.empty(len(jobs))
    work = np.empty(len(jobs))
    best = np.empty(len(jobs))
    for i, job in enumerate(jobs):
        spec = job.spec
        key = (*_amounts(spec.worker_demand), *_amounts(spec.ps_demand), spec.ps_ratio)
        got = shares.get(key)
        if got is None:
            got = shares[key] = _share(spec, totals)
        share[i] = got
        work[i] = job.work
        u_key = (spec.utility, job.fastest)
        u = utils.get(u_key)
        if u is None:
            u = utils[u_key] = job.utility_at(job.fastest)
        best[i] = u
    size = work * share
    keep = (size > 0.0) & (size < float("inf"))
    size, dens = size[keep], best[keep] / size[keep]
    order = np.argsort(-dens, kind="stable")
    filled = np.cumsum(size[order])
    hit = np.nonzero(filled >= horizon)[0]
    return float(dens[order[hit[0]]]) if hit.size else 0.0


def _amounts(res: Any) -> tuple[float, ...]:
    """The amounts of a :class:`~psched.core.model.Resources` in :data:`RESOURCES` order."""
    return tuple(float(getattr(res, r)) for r in RESOURCES)


def _share(spec: Any, totals: tuple[np.ndarray, np.ndarray]) -> float:
    """The dominant share of one worker (with its PS share) of ``spec``: :func:`job_size`
    per unit of work (``inf`` if a pool lacks a resource the job needs)."""
    share = 0.0
    for total, need in ((totals[0], spec.worker_demand.as_array()),
                        (totals[1], spec.ps_demand.as_array() * spec.ps_ratio)):
        ok = total > 0
        if np.any(need[~ok] > 0):
            return float("inf")
        if ok.any():
            share = max(share, float(np.max(need[ok] / total[ok])))
    return share


def clearing_density_reference(jobs: Sequence[Job], cluster: Cluster, horizon: int) -> float:
    """:func:`clearing_density` job by job (:func:`job_size`, a sort, a running sum): the
    reference it is tested against. O(n log n) in the jobs."""
    rows = []
    totals = pool_totals(cluster)
    for job in jobs:
        size = job_size(job, cluster, totals)
        if 0.0 < size < float("inf"):
            rows.append((job.utility_at(job.fastest) / size, size))
    rows.sort(key=lambda r: -r[0])
    filled = 0.0
    for density, size in rows:
        filled += size
        if filled >= horizon:
            return float(density)
    return 0.0


def containers_that_fit(cluster: Cluster, pool: Pool, demand: np.ndarray) -> int:
    """How many containers of ``demand`` (one per resource) fit the empty ``pool``: the sum
    over its servers of ``min_r floor(c^r / demand^r)`` over the resources demanded. O(S R)."""
    cap = cluster.capacity[cluster.indices(pool)]
    if not (demand > 0).any() or cap.shape[0] == 0:
        return 0 if cap.shape[0] == 0 else 1 << 30
    return int(room(cap, demand, 1 << 30).sum())


class FitCounts:
    """:func:`containers_that_fit` on one cluster, computed once per (pool, demand): a
    trace's jobs share a few container shapes. O(S R) per distinct demand, O(1) after."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._got: dict[tuple[Pool, Resources], int] = {}

    def __call__(self, pool: Pool, demand: Resources) -> int:
        """How many containers of ``demand`` fit the empty ``pool``."""
        key = (pool, demand)
        got = self._got.get(key)
        if got is None:
            got = self._got[key] = containers_that_fit(self.cluster, pool, demand.as_array())
        return got


def density(job: Job, cluster: Cluster, fits: FitCounts | None = None) -> float:
    """Utility per unit of dominant cluster share over the job's work (module docstring):
    ``f(fastest) / (W s)``; 0 for a job that cannot fit or earns nothing. ``fits``: a
    :class:`FitCounts` of ``cluster`` (the same counts, kept between calls). O(S R), O(1)
    with ``fits`` for a demand seen before."""
    spec = job.spec
    if fits is None:
        n_w = containers_that_fit(cluster, Pool.WORKER, spec.worker_demand.as_array())
        n_ps = containers_that_fit(cluster, Pool.PS, spec.ps_demand.as_array())
    else:
        n_w, n_ps = fits(Pool.WORKER, spec.worker_demand), fits(Pool.PS, spec.ps_demand)
    n = spec.max_workers
    if n_w <= 0 or job.work <= 0 or (job.ps_needed(n) > 0 and n_ps <= 0):
        return 0.0
    share = max(1.0 / n_w, (job.ps_needed(n) / n) / n_ps if n_ps > 0 else 0.0)
    return job.utility_at(job.fastest) / (job.work * share)


def density_order(jobs: Sequence[Job], cluster: Cluster,
                  density_of: Callable[[Job], float] | None = None) -> list[Job]:
    """``jobs`` densest first (:func:`density` on ``cluster``, or ``density_of`` -- e.g. a
    cache of it); equal densities keep their order (stable). O(J S R + J log J)."""
    of = density_of if density_of is not None else (lambda j: density(j, cluster))
    keys = [-of(j) for j in jobs]
    return [jobs[i] for i in sorted(range(len(jobs)), key=keys.__getitem__)]
