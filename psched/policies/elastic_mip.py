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

The policy solves within a per-decision budget (``time_limit_s``, default 0.35 s, for building
the epoch and the model and solving: the paper's 0.4 s per decision, less placement) and
relative gap ``mip_rel_gap`` (default 1e-4), keeping the best solution found;
:meth:`ElasticMipPolicy.report` gives how many solves stopped at the limit and the mean and
worst relative gap to HiGHS's dual bound. If HiGHS returns no solution it falls back to the
better of two greedy plans (always feasible): the marginal-gain baseline and
:func:`~psched.policies.greedy.density_fill`, a primal heuristic shaped like the optimum; if a
solve stopped at the limit with a plan worse than the better greedy's (same objective), that
plan is used (counted as ``greedy_better``): the allocator is never below its baseline.
A solve that stops at the time limit depends on the machine's speed: runs are then not
bit-for-bit reproducible (``mip_not_optimal`` says when this happened).

Complexity: J sum |N_j| T' binaries; with T' = 1 it is a multiple-choice knapsack with up to
2R capacity rows. Its LP bound is within a few per cent, but proving optimality for a couple of
hundred jobs can take HiGHS seconds (``benchmarks/bench_rivals.py``): hence the time limit.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from psched.model import Alloc
from psched.policies.base import View, register_policy
from psched.policies.epoch import Epoch, EpochPolicy, feasible, objective
from psched.policies.greedy import density_fill, marginal_gain

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
    """A sparse constraint matrix built from blocks of rows (numpy arrays, no Python loops)."""

    def __init__(self) -> None:
        self.n = 0  #: rows so far
        self.r: list[np.ndarray] = []
        self.c: list[np.ndarray] = []
        self.v: list[np.ndarray] = []
        self.lo: list[np.ndarray] = []
        self.hi: list[np.ndarray] = []

    def block(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, lo: np.ndarray,
              hi: np.ndarray) -> None:
        """Add ``len(lo)`` rows; entry ``i`` goes to new row ``rows[i]`` (0-based here)."""
        self.r.append(rows + self.n)
        self.c.append(cols)
        self.v.append(vals.astype(float))
        self.lo.append(np.broadcast_to(lo, (len(lo),)).astype(float))
        self.hi.append(np.broadcast_to(hi, (len(lo),)).astype(float))
        self.n += len(lo)

    def add(self, cols: np.ndarray, vals: np.ndarray, lo: float, hi: float) -> None:
        """Add one row."""
        self.block(np.zeros(len(cols), dtype=np.int64), np.asarray(cols, dtype=np.int64),
                   np.asarray(vals), np.array([lo]), np.array([hi]))

    def matrix(self, nvar: int) -> tuple[coo_matrix, np.ndarray, np.ndarray]:
        cat = np.concatenate
        a = coo_matrix((cat(self.v), (cat(self.r), cat(self.c))), shape=(self.n, nvar))
        return a, cat(self.lo), cat(self.hi)


def solve_mip(epoch: Epoch, *, time_limit_s: float = 0.35, mip_rel_gap: float = 1e-4,
              presolve: bool = False) -> MipResult:
    """Solve one epoch's MIP (module docstring). O(HiGHS) on J sum|N_j| T' binaries.

    HiGHS's presolve is off by default: on a few hundred jobs it alone can outlast a sub-second
    limit (measured: 1.2 s at 500 jobs, no solution), while without it the first incumbent
    comes at once and the gap closes from there. The model is built with numpy blocks,
    O(J sum|N_j| T' R).
    """
    J, T = len(epoch.ids), epoch.intervals
    sizes = np.array([a.size for a in epoch.allowed], dtype=np.int64)
    xoff = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64) * T
    nx = int(xoff[-1])
    has_u = epoch.penalty > 0
    uoff = np.full(J, -1, dtype=np.int64)
    uoff[has_u] = nx + np.arange(int(has_u.sum())) * T
    nu = int(has_u.sum()) * T
    poff = nx + nu
    nvar = poff + J
    # per x column: its job, interval, count, PS and speed
    job = np.repeat(np.arange(J), sizes * T)
    local = np.arange(nx) - xoff[job]
    t_of = local // sizes[job]
    n_of = np.concatenate([np.tile(a, T) for a in epoch.allowed]) if J else np.zeros(0)
    ps_of = np.concatenate([np.tile(p, T) for p in epoch.ps]) if J else np.zeros(0)
    sp_of = np.concatenate([np.tile(s, T) for s in epoch.speed]) if J else np.zeros(0)
    cols = np.arange(nx)

    rows = _Rows()
    # one configuration per job and interval; running jobs hold one in the first
    lo = np.zeros(J * T)
    lo[np.flatnonzero(epoch.current > 0) * T] = 1.0
    rows.block(job * T + t_of, cols, np.ones(nx), lo, np.ones(J * T))
    # capacity of every pool, resource and interval
    for per_n, demand, cap in ((n_of, epoch.worker_demand, epoch.worker_cap),
                               (ps_of, epoch.ps_demand, epoch.ps_cap)):
        vals = per_n[:, None] * demand[job]  # nx x R
        for r in range(cap.shape[0]):
            keep = vals[:, r] > 0
            if keep.any():
                rows.block(t_of[keep], cols[keep], vals[keep, r], np.full(T, -np.inf),
                           np.full(T, float(cap[r])))
    # progress: p_j <= sum Delta s_j(n) x
    rows.block(np.concatenate([np.arange(J), job]), np.concatenate([poff + np.arange(J), cols]),
               np.concatenate([np.ones(J), -epoch.interval_slots * sp_of]),
               np.full(J, -np.inf), np.zeros(J))
    # rescale: u_j1 >= sum_{n != a_j} x_jn1;  u_jt >= x_jnt - x_jn,t-1
    ju = np.flatnonzero(has_u)
    if ju.size:
        which = np.full(J, -1, dtype=np.int64)
        which[ju] = np.arange(ju.size)
        sel = has_u[job] & (t_of == 0) & (n_of != epoch.current[job])
        rows.block(np.concatenate([np.arange(ju.size), which[job[sel]]]),
                   np.concatenate([uoff[ju], cols[sel]]),
                   np.concatenate([np.ones(ju.size), -np.ones(int(sel.sum()))]),
                   np.zeros(ju.size), np.full(ju.size, np.inf))
        later = np.flatnonzero(has_u[job] & (t_of > 0))
        if later.size:
            m = np.arange(later.size)
            before = later - sizes[job[later]]
            rows.block(np.concatenate([m, m, m]),
                       np.concatenate([uoff[job[later]] + t_of[later], later, before]),
                       np.concatenate([np.ones(m.size), -np.ones(m.size), np.ones(m.size)]),
                       np.zeros(m.size), np.full(m.size, np.inf))
    if epoch.anti_starvation:
        chain = epoch.starvation_chain()
        for i, j in itertools.pairwise(chain):
            first_j = xoff[j] + np.arange(sizes[j])
            first_i = xoff[i] + np.arange(sizes[i])
            rows.add(np.concatenate([first_j, first_i]),
                     np.concatenate([np.ones(sizes[j]), -np.ones(sizes[i])]), -np.inf, 0.0)

    c = np.zeros(nvar)
    c[poff:] = -epoch.weight / epoch.remaining
    for j in range(J):
        if has_u[j]:
            c[uoff[j]:uoff[j] + T] = epoch.penalty[j]
    lb = np.zeros(nvar)
    ub = np.ones(nvar)
    ub[poff:] = epoch.remaining
    integrality = np.zeros(nvar)
    integrality[:nx] = 1
    a, row_lo, row_hi = rows.matrix(nvar)
    res = milp(c, constraints=LinearConstraint(a.tocsr(), row_lo, row_hi), integrality=integrality,
               bounds=Bounds(lb, ub),
               options={"time_limit": time_limit_s, "mip_rel_gap": mip_rel_gap,
                        "presolve": presolve, "disp": False})
    plan = np.zeros((J, T), dtype=np.int64)
    if res.x is None:
        return MipResult(plan=plan, objective=-np.inf, optimal=False, found=False)
    on = np.flatnonzero(res.x[:nx] > 0.5)
    plan[job[on], t_of[on]] = n_of[on]
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
        self.time_limit_s = time_limit_s  #: per-decision budget (epoch, model, solve), s
        self._t0 = 0.0
        self.mip_rel_gap = mip_rel_gap  #: HiGHS relative gap
        self._stats = {"solves": 0, "not_optimal": 0, "fallbacks": 0, "greedy_better": 0}
        self._gaps: list[float] = []

    def reset(self) -> None:
        super().reset()
        self._stats = dict.fromkeys(self._stats, 0)
        self._gaps = []

    def replan(self, view: View) -> dict[str, Alloc]:
        self._t0 = time.perf_counter()
        return super().replan(view)

    def choose(self, epoch: Epoch) -> np.ndarray:
        spent = time.perf_counter() - self._t0
        res = solve_mip(epoch, time_limit_s=max(0.05, self.time_limit_s - spent),
                        mip_rel_gap=self.mip_rel_gap)
        self._stats["solves"] += 1
        self._stats["not_optimal"] += int(not res.optimal)
        if res.found:
            self._gaps.append(res.gap)
        if res.optimal and feasible(epoch, res.plan):
            return res.plan
        heuristics = [p for p in (marginal_gain(epoch), density_fill(epoch)) if feasible(epoch, p)]
        best = max(heuristics, key=lambda p: objective(epoch, p))
        if not (res.found and feasible(epoch, res.plan)):
            self._stats["fallbacks"] += 1
            return best
        if objective(epoch, best) > objective(epoch, res.plan) + 1e-12:
            self._stats["greedy_better"] += 1  # a time-limited solve that stopped early
            return best
        return res.plan

    def report(self) -> dict[str, Any]:
        out = super().report()
        out.update({f"mip_{k}": v for k, v in self._stats.items()})
        out["mip_gap_mean"] = float(np.mean(self._gaps)) if self._gaps else None
        out["mip_gap_max"] = float(np.max(self._gaps)) if self._gaps else None
        return out
