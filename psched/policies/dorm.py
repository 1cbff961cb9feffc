"""Dorm (Sun et al., SmartComp 2017): utilisation-maximising MILP with fairness and adjustment
limits, over worker counts, placement greedy afterwards (``baselines.md``).

Admit every job. At each event solve, with HiGHS (:mod:`psched.offline.milp`, warm-started from the
current counts) and a per-solve node limit, over the unfinished jobs ``j`` (arrival order)::

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
* The limit is on branch-and-bound nodes (``node_limit``, default :data:`DORM_NODE_LIMIT`),
  not on seconds, so the same run gives the same allocations on every machine
  (:mod:`psched.offline.milp`); ``time_limit_s`` adds a wall-clock limit, whose answers then
  depend on the machine's speed and load.
* Placement: running jobs keep their containers, then grow; new jobs are placed round-robin in
  arrival order (:func:`~psched.policies.counts.realise`); a job the servers cannot hold at its
  count (fragmentation) gets what fits.

**Beyond reach**: one MILP sees at most ``max_jobs`` jobs (default 256): every running job, then
the earliest queued ones; running jobs beyond it keep their counts and the queued rest get a
FIFO fill of what is left (:mod:`psched.policies.dorm_reach`, counted as ``dorm_reach_*`` in
:meth:`DormPolicy.report`). With at most ``max_jobs`` unfinished jobs nothing changes; ``J``
and the fairness floor above are then the window's.

**Re-solve only on change** (``reuse``, default on): when a decision's MILP inputs (the
window's jobs, their caps and current counts, the pool totals left) equal the previous
decision's and every solve of that decision settled (not cut by a wall-clock limit), its
counts are reused without solving: HiGHS is deterministic, so this is the answer it would give
again (``dorm_reused`` counts them; tested against ``reuse=False``).

Complexity: 3J integer variables, 2R + 5J rows (J <= ``max_jobs``); HiGHS work is capped by
``node_limit`` nodes; the rest O(J R) numpy plus the fill.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from psched.core.model import EPS, Alloc, Job
from psched.core.policy import View, register_policy
from psched.offline.milp import Problem, Rows, Solution, Solver, solve
from psched.policies.counts import Builder, pool_totals, realise
from psched.policies.dorm_reach import fifo_fill, split, usage
from psched.policies.reach import ReachReport
from psched.policies.replan import ReplanPolicy

__all__ = ["DEFAULT_MAX_JOBS", "DORM_NODE_LIMIT", "DormPolicy", "dorm_solution", "solve_dorm"]

log = logging.getLogger(__name__)

#: Most jobs one MILP sees by default (the window rule beyond, :mod:`.dorm_reach`). Chosen by
#: ``benchmarks/bench_dorm_window.py`` (BENCHMARKS.md section 7): the largest window whose
#: 80k-job Philly-like run was measured within issue 18's 5 minutes (256: 180 s CPU); utility
#: rose with the window on every oasis-paper 300 / 400 seed. On the 10k-job Philly-like trace
#: windows of 512-2048 earn more still; 512 also fits at 80k (197 s CPU), measured after the
#: policy table's Dorm cells were run at 256 (BENCHMARKS.md section 7: the next step).
DEFAULT_MAX_JOBS = 256
#: HiGHS branch-and-bound nodes per Dorm solve by default (a limit every machine stops at alike;
#: BENCHMARKS.md section 7b measures how often it binds).
DORM_NODE_LIMIT = 10


def _shares(jobs: list[Job], capacity_w: np.ndarray, capacity_p: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per job: worker and PS demand (J x R), PS ratio, utilisation of one worker (with its PS
    by the ratio), dominant share of one worker."""
    J, R = len(jobs), capacity_w.shape[0]
    w = np.array([j.spec.worker_demand.as_array() for j in jobs]).reshape(J, R)
    s = np.array([j.spec.ps_demand.as_array() for j in jobs]).reshape(J, R)
    ratio = np.array([j.spec.ps_ratio for j in jobs])
    with np.errstate(divide="ignore", invalid="ignore"):
        per_w = np.where(capacity_w > 0, w / capacity_w, 0.0)
        per_p = np.where(capacity_p > 0, s / capacity_p, 0.0)
        tot = capacity_w + capacity_p
        dom = np.max(np.where(tot > 0, (w + ratio[:, None] * s) / tot, 0.0), axis=1)
    return w, s, ratio, per_w.sum(axis=1) + ratio * per_p.sum(axis=1), dom


