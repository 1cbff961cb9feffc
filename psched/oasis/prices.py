"""OASiS resource prices (22)-(26): parameters U, L, eta and the exponential price curve.

Prices follow Bao et al., "Online Job Scheduling in Distributed Machine Learning Clusters",
INFOCOM 2018, eqs. (22)-(26), on the normalised amounts of ``oasis.md`` section 7:

* every demand and capacity is divided by the mean capacity of that resource in its pool,
  ``w~ = w / c_bar`` (a resource the pool lacks, ``c_bar = 0``, is dropped);
* ``p_h^r(t) = L (U^r / L) ** (g_h^r(t) / c_h^r)``, one scalar ``L`` per pool, computed in log
  space: ``log p = log L + u (log U^r - log L)``.

Decisions on the paper's gaps (each tested in ``tests/test_prices.py``):

* **U** ``U^r = max_i f_i(F_i) / w~_i^r`` with ``F_i = ceil(W_i / N_i)`` the fastest duration
  (the paper's printed "- a_i" is read as the duration); jobs with ``w~_i^r = 0`` drop out of
  the max. A resource no reference job demands gets the largest U of its pool.
* **L** ``L = 1/(4 eta) min_i f_i^end / (W_i sum_r w~_i^r)`` where ``f_i^end`` is the utility at
  the end of the job's window (its last allowed duration), floored at ``1e-6 f_i(1)`` -- the
  window's own utility floor -- so that it is never 0. The PS pool uses ``W_i sum_r s~_i^r``.
* **eta** the smallest value the paper's condition allows,
  ``eta = max_i T sum_h sum_r c~_h^r / (W_i sum_r w~_i^r)``, and at least 1 (so that at zero
  load every job in the reference set has a positive payoff).
* **Estimates** ``estimate_factor`` scales U with L fixed (Fig. 6). If an estimate puts U below
  L, U is raised to L (prices then stay flat rather than fall with load).
* Reference jobs are those with a non-empty window and ``f(1) > 0``.
* **Ties** between schedules of equal priced payoff are broken by one rule in every search
  (fast, literal DP, brute force; :mod:`psched.oasis.schedule`): the earliest completion
  slot, then the most workers in the completion slot, then in the slot before, and so on.
  Prices therefore evolve identically whichever search a run uses.

All logarithms are kept so that no utility in the float range overflows; costs are evaluated
in units of ``exp(log_scale)`` (the largest U), so scaled prices lie in ``(0, 1]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from psched.core.model import RESOURCES, WINDOW_UTILITY_FLOOR, Cluster, Job, Pool, Resources

__all__ = [
    "POOLS",
    "PriceParams",
    "end_utility_log",
    "fixed_params",
    "log_prices",
    "log_utility",
    "log_utility_one",
    "mean_capacity",
    "normalise",
    "params_from_jobs",
]

#: The two pools in the order of every per-pool tuple here: workers, then PS.
POOLS: tuple[Pool, Pool] = (Pool.WORKER, Pool.PS)


@dataclass(frozen=True, kw_only=True)
class PriceParams:
    """U, L and eta of both pools, in log space, on normalised amounts."""

    log_u: tuple[np.ndarray, np.ndarray]  #: log U^r per pool, shape (R,)
    log_l: tuple[float, float]  #: log L per pool
    eta: tuple[float, float]  #: eta_1, eta_2 (1.0 for explicit prices)
    source: str = "hindsight"  #: where they came from: hindsight, history or fixed

    @property
    def log_scale(self) -> float:
        """log of the cost unit: the largest U over both pools."""
        return float(max(np.max(self.log_u[0]), np.max(self.log_u[1])))

    @property
    def alpha(self) -> float:
        """Theorem 4's ``alpha = max(1, max_r ln(U1^r/L1), max_r ln(U2^r/L2))``."""
        spans = [float(np.max(u)) - lo for u, lo in zip(self.log_u, self.log_l, strict=True)]
        return max(1.0, *spans)

    def scaled(self, factor: float) -> PriceParams:
        """The estimate ``factor * U`` with L fixed (U raised to L where it would fall below)."""
        if not (factor > 0 and math.isfinite(factor)):
            raise ValueError(f"estimate_factor must be positive and finite, got {factor!r}")
        lu = tuple(np.maximum(u + math.log(factor), lo)
                   for u, lo in zip(self.log_u, self.log_l, strict=True))
        return replace(self, log_u=(lu[0], lu[1]))

    def bounds(self) -> dict[str, object]:
        """U and L of both pools (``U_worker`` per resource, ``L_worker``, ``U_ps``,
        ``L_ps``), as :meth:`to_dict` gives them."""
        d = self.to_dict()
        return {k: d[k] for k in ("U_worker", "L_worker", "U_ps", "L_ps")}

    def to_dict(self) -> dict[str, object]:
        """U and L in plain units (``inf`` where they exceed the float range)."""
        out: dict[str, object] = {"price_source": self.source}
        for name, lu, ll, eta in zip(("worker", "ps"), self.log_u, self.log_l, self.eta,
                                     strict=True):
            out[f"U_{name}"] = {r: _safe_exp(v) for r, v in zip(RESOURCES, lu, strict=True)}
            out[f"L_{name}"] = _safe_exp(ll)
            out[f"eta_{name}"] = eta
        return out


