"""The elastic-training MIP allocator (Hu et al., arXiv 2109.03389, 2021; ``elastic_mip.md``).

Re-solved at every arrival and completion over running and queued jobs together
(:class:`~psched.policies.epoch.Epoch`), with HiGHS through :func:`scipy.optimize.milp`::

    max  sum_j w_j p_j / W_j  -  sum_j sum_t w_j (o_j s_j(a_j) / W_j) u_jt
    s.t. sum_n x_jnt <= 1                          one configuration per job and interval
         sum_j sum_n n w_j^r x_jnt <= C_worker^r   worker pool, every resource, every t
         sum_j sum_n ps_j(n) s_j^r x_jnt <= C_ps^r PS pool (PS by the ratio), every r, t
         p_j <= sum_t sum_n Delta s_j(n) x_jnt,  0 <= p_j <= W_j
         sum_n x_jn1 = 1                           running jobs are not pre-empted
         u_jt >= x_jnt - x_jn,t-1                  (x_jn0 = 1 iff n = a_j)
         [anti-starvation] sum_n x_jn1 <= sum_n x_in1  for consecutive fitting queued i < j

``x`` binary, ``u`` continuous in [0, 1] (it is minimised, and its lower bounds are 0 or 1),
``p`` continuous. Capping progress by ``p`` (not the allocation) keeps the problem feasible when
a running job's remaining work is below one interval at its smallest count: the running jobs at
their current counts are always a feasible point (they fit the cluster now).

The policy solves with a per-solve time limit (``time_limit_s``, default 0.35 s: the paper's
0.4 s per decision, less the model building) and relative gap ``mip_rel_gap`` (default 1e-4),
keeping the best solution found; :meth:`ElasticMipPolicy.report` gives how many solves stopped
at the limit and the mean and worst relative gap to HiGHS's dual bound. If HiGHS returns no
solution it falls back to the marginal-gain greedy (always feasible) and counts the fallback;
if a solve stopped at the limit with a plan worse than that greedy's (same objective), the
greedy plan is used (counted as ``greedy_better``): the allocator is never below its baseline.
A solve that stops at the time limit depends on the machine's speed: runs are then not
bit-for-bit reproducible (``mip_not_optimal`` says when this happened).

Complexity: J sum |N_j| T' binaries; with T' = 1 it is a multiple-choice knapsack with up to
2R capacity rows. Its LP bound is within a few per cent, but proving optimality for a couple of
hundred jobs can take HiGHS seconds (``benchmarks/bench_rivals.py``): hence the time limit.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from psched.policies.base import register_policy
from psched.policies.epoch import Epoch, EpochPolicy, feasible, objective
from psched.policies.greedy import marginal_gain

__all__ = ["ElasticMipPolicy", "MipResult", "solve_mip"]


@dataclass(frozen=True, kw_only=True)
class MipResult:
    """One solve."""

    plan: np.ndarray  #: counts, J x T'
    objective: float  #: the MIP's objective of ``plan``
    optimal: bool  #: HiGHS proved optimality (within ``mip_rel_gap``)
    found: bool  #: HiGHS returned a solution at all
    gap: float = 0.0  #: relative gap between ``objective`` and HiGHS's dual bound


class _Rows:
    """A sparse constraint matrix built row by row."""

    def __init__(self) -> None:
        self.r: list[int] = []
        self.c: list[int] = []
        self.v: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []

    def add(self, cols: np.ndarray, vals: np.ndarray, lo: float, hi: float) -> None:
        i = len(self.lo)
        self.r.extend([i] * len(cols))
        self.c.extend(int(c) for c in cols)
        self.v.extend(float(v) for v in vals)
        self.lo.append(lo)
        self.hi.append(hi)


def solve_mip(epoch: Epoch, *, time_limit_s: float = 0.35, mip_rel_gap: float = 1e-4,
              presolve: bool = False) -> MipResult:
    """Solve one epoch's MIP (module docstring). O(HiGHS) on J sum|N_j| T' binaries.

    HiGHS's presolve is off by default: on a few hundred jobs it alone can outlast a sub-second
    limit (measured: 1.2 s at 500 jobs, no solution), while without it the first incumbent
    comes at once and the gap closes from there.
    """
    J, T = len(epoch.ids), epoch.intervals
    sizes = [a.size for a in epoch.allowed]
    xoff = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64) * T
    nx = int(xoff[-1])
    has_u = epoch.penalty > 0
    uoff = np.full(J, -1, dtype=np.int64)
    uoff[has_u] = nx + np.arange(int(has_u.sum())) * T
    nu = int(has_u.sum()) * T
    poff = nx + nu
    nvar = poff + J

    def xs(j: int, t: int) -> np.ndarray:
        cols: np.ndarray = xoff[j] + t * sizes[j] + np.arange(sizes[j])
        return cols

    rows = _Rows()
    for j in range(J):
        for t in range(T):
            rows.add(xs(j, t), np.ones(sizes[j]),
                     1.0 if (t == 0 and epoch.current[j] > 0) else 0.0, 1.0)
    for t in range(T):
        for demand, cap, per_n in ((epoch.worker_demand, epoch.worker_cap, epoch.allowed),
                                   (epoch.ps_demand, epoch.ps_cap, epoch.ps)):
            for r in range(cap.shape[0]):
                cols = np.concatenate([xs(j, t) for j in range(J)])
                vals = np.concatenate([per_n[j] * demand[j, r] for j in range(J)])
                keep = vals > 0
                if keep.any():
                    rows.add(cols[keep], vals[keep], -np.inf, float(cap[r]))
    for j in range(J):
        cols = np.concatenate([[poff + j]] + [xs(j, t) for t in range(T)])
        vals = np.concatenate([[1.0]] + [-epoch.interval_slots * epoch.speed[j]] * T)
        rows.add(cols, vals, -np.inf, 0.0)
        if not has_u[j]:
            continue
        other = xs(j, 0)[epoch.allowed[j] != epoch.current[j]]
        rows.add(np.concatenate([[uoff[j]], other]),
                 np.concatenate([[1.0], -np.ones(other.size)]), 0.0, np.inf)
        for t in range(1, T):
            for k in range(sizes[j]):
                now, before = xs(j, t)[k], xs(j, t - 1)[k]
                rows.add(np.array([uoff[j] + t, now, before]), np.array([1.0, -1.0, 1.0]),
                         0.0, np.inf)
    if epoch.anti_starvation:
        chain = epoch.starvation_chain()
        for i, j in itertools.pairwise(chain):
            rows.add(np.concatenate([xs(j, 0), xs(i, 0)]),
                     np.concatenate([np.ones(sizes[j]), -np.ones(sizes[i])]), -np.inf, 0.0)

    c = np.zeros(nvar)
    c[poff:] = -epoch.weight / epoch.remaining
    for ju in np.flatnonzero(has_u):
        c[uoff[ju]:uoff[ju] + T] = epoch.penalty[ju]
    lb = np.zeros(nvar)
    ub = np.ones(nvar)
    ub[poff:] = epoch.remaining
    integrality = np.zeros(nvar)
    integrality[:nx] = 1
    a = coo_matrix((rows.v, (rows.r, rows.c)), shape=(len(rows.lo), nvar)).tocsr()
    res = milp(c, constraints=LinearConstraint(a, rows.lo, rows.hi), integrality=integrality,
               bounds=Bounds(lb, ub),
               options={"time_limit": time_limit_s, "mip_rel_gap": mip_rel_gap,
                        "presolve": presolve, "disp": False})
    plan = np.zeros((J, T), dtype=np.int64)
    if res.x is None:
        return MipResult(plan=plan, objective=-np.inf, optimal=False, found=False)
    x = res.x
    for j in range(J):
        for t in range(T):
            on = np.flatnonzero(x[xs(j, t)] > 0.5)
            if on.size:
                plan[j, t] = epoch.allowed[j][on[0]]
    bound = getattr(res, "mip_dual_bound", None)
    gap = (abs(float(bound) - float(res.fun)) / max(abs(float(res.fun)), 1e-12)
           if bound is not None and np.isfinite(bound) else 0.0)
    return MipResult(plan=plan, objective=float(-res.fun), optimal=res.status == 0, found=True,
                     gap=gap)


@register_policy("elastic-mip")
class ElasticMipPolicy(EpochPolicy):
    """The MIP allocator, re-solved at every event; options as :class:`EpochPolicy` plus the
    solver's ``time_limit_s`` and ``mip_rel_gap``."""

    name = "elastic-mip"

    def __init__(self, *, time_limit_s: float = 0.35, mip_rel_gap: float = 1e-4,
                 **options: Any) -> None:
        super().__init__(**options)
        self.time_limit_s = time_limit_s  #: per-solve limit, seconds
        self.mip_rel_gap = mip_rel_gap  #: HiGHS relative gap
        self._stats = {"solves": 0, "not_optimal": 0, "fallbacks": 0, "greedy_better": 0}
        self._gaps: list[float] = []

    def reset(self) -> None:
        super().reset()
        self._stats = dict.fromkeys(self._stats, 0)
        self._gaps = []

    def choose(self, epoch: Epoch) -> np.ndarray:
        res = solve_mip(epoch, time_limit_s=self.time_limit_s, mip_rel_gap=self.mip_rel_gap)
        self._stats["solves"] += 1
        self._stats["not_optimal"] += int(not res.optimal)
        if res.found:
            self._gaps.append(res.gap)
        greedy = marginal_gain(epoch)
        if not (res.found and feasible(epoch, res.plan)):
            self._stats["fallbacks"] += 1
            return greedy
        if (not res.optimal and feasible(epoch, greedy)
                and objective(epoch, greedy) > objective(epoch, res.plan) + 1e-12):
            self._stats["greedy_better"] += 1  # a time-limited solve that stopped early
            return greedy
        return res.plan

    def report(self) -> dict[str, Any]:
        out = super().report()
        out.update({f"mip_{k}": v for k, v in self._stats.items()})
        out["mip_gap_mean"] = float(np.mean(self._gaps)) if self._gaps else None
        out["mip_gap_max"] = float(np.max(self._gaps)) if self._gaps else None
        return out