def _fair_floor(dom: np.ndarray, upper: np.ndarray, theta: float) -> np.ndarray:
    """``L_j = max(1, ceil(theta / (J d_j)))`` capped at ``U_j``."""
    J = dom.size
    with np.errstate(divide="ignore"):
        floor = np.where(dom > 0, np.ceil(theta / (J * dom) - 1e-9), 1.0)
    out: np.ndarray = np.minimum(np.maximum(1.0, floor), upper)
    return out


def _job_rows(rows: Rows, lower: np.ndarray, upper: np.ndarray, ratio: np.ndarray) -> None:
    """``L z <= y <= U z``; ``ratio y <= q <= y`` (columns y, z, q, c in blocks of J)."""
    J = lower.size
    j = np.arange(J)
    Y, Z, Q = j, J + j, 2 * J + j
    two = np.repeat(np.arange(J), 2)
    inter = np.column_stack
    rows.block(two, inter([Y, Z]).ravel(), inter([np.ones(J), -lower]).ravel(),
               np.zeros(J), np.full(J, np.inf))
    rows.block(two, inter([Y, Z]).ravel(), inter([np.ones(J), -upper]).ravel(),
               np.full(J, -np.inf), np.zeros(J))
    rows.block(two, inter([Q, Y]).ravel(), inter([np.ones(J), -ratio]).ravel(),
               np.full(J, -1e-9), np.full(J, np.inf))
    rows.block(two, inter([Q, Y]).ravel(), inter([np.ones(J), -np.ones(J)]).ravel(),
               np.full(J, -np.inf), np.zeros(J))


def _change_rows(rows: Rows, upper: np.ndarray, current: np.ndarray, beta: float) -> None:
    """``|y_j - a_j| <= U_j c_j`` for running jobs; ``sum c <= max(1, floor(beta |R|))``."""
    J = upper.size
    run = np.flatnonzero(current > 0)
    if run.size == 0:
        return
    two = np.repeat(np.arange(run.size), 2)
    cols = np.column_stack([run, 3 * J + run]).ravel()
    rows.block(two, cols, np.column_stack([np.ones(run.size), -upper[run]]).ravel(),
               np.full(run.size, -np.inf), current[run])
    rows.block(two, cols, np.column_stack([np.ones(run.size), upper[run]]).ravel(),
               current[run], np.full(run.size, np.inf))
    rows.add(3 * J + np.arange(J), np.ones(J), -np.inf, max(1, math.floor(beta * run.size)))


def _capacity_rows(rows: Rows, w: np.ndarray, s: np.ndarray, capacity_w: np.ndarray,
                   capacity_p: np.ndarray) -> None:
    """``sum_j y_j w_j^r <= C_worker^r`` and ``sum_j q_j s_j^r <= C_ps^r``, every r."""
    J = w.shape[0]
    for r in range(capacity_w.shape[0]):
        if np.any(w[:, r] > 0):
            rows.add(np.arange(J), w[:, r], -np.inf, float(capacity_w[r]))
        if np.any(s[:, r] > 0):
            rows.add(2 * J + np.arange(J), s[:, r], -np.inf, float(capacity_p[r]))