def _safe_exp(x: float) -> float:
    return math.exp(x) if x < 709.0 else math.inf


def mean_capacity(cluster: Cluster, pool: Pool) -> np.ndarray:
    """``c_bar^r``: mean capacity of every resource over the servers of ``pool``, shape (R,)."""
    idx = cluster.indices(pool)
    if idx.size == 0:
        return np.zeros(len(RESOURCES))
    return np.asarray(cluster.capacity[idx].mean(axis=0), dtype=float)


def normalise(amount: np.ndarray, cbar: np.ndarray) -> np.ndarray:
    """``amount / c_bar`` along the last axis; 0 for resources the pool lacks (``c_bar = 0``)."""
    safe = np.where(cbar > 0, cbar, 1.0)
    return np.where(cbar > 0, np.asarray(amount, dtype=float) / safe, 0.0)


def log_utility(job: Job, duration: int | np.ndarray) -> np.ndarray:
    """``log f(d)`` without underflow for sigmoid utilities (``-inf`` where f is 0)."""
    u = job.spec.utility
    d = np.asarray(duration, dtype=float)
    if u.kind == "sigmoid":
        if u.value <= 0:
            return np.full_like(d, -np.inf)
        return np.asarray(math.log(u.value) - np.logaddexp(0.0, u.decay * (d - u.target)))
    with np.errstate(divide="ignore"):
        return np.asarray(np.log(np.asarray(u(d), dtype=float)))


def log_utility_one(job: Job, duration: int) -> float:
    """``float(log_utility(job, duration))`` for one duration: for a sigmoid the same float
    operations on Python floats (IEEE ``- *`` round alike) with ``logaddexp`` taken by the
    same numpy ufunc on one element; any other kind through :func:`log_utility`. O(1)."""
    u = job.spec.utility
    if u.kind != "sigmoid":
        return float(log_utility(job, duration))
    if u.value <= 0:
        return -math.inf
    return math.log(u.value) - float(np.logaddexp(0.0, u.decay * (float(duration) - u.target)))


def end_utility_log(job: Job, log_first: float | None = None) -> float:
    """log of the utility at the end of the job's window, floored at ``1e-6 f(1)``
    (``log_first``: ``log f(1)`` if known)."""
    end = log_utility_one(job, job.window)
    first = log_utility_one(job, 1) if log_first is None else log_first
    return max(end, first + math.log(WINDOW_UTILITY_FLOOR))


