"""The elastic-training MIP allocator (Hu et al., arXiv 2109.03389, 2021; ``elastic_mip.md``).

Re-solved at every arrival and completion over running and queued jobs together
(:class:`~psched.policies.epoch.Epoch`), with HiGHS through :mod:`psched.offline.milp`::

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

The policy solves within a limit on branch-and-bound nodes (``node_limit``, default
:data:`MIP_NODE_LIMIT`: a limit every machine stops at alike, so a run reproduces anywhere;
``time_limit_s`` adds a per-decision wall-clock budget, for building the epoch and the model
and solving, whose answers then depend on the machine's speed and load) and relative gap
``mip_rel_gap`` (default 0.02: the LP relaxation rounded is within it in most events, which
settles a 200-job event in well under 0.1 s; with HiGHS 1.12 and gap 1e-4 the solves stopped
at a 0.35 s time limit with a mean gap of 3.4%, ``BENCHMARKS.md``), keeping the best solution
found; :meth:`ElasticMipPolicy.report` gives how many solves stopped at the limit and
the mean and worst proven relative gap of the plan used (to the LP or HiGHS's dual bound).
If HiGHS returns no solution it falls back to the better of two greedy plans (always
feasible): the marginal-gain baseline and
:func:`~psched.policies.greedy.density_fill`, a primal heuristic shaped like the optimum; if a
solve stopped at the limit with a plan worse than the better greedy's (same objective), that
plan is used (counted as ``greedy_better``): the allocator is never below its baseline.
``mip_not_optimal`` counts the solves that stopped at a limit.

**Beyond reach**: one MIP sees at most ``max_jobs`` jobs (default 256): every running job, then
the earliest queued ones; the rest are planned by the FIFO fill on what the MIP's plan leaves
(:func:`~psched.policies.reach.within_reach`; counted as ``mip_reach_*`` in
:meth:`ElasticMipPolicy.report`). With at most ``max_jobs`` jobs in an epoch nothing changes.

Complexity: J sum |N_j| T' binaries; with T' = 1 it is a multiple-choice knapsack with up to
2R capacity rows. Its LP bound is within a few per cent, but proving optimality for a couple of
hundred jobs can take HiGHS seconds (``benchmarks/bench_rivals.py``): hence the node limit.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from psched.core.model import Alloc
from psched.core.policy import View, register_policy
from psched.offline.milp import Problem, Rows, Solver, solve
from psched.policies.epoch import Epoch, EpochPolicy, feasible, objective
from psched.policies.greedy import density_fill, marginal_gain
from psched.policies.reach import ReachReport, within_reach

__all__ = ["DEFAULT_MAX_JOBS", "MIP_NODE_LIMIT", "ElasticMipPolicy", "MipResult", "plan_vector",
           "solve_mip"]

log = logging.getLogger(__name__)

#: Most jobs one MIP sees by default (the window rule of :mod:`.reach` beyond).
DEFAULT_MAX_JOBS = 256
#: HiGHS branch-and-bound nodes per solve by default (BENCHMARKS.md section 7b).
MIP_NODE_LIMIT = 1000


@dataclass(frozen=True, kw_only=True)
class MipResult:
    """One solve."""

    plan: np.ndarray  #: counts, J x T'
    objective: float  #: the MIP's objective of ``plan`` (recomputed from the plan)
    optimal: bool  #: HiGHS proved optimality (within ``mip_rel_gap``)
    found: bool  #: HiGHS returned a solution at all
    gap: float = 0.0  #: relative gap between ``objective`` and HiGHS's dual bound
    bound: float = math.inf  #: proven upper bound on the epoch's optimum (LP or HiGHS's)
    solve_s: float = 0.0  #: wall time of the solver call, seconds


@dataclass(frozen=True, kw_only=True)
class _Cols:
    """The x columns of one epoch's model: per column its job, interval, count, PS and speed;
    then the ``u`` (rescale) and ``p`` (progress) columns."""

    job: np.ndarray  #: job of each x column
    t: np.ndarray  #: interval of each x column
    n: np.ndarray  #: worker count of each x column
    ps: np.ndarray  #: PS count of each x column
    speed: np.ndarray  #: speed s_j(n) of each x column
    sizes: np.ndarray  #: |N_j| per job
    xoff: np.ndarray  #: first x column of each job (J + 1 entries)
    uoff: np.ndarray  #: first u column of each job (-1: no rescale penalty)
    poff: int  #: first p column
    n_cols: int  #: all columns

    @property
    def nx(self) -> int:
        """x columns."""
        return int(self.xoff[-1])


def _columns(epoch: Epoch, folded: bool) -> _Cols:
    J, T = len(epoch.ids), epoch.intervals
    sizes = np.array([a.size for a in epoch.allowed], dtype=np.int64)
    xoff = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64) * T
    nx = int(xoff[-1])
    has_u = (epoch.penalty > 0) & (not folded)
    uoff = np.full(J, -1, dtype=np.int64)
    uoff[has_u] = nx + np.arange(int(has_u.sum())) * T
    poff = nx + int(has_u.sum()) * T
    job = np.repeat(np.arange(J), sizes * T)
    local = np.arange(nx) - xoff[job]

    def tiled(arrays: tuple[np.ndarray, ...]) -> np.ndarray:
        return np.concatenate([np.tile(a, T) for a in arrays]) if J else np.zeros(0)

    return _Cols(job=job, t=local // sizes[job], n=tiled(epoch.allowed), ps=tiled(epoch.ps),
                 speed=tiled(epoch.speed), sizes=sizes, xoff=xoff, uoff=uoff, poff=poff,
                 n_cols=poff if folded else poff + J)


def _choice_rows(rows: Rows, epoch: Epoch, k: _Cols) -> None:
    """One configuration per job and interval; running jobs hold one in the first."""
    J, T = len(epoch.ids), epoch.intervals
    lo = np.zeros(J * T)
    lo[np.flatnonzero(epoch.current > 0) * T] = 1.0
    rows.block(k.job * T + k.t, np.arange(k.nx), np.ones(k.nx), lo, np.ones(J * T))


def _capacity_rows(rows: Rows, epoch: Epoch, k: _Cols) -> None:
    """Capacity of every pool, resource and interval."""
    T, cols = epoch.intervals, np.arange(k.nx)
    for per_n, demand, cap in ((k.n, epoch.worker_demand, epoch.worker_cap),
                               (k.ps, epoch.ps_demand, epoch.ps_cap)):
        vals = per_n[:, None] * demand[k.job]  # nx x R
        for r in range(cap.shape[0]):
            keep = vals[:, r] > 0
            if keep.any():
                rows.block(k.t[keep], cols[keep], vals[keep, r], np.full(T, -np.inf),
                           np.full(T, float(cap[r])))


def _progress_rows(rows: Rows, epoch: Epoch, k: _Cols) -> None:
    """``p_j <= sum_t sum_n Delta s_j(n) x_jnt``."""
    J = len(epoch.ids)
    rows.block(np.concatenate([np.arange(J), k.job]),
               np.concatenate([k.poff + np.arange(J), np.arange(k.nx)]),
               np.concatenate([np.ones(J), -epoch.interval_slots * k.speed]),
               np.full(J, -np.inf), np.zeros(J))


def _rescale_rows(rows: Rows, epoch: Epoch, k: _Cols) -> None:
    """``u_j1 >= sum_{n != a_j} x_jn1``;  ``u_jt >= x_jnt - x_jn,t-1``."""
    ju = np.flatnonzero(k.uoff >= 0)
    if ju.size == 0:
        return
    has_u = k.uoff >= 0
    which = np.full(len(epoch.ids), -1, dtype=np.int64)
    which[ju] = np.arange(ju.size)
    sel = has_u[k.job] & (k.t == 0) & (k.n != epoch.current[k.job])
    rows.block(np.concatenate([np.arange(ju.size), which[k.job[sel]]]),
               np.concatenate([k.uoff[ju], np.flatnonzero(sel)]),
               np.concatenate([np.ones(ju.size), -np.ones(int(sel.sum()))]),
               np.zeros(ju.size), np.full(ju.size, np.inf))
    later = np.flatnonzero(has_u[k.job] & (k.t > 0))
    if later.size:
        m = np.arange(later.size)
        before = later - k.sizes[k.job[later]]
        rows.block(np.concatenate([m, m, m]),
                   np.concatenate([k.uoff[k.job[later]] + k.t[later], later, before]),
                   np.concatenate([np.ones(m.size), -np.ones(m.size), np.ones(m.size)]),
                   np.zeros(m.size), np.full(m.size, np.inf))


def _starvation_rows(rows: Rows, epoch: Epoch, k: _Cols) -> None:
    """``sum_n x_jn1 <= sum_n x_in1`` for consecutive fitting queued ``i < j``."""
    for i, j in itertools.pairwise(epoch.starvation_chain()):
        first_j = k.xoff[j] + np.arange(k.sizes[j])
        first_i = k.xoff[i] + np.arange(k.sizes[i])
        rows.add(np.concatenate([first_j, first_i]),
                 np.concatenate([np.ones(k.sizes[j]), -np.ones(k.sizes[i])]), -np.inf, 0.0)


def _folded_costs(epoch: Epoch, k: _Cols) -> np.ndarray:
    """With one interval, each configuration's value is known: ``-w_j min(Delta s_j(n), W_j) /
    W_j``, plus the rescale penalty when ``n != a_j``. Equal to the p/u model on every binary
    point, and a tighter LP (a fraction of a large count no longer buys all of ``W_j``)."""
    gain = np.minimum(epoch.interval_slots * k.speed, epoch.remaining[k.job])
    changed = k.n != epoch.current[k.job]
    costs: np.ndarray = (-epoch.weight[k.job] * gain / epoch.remaining[k.job]
                         + epoch.penalty[k.job] * changed)
    return costs


def _problem(epoch: Epoch, k: _Cols) -> Problem:
    rows = Rows()
    _choice_rows(rows, epoch, k)
    _capacity_rows(rows, epoch, k)
    folded = k.n_cols == k.nx
    if not folded:
        _progress_rows(rows, epoch, k)
        _rescale_rows(rows, epoch, k)
    if epoch.anti_starvation:
        _starvation_rows(rows, epoch, k)
    if folded:
        return Problem.of(_folded_costs(epoch, k), rows, np.ones(k.nx))
    c = np.zeros(k.n_cols)
    c[k.poff:] = -epoch.weight / epoch.remaining
    for j in np.flatnonzero(k.uoff >= 0):
        c[k.uoff[j]:k.uoff[j] + epoch.intervals] = epoch.penalty[j]
    ub = np.ones(k.n_cols)
    ub[k.poff:] = epoch.remaining
    integer = np.zeros(k.n_cols, dtype=bool)
    integer[:k.nx] = True
    return Problem.of(c, rows, ub, integer=integer)


def plan_vector(epoch: Epoch, plan: np.ndarray, *, folded: bool | None = None) -> np.ndarray:
    """A plan (counts, J x T') as a point of the epoch's model: its x, the least ``u`` and the
    most ``p`` it allows. Feasible whenever the plan is (:func:`~psched.policies.epoch.feasible`
    and counts from ``allowed``). O(columns)."""
    k = _columns(epoch, _folds(epoch) if folded is None else folded)
    v = np.zeros(k.n_cols)
    on = plan[k.job, k.t] == k.n
    v[:k.nx] = on
    if k.n_cols == k.nx:
        return v
    gain = np.bincount(k.job, weights=on * epoch.interval_slots * k.speed,
                       minlength=len(epoch.ids))
    v[k.poff:] = np.minimum(gain, epoch.remaining)
    for j in np.flatnonzero(k.uoff >= 0):
        prev = np.concatenate([[epoch.current[j]], plan[j, :-1]])
        v[k.uoff[j]:k.uoff[j] + epoch.intervals] = plan[j] != prev
    return v


def _column(problem: Problem, col: int) -> tuple[np.ndarray, np.ndarray]:
    a = problem.a
    lo, hi = a.indptr[col], a.indptr[col + 1]
    return a.indices[lo:hi], a.data[lo:hi]


def _improve(problem: Problem, x: np.ndarray, ax: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Move one job (its configuration columns ``cols``) to the cheapest configuration that
    keeps every row satisfied, if cheaper than its own; ``x`` in place, returns ``A x``."""
    old = cols[x[cols] > 0.5]
    base = float(problem.c[old[0]]) if old.size else 0.0
    for col in cols[np.argsort(problem.c[cols])]:
        if problem.c[col] >= base - 1e-12:
            break
        trial = ax.copy()
        r, v = _column(problem, int(col))
        trial[r] += v
        if old.size:
            r, v = _column(problem, int(old[0]))
            trial[r] -= v
        if np.all(trial <= problem.row_hi + 1e-9) and np.all(trial >= problem.row_lo - 1e-9):
            x[old] = 0.0
            x[col] = 1.0
            return trial
    return ax


def _round_lp(problem: Problem, k: _Cols, x_lp: np.ndarray, start: np.ndarray | None
              ) -> np.ndarray | None:
    """A binary point from the LP optimum of the folded model: jobs at an integral
    configuration keep it, a fractional running job takes its heaviest one, then fractional
    jobs (most LP weight first), then the others (largest possible gain first) move to the
    cheapest configuration that keeps every row (capacities, anti-starvation) satisfied.
    If the first step is infeasible the passes start from ``start`` instead (None without).
    O(fractional jobs x |N_j| x nnz per column)."""
    J = k.sizes.size
    x = np.zeros(k.nx)
    own = [np.arange(k.xoff[j], k.xoff[j + 1]) for j in range(J)]
    heavy = np.array([cols[np.argmax(x_lp[cols])] for cols in own], dtype=np.int64)
    whole = x_lp[heavy] > 1 - 1e-6
    x[heavy[whole]] = 1.0
    must = np.array([problem.row_lo[j] > 0 for j in range(J)])  # choice rows come first
    x[heavy[~whole & must]] = 1.0
    ax = problem.a @ x
    if np.any(ax > problem.row_hi + 1e-9) or np.any(ax < problem.row_lo - 1e-9):
        if start is None:
            return None
        x = start.copy()  # what runs now, moved towards the LP below
        ax = problem.a @ x
    frac = np.flatnonzero(~whole)
    weight = x_lp[heavy[frac]] * -problem.c[heavy[frac]]  # LP value of the heaviest choice
    rest = np.setdiff1d(np.arange(J), frac)
    gain = -problem.c[heavy[rest]] - np.array([-problem.c[own[j]][x[own[j]] > 0.5].sum()
                                               for j in rest])
    for j in np.concatenate([frac[np.argsort(-weight)], rest[np.argsort(-gain)]]):
        ax = _improve(problem, x, ax, own[j])
    return x


def _lp_first(k: _Cols, problem: Problem, start: np.ndarray | None, solver: Solver | None
              ) -> tuple[np.ndarray | None, float, float]:
    """LP relaxation of the folded model and a rounded point: (point or None, its objective
    (minimised), the LP bound). O(one LP)."""
    lp = solve(problem.relaxed(), start=start, solver=solver)
    if lp.x is None or lp.status != "optimal":
        return None, math.inf, -math.inf
    x = _round_lp(problem, k, lp.x, start)
    if x is None or not problem.feasible(x):
        return None, math.inf, lp.objective
    return x, float(problem.c @ x), lp.objective


def _folds(epoch: Epoch, fold: bool = True) -> bool:
    return fold and epoch.intervals == 1


def solve_mip(epoch: Epoch, *, node_limit: int | None = None, time_limit_s: float | None = None,
              mip_rel_gap: float = 1e-4, presolve: bool = False, start: np.ndarray | None = None,
              fold: bool = True, lp_first: bool = True, solver: Solver | None = None
              ) -> MipResult:
    """Solve one epoch's MIP (module docstring). O(HiGHS) on J sum|N_j| T' binaries.

    ``node_limit`` / ``time_limit_s``: HiGHS's branch-and-bound node limit and a wall-clock
    limit on this call, model building included (None: none).

    ``start`` is a plan (J x T' counts) handed to HiGHS as the incumbent (the policy passes the
    previous event's solution: the current counts held). HiGHS's presolve is off by default:
    on a few hundred jobs it alone can outlast a sub-second limit (measured with HiGHS 1.12:
    1.2 s at 500 jobs, no solution), while without it the first incumbent comes at once and
    the gap closes from there. With one interval (T' = 1) and ``fold`` the progress and
    rescale variables are folded into each configuration's cost (:func:`_folded_costs`): a
    multiple-choice knapsack in the x alone; with ``lp_first`` its LP relaxation is solved
    first and rounded (:func:`_round_lp`): when the rounded plan is within ``mip_rel_gap`` of
    the LP bound it is returned with that proven gap and branch and bound is skipped, else it
    is the incumbent HiGHS starts from. The model is built with numpy blocks,
    O(J sum|N_j| T' R).
    """
    J, T = len(epoch.ids), epoch.intervals
    folded = _folds(epoch, fold)
    k = _columns(epoch, folded)
    problem = _problem(epoch, k)
    x0 = None if start is None else plan_vector(epoch, start, folded=folded)
    plan = np.zeros((J, T), dtype=np.int64)
    t0 = time.perf_counter()
    lp_bound = math.inf
    if folded and lp_first:
        xr, val, bound = _lp_first(k, problem, x0, solver)
        if xr is not None:
            gap = max(0.0, (val - bound) / max(abs(val), 1e-12))
            if gap <= mip_rel_gap:
                on = np.flatnonzero(xr > 0.5)
                plan[k.job[on], k.t[on]] = k.n[on]
                return MipResult(plan=plan, objective=objective(epoch, plan), optimal=True,
                                 found=True, gap=gap, bound=-bound,
                                 solve_s=time.perf_counter() - t0)
            if x0 is None or val < float(problem.c @ x0):
                x0 = xr
        lp_bound = -bound
    left = (math.inf if time_limit_s is None
            else max(0.01, time_limit_s - (time.perf_counter() - t0)))
    sol = solve(problem, time_limit_s=left, node_limit=node_limit, mip_rel_gap=mip_rel_gap,
                presolve=presolve, start=x0, solver=solver)
    if sol.x is None or sol.status == "suspect":
        return MipResult(plan=plan, objective=-np.inf, optimal=False, found=False,
                         bound=min(lp_bound, -sol.dual_bound), solve_s=sol.solve_s)
    on = np.flatnonzero(sol.x[:k.nx] > 0.5)
    plan[k.job[on], k.t[on]] = k.n[on]
    return MipResult(plan=plan, objective=objective(epoch, plan),
                     optimal=sol.status == "optimal",
                     found=True, gap=sol.gap if math.isfinite(sol.gap) else 0.0,
                     bound=min(lp_bound, -sol.dual_bound), solve_s=sol.solve_s)


@register_policy("elastic-mip")
class ElasticMipPolicy(EpochPolicy):
    """The MIP allocator, re-solved at every event; options as :class:`EpochPolicy` plus the
    solver's ``node_limit``, ``time_limit_s`` and ``mip_rel_gap``, ``warm_start``, ``fold`` and
    ``solver``."""

    name = "elastic-mip"

    def __init__(self, *, node_limit: int = MIP_NODE_LIMIT, time_limit_s: float | None = None,
                 mip_rel_gap: float = 0.02, warm_start: bool = True, fold: bool = True,
                 solver: Solver | None = None, max_jobs: int = DEFAULT_MAX_JOBS,
                 **options: Any) -> None:
        super().__init__(**options)
        if max_jobs < 1:
            raise ValueError(f"max_jobs must be >= 1, got {max_jobs!r}")
        if node_limit < 1 or (time_limit_s is not None and time_limit_s <= 0):
            raise ValueError(f"node_limit >= 1 and time_limit_s > 0, got {node_limit!r}, "
                             f"{time_limit_s!r}")
        self.node_limit = node_limit  #: HiGHS branch-and-bound nodes per solve
        self.max_jobs = max_jobs  #: most jobs one MIP sees (the window rule beyond)
        self.reach = ReachReport()  #: what the window rule did over the run
        self.fold = fold  #: fold progress and rescale into the costs when T' = 1
        self.solver = solver  #: the MILP solver (None: HiGHS through highspy)
        #: per-decision wall-clock budget (epoch, model, solve), s; None: none
        self.time_limit_s = time_limit_s
        self.warm_start = warm_start  #: start HiGHS from the current counts (previous solution)
        self._t0 = 0.0
        self.mip_rel_gap = mip_rel_gap  #: HiGHS relative gap
        self._stats = {"solves": 0, "not_optimal": 0, "fallbacks": 0, "greedy_better": 0}
        self._gaps: list[float] = []

    def reset(self) -> None:
        super().reset()
        self._stats = dict.fromkeys(self._stats, 0)
        self._gaps = []
        self.reach = ReachReport()

    def replan(self, view: View) -> dict[str, Alloc]:
        self._t0 = time.perf_counter()
        return super().replan(view)

    def choose(self, epoch: Epoch) -> np.ndarray:
        """The MIP's plan on at most ``max_jobs`` jobs, the window rule of
        :func:`~psched.policies.reach.within_reach` beyond (module docstring)."""
        before = self.reach.split
        plan = within_reach(self._choose_exact, self.max_jobs, report=self.reach)(epoch)
        if self.reach.split > before:
            log.debug("elastic-mip: %d jobs, window %d", len(epoch.ids), self.max_jobs)
        return plan

    def _choose_exact(self, epoch: Epoch) -> np.ndarray:
        """The MIP's plan on every job of ``epoch``."""
        budget = (None if self.time_limit_s is None
                  else max(0.05, self.time_limit_s - (time.perf_counter() - self._t0)))
        start = (np.repeat(epoch.current[:, None], epoch.intervals, axis=1)
                 if self.warm_start else None)
        res = solve_mip(epoch, node_limit=self.node_limit, time_limit_s=budget,
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
            self._stats["greedy_better"] += 1  # a limited solve that stopped early
            return best
        return res.plan

    def report(self) -> dict[str, Any]:
        out = super().report()
        out.update({f"mip_{k}": v for k, v in self._stats.items()})
        out["mip_gap_mean"] = float(np.mean(self._gaps)) if self._gaps else None
        out["mip_gap_max"] = float(np.max(self._gaps)) if self._gaps else None
        out.update(self.reach.as_dict("mip"))
        return out