def _start(counts: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """The point of the model that keeps ``counts`` (the previous event's solution)."""
    q = np.ceil(ratio * counts - 1e-9)
    return np.concatenate([counts, (counts > 0).astype(float), q, np.zeros(counts.size)])


def solve_dorm(jobs: list[Job], upper: np.ndarray, current: np.ndarray, capacity_w: np.ndarray,
               capacity_p: np.ndarray, *, theta: float = 0.5, beta: float = 0.3,
               fairness: bool = True, limit_changes: bool = True,
               node_limit: int | None = None, time_limit_s: float | None = None,
               warm_start: bool = True, solver: Solver | None = None) -> np.ndarray | None:
    """Worker counts (J,) of Dorm's MILP, or None if HiGHS returns no solution.

    Variables per job: y (workers), z (running), q (PS), c (changed). ``warm_start`` hands
    HiGHS the current counts (the previous event's solution) as an incumbent when they are
    feasible. O(HiGHS).
    """
    return dorm_solution(jobs, upper, current, capacity_w, capacity_p, theta=theta, beta=beta,
                         fairness=fairness, limit_changes=limit_changes,
                         node_limit=node_limit, time_limit_s=time_limit_s,
                         warm_start=warm_start, solver=solver)[0]


def dorm_solution(jobs: list[Job], upper: np.ndarray, current: np.ndarray,
                  capacity_w: np.ndarray, capacity_p: np.ndarray, *, theta: float = 0.5,
                  beta: float = 0.3, fairness: bool = True, limit_changes: bool = True,
                  node_limit: int | None = None, time_limit_s: float | None = None,
                  warm_start: bool = True, solver: Solver | None = None
                  ) -> tuple[np.ndarray | None, Solution]:
    """:func:`solve_dorm` with the solver's :class:`~psched.offline.milp.Solution` beside the
    counts. ``node_limit`` / ``time_limit_s``: HiGHS's node and wall-clock limits (None: none)."""
    J = len(jobs)
    w, s, ratio, util, dom = _shares(jobs, capacity_w, capacity_p)
    lower = _fair_floor(dom, upper, theta) if fairness and J else np.ones(J)
    rows = Rows()
    _job_rows(rows, lower, upper, ratio)
    if limit_changes:
        _change_rows(rows, upper, current, beta)
    _capacity_rows(rows, w, s, capacity_w, capacity_p)
    scale = max(float(util.max()) if J else 1.0, 1e-12)
    cost = np.concatenate([-util / scale,
                           -1e-4 * (J - np.arange(J)) / max(J, 1) / max(float(upper.sum()), 1.0),
                           np.full(J, 1e-7), np.zeros(J)])
    ub = np.concatenate([upper, np.ones(J), upper, np.ones(J)])
    problem = Problem.of(cost, rows, ub)
    start = _start(np.minimum(current, upper), ratio) if warm_start else None
    sol = solve(problem, time_limit_s=math.inf if time_limit_s is None else time_limit_s,
                node_limit=node_limit, mip_rel_gap=1e-4, start=start, solver=solver)
    if sol.x is None or sol.status == "suspect":
        return None, sol
    counts: np.ndarray = np.rint(sol.x[:J]).astype(np.int64)
    return counts, sol


@register_policy("dorm")
class DormPolicy(ReplanPolicy):
    """Dorm's utilisation MILP at every event (module docstring), on at most ``max_jobs``
    jobs; the rest by the window rule of :mod:`psched.policies.dorm_reach`."""

    name = "dorm"

    def __init__(self, theta: float = 0.5, beta: float = 0.3,
                 node_limit: int = DORM_NODE_LIMIT, time_limit_s: float | None = None,
                 warm_start: bool = True, solver: Solver | None = None,
                 max_jobs: int = DEFAULT_MAX_JOBS, reuse: bool = True) -> None:
        super().__init__()
        self.solver = solver  #: the MILP solver (None: HiGHS through highspy)
        if not (0 <= theta <= 1 and 0 <= beta <= 1 and node_limit >= 1
                and (time_limit_s is None or time_limit_s > 0)):
            raise ValueError("theta, beta in [0, 1]; node_limit >= 1; time_limit_s > 0")
        if max_jobs < 1:
            raise ValueError(f"max_jobs must be >= 1, got {max_jobs!r}")
        self.theta, self.beta = theta, beta
        self.node_limit = node_limit  #: HiGHS branch-and-bound nodes per solve
        self.time_limit_s = time_limit_s  #: wall-clock limit per solve, s (None: none)
        self.warm_start = warm_start  #: start HiGHS from the current counts
        self.max_jobs = max_jobs  #: most jobs one MILP sees (the window rule beyond)
        self.reuse = reuse  #: skip a solve whose inputs equal the previous settled one's
        self._stats = {"solves": 0, "relaxed_fairness": 0, "relaxed_changes": 0,
                       "not_optimal": 0, "suspect": 0, "reused": 0}
        self._last: tuple[tuple[Any, ...], np.ndarray] | None = None
        self._mat = np.zeros((0, 0))  #: demand rows (worker, PS, ratio), one per job seen
        self._n_rows = 0
        self._at = np.zeros(0, dtype=np.int64)  #: this decision's jobs' rows of ``_mat``
        self._gaps: list[float] = []
        self.reach = ReachReport()  #: what the window rule did over the run
        self._consts: dict[str, tuple[float, int, bool, int]] = {}  #: work, N, PS ok, row

    def reset(self) -> None:
        self._stats = dict.fromkeys(self._stats, 0)
        self._gaps = []
        self.reach = ReachReport()
        self._consts = {}
        self._last = None
        self._mat, self._n_rows = np.zeros((0, 0)), 0

    def replan(self, view: View) -> dict[str, Alloc]:
        ids, statuses, upper = self._unfinished(view)
        if not ids:
            return {}
        jobs = [st.job for st in statuses]
        current = np.zeros(len(ids))
        if self.current:
            pos = {j: i for i, j in enumerate(ids)}
            for j, a in self.current.items():
                i = pos.get(j)
                if i is not None:
                    current[i] = min(a.n_workers, int(upper[i]))
        cw, cp = pool_totals(self.capacity, self.pools)
        self.reach.decisions += 1
        if len(jobs) <= self.max_jobs:
            counts = self._solve(jobs, upper, current, cw, cp)
        else:
            counts = self._split_solve(jobs, upper, current, cw, cp)
        on = np.flatnonzero(counts > 0).tolist()
        by_id = {ids[i]: jobs[i] for i in on}
        want = {ids[i]: int(counts[i]) for i in on}
        order = sorted(want, key=lambda j: j not in self.current)
        return realise(Builder(self.capacity, self.pools, self.facts), by_id, want,
                       self.current, order)

    def _unfinished(self, view: View) -> tuple[list[str], list[Any], np.ndarray]:
        """Ids, statuses and caps ``U_j`` (:func:`~psched.policies.counts.work_cap`, in numpy
        over every active job) of the jobs that may still run, arrival order; their rows of
        the demand matrix in ``self._at``. O(J)."""
        for j in view.completed:
            self._consts.pop(j, None)
        if len(self._consts) > 2 * len(view.active) + 64:  # jobs that left unfinished
            self._consts = {j: v for j, v in self._consts.items() if j in view.active}
        consts = self._consts
        for job_id, st in view.active.items():
            if job_id not in consts:
                consts[job_id] = self._new_job(st.job)
        ids = list(view.active)
        sts = list(view.active.values())
        c = np.array([consts[j] for j in ids], dtype=float).reshape(-1, 4)
        done = np.array([st.done for st in sts], dtype=float)
        remaining = np.maximum(0.0, c[:, 0] - done)
        cap = np.maximum(0.0, np.minimum(c[:, 1], np.ceil(remaining - EPS)))
        cap = np.where(c[:, 2] > 0, cap, 0.0)
        keep = np.flatnonzero(cap > 0)
        self._at = c[keep, 3].astype(np.int64)
        if keep.size == len(ids):
            return ids, sts, cap
        kept = keep.tolist()
        return [ids[i] for i in kept], [sts[i] for i in kept], cap[keep]

    def _new_job(self, job: Job) -> tuple[float, int, bool, int]:
        """(work, N, PS rule met, row of the demand matrix) of a job first seen; its demand
        row (worker, PS, ratio) appended to the matrix."""
        w, s, ratio, _ = self.facts.of(job)
        row = np.concatenate([w, s, [ratio]]).astype(float)
        if self._n_rows == self._mat.shape[0]:
            grown = np.zeros((max(64, 2 * self._n_rows), row.size))
            grown[:self._n_rows] = self._mat[:self._n_rows].reshape(-1, row.size)
            self._mat = grown
        self._mat[self._n_rows] = row
        self._n_rows += 1
        return float(job.work), job.max_workers, job.ps_needed(1) <= 1, self._n_rows - 1

    def _solve(self, jobs: list[Job], upper: np.ndarray, current: np.ndarray,
               cw: np.ndarray, cp: np.ndarray) -> np.ndarray:
        """Counts of the MILP on ``jobs``; the previous decision's counts when its inputs
        were the same and its solves settled (``reuse``, module docstring)."""
        key = (tuple(j.job_id for j in jobs), upper.tobytes(), current.tobytes(),
               cw.tobytes(), cp.tobytes())
        if self.reuse and self._last is not None and self._last[0] == key:
            self._stats["reused"] += 1
            return self._last[1].copy()
        counts, settled = self._solve_chain(jobs, upper, current, cw, cp)
        self._last = (key, counts.copy()) if settled else None
        return counts

    def _solve_chain(self, jobs: list[Job], upper: np.ndarray, current: np.ndarray,
                     cw: np.ndarray, cp: np.ndarray) -> tuple[np.ndarray, bool]:
        """Counts of the MILP on ``jobs``, relaxing fairness, then the adjustment limit, when
        it has no solution; the current counts if none of the three has one. Also whether
        every solve settled (its answer is HiGHS's on these inputs: not cut by a wall-clock
        limit)."""
        settled = True
        for fairness, changes, stat in ((True, True, None), (False, True, "relaxed_fairness"),
                                        (False, False, "relaxed_changes")):
            self._stats["solves"] += 1
            if stat:
                self._stats[stat] += 1
            counts, sol = dorm_solution(jobs, upper, current, cw, cp, theta=self.theta,
                                        beta=self.beta, fairness=fairness, limit_changes=changes,
                                        node_limit=self.node_limit,
                                        time_limit_s=self.time_limit_s,
                                        warm_start=self.warm_start, solver=self.solver)
            self._stats["not_optimal"] += int(sol.status != "optimal")
            self._stats["suspect"] += int(sol.status == "suspect")
            settled = settled and (self.time_limit_s is None
                                   or sol.status in ("optimal", "infeasible"))
            if sol.found and math.isfinite(sol.gap):
                self._gaps.append(sol.gap)
            if counts is not None:
                return counts, settled
        return current.astype(np.int64), settled  # what runs now always fits

    def _split_solve(self, jobs: list[Job], upper: np.ndarray, current: np.ndarray,
                     cw: np.ndarray, cp: np.ndarray) -> np.ndarray:
        """The window rule (:mod:`psched.policies.dorm_reach`): MILP on the window, held
        jobs at their counts, the FIFO fill on the queued rest."""
        part = split(current, self.max_jobs)
        counts = np.zeros(len(jobs), dtype=np.int64)
        counts[part.held] = current[part.held]
        if part.held.size:
            w, s, ratio = self._demands(part.held)
            hw, hp = usage(counts[part.held], w, s, ratio)
            cw, cp = cw - hw, cp - hp
        win = [jobs[i] for i in part.window]
        counts[part.window] = self._solve(win, upper[part.window], current[part.window], cw, cp)
        if part.rest.size:
            w, s, ratio = self._demands(part.window)
            ww, wp = usage(counts[part.window], w, s, ratio)
            w, s, ratio = self._demands(part.rest)
            counts[part.rest] = fifo_fill(w, s, ratio, upper[part.rest], cw - ww, cp - wp)
        self.reach.split += 1
        self.reach.jobs_in_window += int(part.window.size)
        self.reach.jobs_beyond += len(jobs) - int(part.window.size)
        log.debug("dorm: %d jobs, window %d, held %d, filled %d (started %d)", len(jobs),
                  part.window.size, part.held.size, part.rest.size,
                  int(np.count_nonzero(counts[part.rest])))
        return counts

    def _demands(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One worker's and one PS's demand (K x R) and the PS ratio (K,) of the jobs at
        positions ``rows`` of this decision."""
        r = self.capacity.shape[1]
        m = self._mat[self._at[rows]]
        return m[:, :r], m[:, r:2 * r], m[:, 2 * r]

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {f"dorm_{k}": v for k, v in self._stats.items()}
        out["dorm_gap_mean"] = float(np.mean(self._gaps)) if self._gaps else None
        out.update(self.reach.as_dict("dorm"))
        return out