def params_from_jobs(jobs: Sequence[Job], cluster: Cluster, horizon: int,
                     source: str = "hindsight") -> PriceParams:
    """U, L and eta of both pools from a set of reference jobs (paper eqs. (23)-(26)).

    Complexity O(n_jobs R). Raises ``ValueError`` if no job qualifies as a reference job.
    """
    first = [(j, log_utility_one(j, 1)) for j in jobs if j.window > 0]
    ref = [j for j, lf in first if math.isfinite(lf)]
    if not ref:
        raise ValueError(f"no reference jobs for {source} prices (need a non-empty window "
                         "and positive utility)")
    log_fast = np.array([log_utility_one(j, j.fastest) for j in ref])
    log_end = np.array([end_utility_log(j, lf) for j, lf in first if math.isfinite(lf)])
    work = np.array([float(j.work) for j in ref])
    log_u: list[np.ndarray] = []
    log_l: list[float] = []
    etas: list[float] = []
    for pool in POOLS:
        cbar = mean_capacity(cluster, pool)
        dem = _demands([j.spec.worker_demand if pool == Pool.WORKER else j.spec.ps_demand
                        for j in ref])
        dn = normalise(dem, cbar)  # (J, R)
        with np.errstate(divide="ignore"):
            per = np.where(dn > 0, log_fast[:, None] - np.log(np.where(dn > 0, dn, 1.0)),
                           -np.inf)
        lu = per.max(axis=0)
        top = float(lu[np.isfinite(lu)].max()) if np.isfinite(lu).any() else 0.0
        log_u.append(np.where(np.isfinite(lu), lu, top))
        idx = cluster.indices(pool)
        total_cap = float(normalise(cluster.capacity[idx], cbar).sum()) if idx.size else 0.0
        size = work * dn.sum(axis=1)
        ok = size > 0
        if not ok.any() or total_cap <= 0:
            etas.append(1.0)
            log_l.append(top)
            continue
        eta = max(1.0, float(np.max(horizon * total_cap / size[ok])))
        etas.append(eta)
        log_l.append(float(np.min(log_end[ok] - np.log(size[ok]))) - math.log(4.0 * eta))
    lu0 = np.maximum(log_u[0], log_l[0])
    lu1 = np.maximum(log_u[1], log_l[1])
    return PriceParams(log_u=(lu0, lu1), log_l=(log_l[0], log_l[1]),
                       eta=(etas[0], etas[1]), source=source)


def _demands(amounts: Sequence[Resources]) -> np.ndarray:
    """``np.array([a.as_array() for a in amounts])``, each distinct amount read once (a
    trace's jobs share a few container shapes), shape (J, R). O(J R)."""
    rows: dict[Resources, np.ndarray] = {}
    out = [rows.get(a) for a in amounts]
    for i, got in enumerate(out):
        if got is None:
            a = amounts[i]
            out[i] = rows[a] = a.as_array()
    return np.array(out).reshape(len(amounts), len(RESOURCES))


def fixed_params(u_worker: float | Mapping[str, float], l_worker: float,
                 u_ps: float | Mapping[str, float], l_ps: float) -> PriceParams:
    """Explicit U (a scalar for every resource, or one per resource name) and L per pool."""

    def vec(u: float | Mapping[str, float], lo: float) -> np.ndarray:
        if isinstance(u, Mapping):
            missing = set(RESOURCES) - set(u)
            if missing:
                raise ValueError(f"U is missing resources {sorted(missing)}")
            arr = np.array([float(u[r]) for r in RESOURCES])
        else:
            arr = np.full(len(RESOURCES), float(u))
        if np.any(arr <= 0) or lo <= 0:
            raise ValueError("U and L must be positive")
        return np.asarray(np.log(np.maximum(arr, lo)))

    return PriceParams(log_u=(vec(u_worker, l_worker), vec(u_ps, l_ps)),
                       log_l=(math.log(l_worker), math.log(l_ps)), eta=(1.0, 1.0),
                       source="fixed")


def log_prices(usage: np.ndarray, capacity: np.ndarray, log_u: np.ndarray,
               log_l: float) -> np.ndarray:
    """``log p = log L + (g / c) (log U - log L)`` for usage ``(..., H, R)``, capacity ``(H, R)``.

    Utilisation is clipped to [0, 1]; a resource with zero capacity is priced at L (no
    container that demands it can be placed there anyway).
    """
    cap = np.where(capacity > 0, capacity, 1.0)
    util = np.clip(np.where(capacity > 0, usage / cap, 0.0), 0.0, 1.0)
    return log_l + util * (log_u - log_l)
