"""Dorm and the elastic MIP as they were before the window rule (issue 18), frozen copies.

Used only by ``tests/test_exact_reach.py``: wherever no decision has more jobs than the window,
the new policies decide exactly what these did. Not registered as policies. The model builders
and solvers (``dorm_solution``, ``solve_mip``...) are shared with the current code: the window
rule did not change them. Do not edit except to keep this importable.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from psched.core.model import Alloc
from psched.core.policy import View
from psched.offline.milp import Solver
from psched.policies.counts import Builder, pool_totals, realise, work_cap
from psched.policies.dorm import dorm_solution
from psched.policies.elastic_mip import MipResult, solve_mip
from psched.policies.epoch import Epoch, EpochPolicy, feasible, objective
from psched.policies.greedy import density_fill, marginal_gain
from psched.policies.replan import ReplanPolicy

__all__ = ["DormPolicy", "ElasticMipPolicy"]


class DormPolicy(ReplanPolicy):
    """Dorm's utilisation MILP at every event (module docstring)."""

    name = "dorm"

    def __init__(self, theta: float = 0.5, beta: float = 0.3,
                 time_limit_s: float = 0.25, warm_start: bool = True,
                 solver: Solver | None = None) -> None:
        super().__init__()
        self.solver = solver  #: the MILP solver (None: HiGHS through highspy)
        if not (0 <= theta <= 1 and 0 <= beta <= 1 and time_limit_s > 0):
            raise ValueError("theta, beta in [0, 1]; time_limit_s > 0")
        self.theta, self.beta, self.time_limit_s = theta, beta, time_limit_s
        self.warm_start = warm_start  #: start HiGHS from the current counts
        self._stats = {"solves": 0, "relaxed_fairness": 0, "relaxed_changes": 0,
                       "not_optimal": 0, "suspect": 0}
        self._gaps: list[float] = []

    def reset(self) -> None:
        self._stats = dict.fromkeys(self._stats, 0)
        self._gaps = []

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
            counts, sol = dorm_solution(jobs, upper, current, cw, cp, theta=self.theta,
                                        beta=self.beta, fairness=fairness, limit_changes=changes,
                                        time_limit_s=self.time_limit_s,
                                        warm_start=self.warm_start, solver=self.solver)
            self._stats["not_optimal"] += int(sol.status != "optimal")
            self._stats["suspect"] += int(sol.status == "suspect")
            if sol.found and math.isfinite(sol.gap):
                self._gaps.append(sol.gap)
            if counts is not None:
                break
        if counts is None:
            counts = current.astype(np.int64)  # what runs now always fits
        by_id = {j.job_id: j for j in jobs}
        want = {j.job_id: int(n) for j, n in zip(jobs, counts, strict=True)}
        order = sorted(want, key=lambda j: j not in self.current)
        return realise(Builder(self.capacity, self.pools), by_id, want, self.current, order)

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {f"dorm_{k}": v for k, v in self._stats.items()}
        out["dorm_gap_mean"] = float(np.mean(self._gaps)) if self._gaps else None
        return out


class ElasticMipPolicy(EpochPolicy):
    """The MIP allocator, re-solved at every event; options as :class:`EpochPolicy` plus the
    solver's ``time_limit_s`` and ``mip_rel_gap``, ``warm_start``, ``fold`` and ``solver``."""

    name = "elastic-mip"

    def __init__(self, *, time_limit_s: float = 0.35, mip_rel_gap: float = 0.02,
                 warm_start: bool = True, fold: bool = True, solver: Solver | None = None,
                 **options: Any) -> None:
        super().__init__(**options)
        self.fold = fold  #: fold progress and rescale into the costs when T' = 1
        self.solver = solver  #: the MILP solver (None: HiGHS through highspy)
        self.time_limit_s = time_limit_s  #: per-decision budget (epoch, model, solve), s
        self.warm_start = warm_start  #: start HiGHS from the current counts (previous solution)
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
        start = (np.repeat(epoch.current[:, None], epoch.intervals, axis=1)
                 if self.warm_start else None)
        res = solve_mip(epoch, time_limit_s=max(0.05, self.time_limit_s - spent),
                        mip_rel_gap=self.mip_rel_gap, start=start, fold=self.fold,
                        solver=self.solver)
        self._stats["solves"] += 1
        self._stats["not_optimal"] += int(not res.optimal)
        plan = self._pick(epoch, res)
        if math.isfinite(res.bound):  # the proven gap of the plan actually used
            value = objective(epoch, plan)
            self._gaps.append(max(0.0, res.bound - value) / max(abs(value), 1e-12))
        return plan

    def _pick(self, epoch: Epoch, res: MipResult) -> np.ndarray:
        """The solver's plan, or the better greedy plan when the solve stopped short."""
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
