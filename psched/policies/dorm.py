"""Dorm (Sun et al., SmartComp 2017): utilisation-maximising MILP with fairness and adjustment
limits, over worker counts, placement greedy afterwards (``baselines.md``).

Admit every job. At each event solve, with HiGHS (:func:`scipy.optimize.milp`) and a per-solve
time limit, over the unfinished jobs ``j`` (arrival order)::

    max  sum_j y_j u_j  +  eps sum_j (J - rank_j) z_j  -  eps2 sum_j q_j
    s.t. L_j z_j <= y_j <= U_j z_j              y = workers, z = running (binary)
         q_j >= (b_j / B_j) y_j,  q_j <= y_j    PS (integer) by the ratio
         sum_j y_j w_j^r <= C_worker^r,  sum_j q_j s_j^r <= C_ps^r     every resource r
         |y_j - a_j| <= U_j c_j,  sum_j c_j <= floor(beta |R|)         adjustment limit
                                                (R: jobs running now, a_j their counts)

``u_j = sum_r (w_j^r / C_worker^r + (b_j/B_j) s_j^r / C_ps^r)`` is one worker's share of total
utilisation over resource types (PS counted by the ratio, so the solver gains nothing by adding
surplus PS); the ``eps`` term breaks ties towards earlier arrivals (jobs that cannot all run
wait, earlier first), ``eps2`` keeps PS at the ratio.

**Fairness**: each running job's dominant share (over both pools' totals, one worker plus its
PS by the ratio, times ``y_j``) is at least ``theta`` times the equal share ``1 / K``. ``K``, the
number of running jobs, is itself a variable; we use ``K = J`` (every unfinished job), which
gives the lower bound ``L_j = max(1, ceil(theta / (J d_j)))``: a relaxation of Dorm's rule
whenever not every job runs (looser fairness, more room for utilisation -- the stronger reading).

Choices the specification leaves open, made to keep the rival strong:

* ``U_j = min(N_j, ceil(remaining))``; theta = 0.5, beta = 0.3 (defaults of the spec);
  ``max(1, floor(beta |R|))`` changes are allowed so that some adjustment is always possible.
* If the MILP is infeasible (completions can raise the fairness floor above what unchanged
  jobs hold) or HiGHS finds nothing within the limit, it is solved again without fairness, then
  without the adjustment limit; the fallbacks are counted in :meth:`DormPolicy.report`.
* Placement: running jobs keep their containers, then grow; new jobs are placed round-robin in
  arrival order (:func:`~psched.policies.counts.realise`); a job the servers cannot hold at its
  count (fragmentation) gets what fits.

Complexity: 3J integer variables, 2R + 5J rows; HiGHS time is capped by ``time_limit_s``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from psched.model import Alloc, Job
from psched.policies.base import View, register_policy
from psched.policies.counts import Builder, pool_totals, realise, work_cap
from psched.policies.replan import ReplanPolicy

__all__ = ["DormPolicy", "solve_dorm"]


def solve_dorm(jobs: list[Job], upper: np.ndarray, current: np.ndarray, capacity_w: np.ndarray,
               capacity_p: np.ndarray, *, theta: float = 0.5, beta: float = 0.3,
               fairness: bool = True, limit_changes: bool = True,
               time_limit_s: float = 0.25) -> np.ndarray | None:
    """Worker counts (J,) of Dorm's MILP, or None if HiGHS returns no solution.

    Variables per job: y (workers), z (running), q (PS), c (changed). O(HiGHS).
    """
    J, R = len(jobs), capacity_w.shape[0]
    w = np.array([j.spec.worker_demand.as_array() for j in jobs]).reshape(J, R)
    s = np.array([j.spec.ps_demand.as_array() for j in jobs]).reshape(J, R)
    ratio = np.array([j.spec.ps_ratio for j in jobs])
    with np.errstate(divide="ignore", invalid="ignore"):
        per_w = np.where(capacity_w > 0, w / capacity_w, 0.0)
        per_p = np.where(capacity_p > 0, s / capacity_p, 0.0)
        tot = capacity_w + capacity_p
        dom = np.max(np.where(tot > 0, (w + ratio[:, None] * s) / tot, 0.0), axis=1)
    util = per_w.sum(axis=1) + ratio * per_p.sum(axis=1)
    lower = np.ones(J)
    if fairness and J:
        with np.errstate(divide="ignore"):
            floor = np.where(dom > 0, np.ceil(theta / (J * dom) - 1e-9), 1.0)
        lower = np.minimum(np.maximum(1.0, floor), upper)
    Y, Z, Q, C = 0, J, 2 * J, 3 * J
    nvar = 4 * J
    r_: list[int] = []
    c_: list[int] = []
    v_: list[float] = []
    lo: list[float] = []
    hi: list[float] = []

    def row(cols: list[int], vals: list[float], a: float, b: float) -> None:
        i = len(lo)
        r_.extend([i] * len(cols))
        c_.extend(cols)
        v_.extend(vals)
        lo.append(a)
        hi.append(b)

    for j in range(J):
        row([Y + j, Z + j], [1.0, -float(lower[j])], 0.0, np.inf)
        row([Y + j, Z + j], [1.0, -float(upper[j])], -np.inf, 0.0)
        row([Q + j, Y + j], [1.0, -float(ratio[j])], -1e-9, np.inf)
        row([Q + j, Y + j], [1.0, -1.0], -np.inf, 0.0)
        if limit_changes and current[j] > 0:
            row([Y + j, C + j], [1.0, -float(upper[j])], -np.inf, float(current[j]))
            row([Y + j, C + j], [1.0, float(upper[j])], float(current[j]), np.inf)
    for r in range(R):
        if np.any(w[:, r] > 0):
            row([Y + j for j in range(J)], w[:, r].tolist(), -np.inf, float(capacity_w[r]))
        if np.any(s[:, r] > 0):
            row([Q + j for j in range(J)], s[:, r].tolist(), -np.inf, float(capacity_p[r]))
    n_run = int(np.sum(current > 0))
    if limit_changes and n_run:
        row([C + j for j in range(J)], [1.0] * J, -np.inf, max(1, math.floor(beta * n_run)))
    scale = max(float(util.max()) if J else 1.0, 1e-12)
    cost = np.zeros(nvar)
    cost[Y:Z] = -util / scale
    cost[Z:Q] = -1e-4 * (J - np.arange(J)) / max(J, 1) / max(float(upper.sum()), 1.0)
    cost[Q:C] = 1e-7
    ub = np.concatenate([upper, np.ones(J), upper, np.ones(J)])
    a = coo_matrix((v_, (r_, c_)), shape=(len(lo), nvar)).tocsr()
    res = milp(cost, constraints=LinearConstraint(a, lo, hi), integrality=np.ones(nvar),
               bounds=Bounds(np.zeros(nvar), ub),
               options={"time_limit": time_limit_s, "disp": False})
    if res.x is None:
        return None
    counts: np.ndarray = np.rint(res.x[Y:Z]).astype(np.int64)
    return counts


@register_policy("dorm")
class DormPolicy(ReplanPolicy):
    """Dorm's utilisation MILP at every event (module docstring)."""

    name = "dorm"

    def __init__(self, theta: float = 0.5, beta: float = 0.3,
                 time_limit_s: float = 0.25) -> None:
        super().__init__()
        if not (0 <= theta <= 1 and 0 <= beta <= 1 and time_limit_s > 0):
            raise ValueError("theta, beta in [0, 1]; time_limit_s > 0")
        self.theta, self.beta, self.time_limit_s = theta, beta, time_limit_s
        self._stats = {"solves": 0, "relaxed_fairness": 0, "relaxed_changes": 0}

    def reset(self) -> None:
        self._stats = dict.fromkeys(self._stats, 0)

    def replan(self, view: View) -> dict[str, Alloc]:
        statuses = [st for st in view.active.values() if work_cap(st.job, st.remaining) > 0]
        if not statuses:
            return {}
        jobs = [st.job for st in statuses]
        upper = np.array([work_cap(st.job, st.remaining) for st in statuses], dtype=float)
        current = np.array([min(self.current[j.job_id].n_workers, int(u))
                            if j.job_id in self.current else 0
                            for j, u in zip(jobs, upper, strict=True)], dtype=float)
        cw, cp = pool_totals(self.capacity, self.pools)
        counts = None
        for fairness, changes, stat in ((True, True, None), (False, True, "relaxed_fairness"),
                                        (False, False, "relaxed_changes")):
            self._stats["solves"] += 1
            if stat:
                self._stats[stat] += 1
            counts = solve_dorm(jobs, upper, current, cw, cp, theta=self.theta, beta=self.beta,
                                fairness=fairness, limit_changes=changes,
                                time_limit_s=self.time_limit_s)
            if counts is not None:
                break
        if counts is None:
            counts = current.astype(np.int64)  # what runs now always fits
        by_id = {j.job_id: j for j in jobs}
        want = {j.job_id: int(n) for j, n in zip(jobs, counts, strict=True)}
        order = sorted(want, key=lambda j: j not in self.current)
        return realise(Builder(self.capacity, self.pools), by_id, want, self.current, order)

    def report(self) -> dict[str, Any]:
        return {f"dorm_{k}": v for k, v in self._stats.items()}
