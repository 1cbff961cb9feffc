"""A density floor for admission: the ``density_floor`` lever of ``oasis-rp``.

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

from collections.abc import Sequence
from typing import Any

import numpy as np

from psched.model import RESOURCES, Cluster, Job, Pool

__all__ = ["REJECT_DENSITY", "clearing_density", "clearing_density_reference", "job_size",
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
    """The amounts of a :class:`~psched.model.Resources` in :data:`RESOURCES` order."""
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
