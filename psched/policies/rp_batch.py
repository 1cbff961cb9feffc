"""The arrivals of one slot decided together, densest first: the ``batch`` lever of ``oasis-rp``.

OASiS decides arrivals one at a time, in the order they come, and every admission is a promise
that later arrivals must respect. In a slotted model the jobs that arrive in the same slot are
simultaneous: their order in the trace is an accident. On the ElasticFlow traces a slot often
brings more jobs than the cluster can serve before their deadlines (ElasticFlow cluster10, slot
184: twelve 1-worker jobs whose utility is worth something only in that slot, two fit; the
first two in the trace, worth 36.9 and 33.7, took the slot, the 94.4 and 88.5 behind them were
rejected). With the ``batch`` lever a job arriving in slot ``t`` is held (the loop's deferred
admission, :meth:`psched.simulator.SchedulerLoop.admit_held`) and the slot's arrivals are
decided at the boundary of the same slot, before anything runs, in the order of
:func:`density_order`: utility per unit of the cluster it would occupy. Each is then decided
exactly as an arrival (the exact search, re-pack, promise); nothing else changes, and with one
arrival per slot the run is the one of the unbatched policy.

The density of job ``i`` is ``f_i(fastest) / (W_i * s_i)``, with ``s_i`` the dominant share of
the cluster one of its workers occupies together with the PS it needs: per pool, one container
takes ``1 / C`` of it, ``C`` being how many such containers fit the empty pool (whole
containers per server, ``sum_h min_r floor(c_h^r / w^r)``: packing, not only volume, e.g. two
20 Gbps PS on a 50 Gbps server); ``s_i = max(1 / C_worker, rho_i / C_ps)`` with
``rho_i = ps_needed(N_i) / N_i`` PS per worker. Ties keep arrival order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from psched.model import Cluster, Job, Pool, Resources
from psched.placement import room

__all__ = ["FitCounts", "containers_that_fit", "density", "density_order"]


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
