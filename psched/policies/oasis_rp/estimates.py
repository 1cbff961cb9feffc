"""Online estimates: what ``oasis-rp`` knows of the workload from the jobs that have arrived.

With ``price_source="online"`` (the default) the policy reads nothing of a job before its
arrival. The figures that OASiS takes as known "from past experience" are estimated from
the arrivals so far instead:

* **U, L and eta** (:class:`OnlineBounds`): exactly the bounds of
  :func:`psched.oasis.prices.params_from_jobs` over the jobs that have arrived, kept as running
  maxima and minima (U can only rise and L only fall as jobs arrive), so that after the last
  arrival they equal the hindsight bounds bit for bit (``tests/test_rp_estimates.py``). The
  start: the first arrival's own bounds (until a job arrives nothing is priced). The prices
  change when a bound does; the certificate stays valid, since weak duality holds for any
  non-negative prices and every ``mu_i`` is recomputed at the final prices by the exact search
  (:func:`psched.oasis.dual.dual_objective`).
* **The density floor** (:class:`LocalFloor`): the clearing density of the jobs that arrived
  in the last ``span`` slots against ``span`` slots of the whole cluster -- the density at
  which the densest of them first fill that capacity (0 while they all fit: no floor).
  ``span`` is the median window (:attr:`psched.core.model.Job.window`) of the jobs that have
  arrived: the stretch of time over which a job's utility is at stake, so over which recent
  demand competes for the same capacity. In a burst the floor rises (recent demand is above
  capacity) and falls again after it; over a whole trace whose jobs fit the horizon it would
  be 0 (the hindsight floor, ``price_source="hindsight"``, is the clearing density of every
  job against the horizon).

The median window is recomputed at the first 64 arrivals, then when the count reaches a
power of two or a multiple of 256 (it moves slowly; each recomputation is O(n)).
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from psched.core.model import Cluster, Job, Pool
from psched.oasis.prices import (
    POOLS,
    PriceParams,
    end_utility_log,
    log_utility_one,
    mean_capacity,
    normalise,
)
from psched.policies.oasis_rp.admission import job_size, pool_totals

__all__ = ["LocalFloor", "OnlineBounds", "refresh_due"]


def refresh_due(n: int) -> bool:
    """Whether a running figure over ``n`` observations is recomputed now (every one of the
    first 64, then at powers of two and multiples of 256)."""
    return n <= 64 or n & (n - 1) == 0 or n % 256 == 0


class OnlineBounds:
    """U, L and eta of :func:`psched.oasis.prices.params_from_jobs` over the jobs observed so far.

    Per pool: ``log U^r`` the running maximum of ``log f(F) - log w~^r``, ``eta`` the running
    maximum of ``T c~ / size`` (at least 1) and ``log L + log 4 eta`` the running minimum of
    ``log f_end - log size``, each term computed by the same float operations as there.
    O(R) per job; :meth:`params` builds a :class:`~psched.oasis.prices.PriceParams` when a bound
    changed.
    """

    def __init__(self, cluster: Cluster, horizon: int) -> None:
        self.horizon = horizon
        self.jobs: list[Job] = []  #: the jobs observed (kept: servers may join)
        self._reset(cluster)

    def _reset(self, cluster: Cluster) -> None:
        self._cbar = [mean_capacity(cluster, pool) for pool in POOLS]
        self._total = []
        for pool, cbar in zip(POOLS, self._cbar, strict=True):
            idx = cluster.indices(pool)
            self._total.append(float(normalise(cluster.capacity[idx], cbar).sum())
                               if idx.size else 0.0)
        self._log_u = [np.full(cbar.shape, -np.inf) for cbar in self._cbar]
        self._low = [math.inf, math.inf]  # min of log f_end - log size, per pool
        self._eta = [1.0, 1.0]
        self._sized = [False, False]  # some job has a positive size in the pool
        self._params: PriceParams | None = None

    def grow(self, cluster: Cluster) -> None:
        """Servers joined: the bounds again from the jobs observed, on the new cluster."""
        jobs, self.jobs = self.jobs, []
        self._reset(cluster)
        for job in jobs:
            self.observe(job)

    def observe(self, job: Job) -> bool:
        """Take ``job`` into the bounds (a job with an empty window or no utility is not a
        reference job and changes nothing). True if a bound changed."""
        log_first = log_utility_one(job, 1)
        if job.window <= 0 or not math.isfinite(log_first):
            return False
        self.jobs.append(job)
        log_fast = log_utility_one(job, job.fastest)
        log_end = end_utility_log(job, log_first)
        changed = len(self.jobs) == 1
        for i, pool in enumerate(POOLS):
            spec = job.spec
            demand = (spec.worker_demand if pool == Pool.WORKER else spec.ps_demand).as_array()
            dn = normalise(demand, self._cbar[i])
            with np.errstate(divide="ignore"):
                per = np.where(dn > 0, log_fast - np.log(np.where(dn > 0, dn, 1.0)), -np.inf)
            if np.any(per > self._log_u[i]):
                self._log_u[i] = np.maximum(self._log_u[i], per)
                changed = True
            size = float(job.work) * float(dn.sum())
            if size > 0 and self._total[i] > 0:
                self._sized[i] = True
                eta = max(1.0, self.horizon * self._total[i] / size)
                low = log_end - math.log(size)
                if eta > self._eta[i] or low < self._low[i]:
                    self._eta[i] = max(self._eta[i], eta)
                    self._low[i] = min(self._low[i], low)
                    changed = True
        if changed:
            self._params = None
        return changed

    def params(self) -> PriceParams | None:
        """The bounds so far (``source="online"``), or None before the first reference job."""
        if not self.jobs:
            return None
        if self._params is None:
            log_u: list[np.ndarray] = []
            log_l: list[float] = []
            for i in range(len(POOLS)):
                lu = self._log_u[i]
                finite = np.isfinite(lu)
                top = float(lu[finite].max()) if finite.any() else 0.0
                log_u.append(np.where(finite, lu, top))
                log_l.append(self._low[i] - math.log(4.0 * self._eta[i]) if self._sized[i]
                             else top)
            self._params = PriceParams(
                log_u=(np.maximum(log_u[0], log_l[0]), np.maximum(log_u[1], log_l[1])),
                log_l=(log_l[0], log_l[1]),
                eta=(self._eta[0] if self._sized[0] else 1.0,
                     self._eta[1] if self._sized[1] else 1.0),
                source="online")
        return self._params


class LocalFloor:
    """The clearing density of the recent arrivals (module docstring): O(log n) per arrival,
    O(k log k) per slot for the k jobs that arrived within the span. Every arrival is kept
    (three numbers): the span is the median window so far and may grow, taking older
    arrivals back into the recent demand."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.totals = pool_totals(cluster)
        self.span = 1  #: slots of recent arrivals that compete (the median window)
        self._windows: list[int] = []
        self._arrivals: list[int] = []  # sorted
        self._rows: list[tuple[float, float]] = []  # (density, size), as _arrivals
        self._at: int | None = None
        self._rho = 0.0

    def observe(self, job: Job) -> None:
        """Take an arrival into the recent demand (and the median window)."""
        self._windows.append(job.window)
        if refresh_due(len(self._windows)):
            self.span = max(1, int(np.median(self._windows)))
            self._at = None
        size = job_size(job, self.cluster, self.totals)
        if 0.0 < size < math.inf:
            at = bisect.bisect_right(self._arrivals, job.spec.arrival)
            self._arrivals.insert(at, job.spec.arrival)
            self._rows.insert(at, (job.utility_at(job.fastest) / size, size))
            self._at = None

    def rho(self, t: int) -> float:
        """The clearing density of the arrivals of slots ``t - span + 1 .. t`` against
        ``span`` slots of the cluster (0 if they fit)."""
        if self._at == t:
            return self._rho
        lo = bisect.bisect_right(self._arrivals, t - self.span)
        hi = bisect.bisect_right(self._arrivals, t)
        self._at, self._rho = t, 0.0
        if hi > lo:
            rows = np.array(self._rows[lo:hi])
            order = np.argsort(-rows[:, 0], kind="stable")
            hit = np.nonzero(np.cumsum(rows[order, 1]) >= self.span)[0]
            if hit.size:
                self._rho = float(rows[order[hit[0]], 0])
        return self._rho
