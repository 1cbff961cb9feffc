"""MILP and LP models solved with HiGHS through ``highspy``, and a guard on what it claims.

Every optimisation model in psched (the offline optimum and its LP bound, Dorm, the elastic MIP
allocator) is a :class:`Problem` built with :class:`Rows` and solved by :func:`solve`, so that
each formulation states only its math. The sense is always *minimise* ``c @ x``.

Solvers. :func:`highs_solver` (default) calls HiGHS >= 1.16 through ``highspy`` and takes a
warm start (an incumbent), a node limit and a time limit; :func:`scipy_solver` is the previous
path, :func:`scipy.optimize.milp` (the HiGHS 1.12 bundled in scipy 1.17.1), kept only so that
benchmarks can measure old against new in one run. Both have the :data:`Solver` signature, so
tests can inject a deliberately wrong one.

The guard. HiGHS 1.12 with presolve on returned status "optimal" with a wrong objective on
small offline models (``shared/repro/highs_presolve.py``: 0.0 where -80.80 is feasible). A
solver's word is therefore checked against the best feasible value known for the instance
(``known``: a policy's schedule, a warm start, a greedy plan, all feasible points of the same
model). A claimed optimum, or a dual bound, above ``known`` (minimising) is impossible; the
model is solved again with presolve off, and if the contradiction persists the result is
returned with status ``"suspect"`` and logged at WARNING -- never silently.

Reproducible limits. HiGHS is deterministic for a given model, options, random seed and
thread count, so :func:`highs_solver` fixes the seed (0) and the threads
(:data:`HIGHS_THREADS`, the same for every model of the process: HiGHS refuses to change it
once its scheduler started). A branch-and-bound node limit (``node_limit``, HiGHS
``mip_max_nodes``) stops every machine at the same point; a wall-clock limit
(``time_limit_s``) stops where the machine's speed and load put it, so an answer cut by it
may differ from run to run: the online policies (Dorm, the elastic MIP) use node limits, the
offline optimum a time limit.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.sparse import coo_array, csc_array

__all__ = [
    "HIGHS_THREADS",
    "Options",
    "Problem",
    "Rows",
    "Solution",
    "Solver",
    "contradicts",
    "highs_solver",
    "scipy_solver",
    "solve",
]

log = logging.getLogger(__name__)

#: Relative tolerance of the guard: a claim above ``known`` by more than this is refused.
GUARD_RTOL = 1e-6
#: HiGHS threads, fixed (not the machine's core count) so that answers do not depend on it.
HIGHS_THREADS = 1


class Rows:
    """A sparse constraint matrix assembled from blocks of rows (numpy arrays, no loops)."""

    def __init__(self) -> None:
        self.n = 0  #: rows so far
        self._r: list[np.ndarray] = []
        self._c: list[np.ndarray] = []
        self._v: list[np.ndarray] = []
        self._lo: list[np.ndarray] = []
        self._hi: list[np.ndarray] = []

    def block(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, lo: np.ndarray,
              hi: np.ndarray) -> None:
        """Add ``len(lo)`` rows; entry ``i`` goes to new row ``rows[i]`` (0-based here)."""
        n = np.asarray(lo).size
        self._r.append(np.asarray(rows, dtype=np.int64) + self.n)
        self._c.append(np.asarray(cols, dtype=np.int64))
        self._v.append(np.asarray(vals, dtype=float))
        self._lo.append(np.broadcast_to(np.asarray(lo, dtype=float), (n,)))
        self._hi.append(np.broadcast_to(np.asarray(hi, dtype=float), (n,)))
        self.n += n

    def add(self, cols: np.ndarray | list[int], vals: np.ndarray | list[float], lo: float,
            hi: float) -> None:
        """Add one row ``lo <= sum vals * x[cols] <= hi``."""
        cols_a = np.asarray(cols, dtype=np.int64)
        self.block(np.zeros(cols_a.size, dtype=np.int64), cols_a, np.asarray(vals, dtype=float),
                   np.array([lo]), np.array([hi]))

    def matrix(self, n_cols: int) -> tuple[csc_array, np.ndarray, np.ndarray]:
        """The matrix (CSC, duplicates summed) and the row bounds."""
        if not self._r:
            return csc_array((0, n_cols)), np.zeros(0), np.zeros(0)
        cat = np.concatenate
        a = coo_array((cat(self._v), (cat(self._r), cat(self._c))), shape=(self.n, n_cols))
        return a.tocsc(), cat(self._lo), cat(self._hi)


@dataclass(frozen=True, kw_only=True)
class Problem:
    """``min c @ x`` s.t. ``row_lo <= a @ x <= row_hi``, ``col_lo <= x <= col_hi``."""

    c: np.ndarray  #: objective, minimised
    a: csc_array  #: constraint matrix, rows x columns
    row_lo: np.ndarray  #: row lower bounds (-inf for none)
    row_hi: np.ndarray  #: row upper bounds (+inf for none)
    col_lo: np.ndarray  #: variable lower bounds
    col_hi: np.ndarray  #: variable upper bounds
    integer: np.ndarray  #: bool per column: integer variable

    @classmethod
    def of(cls, c: np.ndarray, rows: Rows, col_hi: np.ndarray, *,
           col_lo: np.ndarray | None = None, integer: np.ndarray | bool = True) -> Problem:
        """A problem from an objective, its rows and bounds (``integer``: all, none or a mask)."""
        c = np.asarray(c, dtype=float)
        a, lo, hi = rows.matrix(c.size)
        mask = np.broadcast_to(np.asarray(integer, dtype=bool), c.shape).copy()
        return cls(c=c, a=a, row_lo=lo, row_hi=hi,
                   col_lo=np.zeros(c.size) if col_lo is None else np.asarray(col_lo, float),
                   col_hi=np.asarray(col_hi, dtype=float), integer=mask)

    @property
    def n_cols(self) -> int:
        """Variables."""
        return int(self.c.size)

    @property
    def n_rows(self) -> int:
        """Constraint rows."""
        return int(self.row_lo.size)

    def relaxed(self) -> Problem:
        """The LP relaxation (every variable continuous)."""
        return replace(self, integer=np.zeros_like(self.integer))

    def violation(self, x: np.ndarray) -> float:
        """Largest violation of a bound, a row or integrality by ``x`` (0 when feasible)."""
        ax = self.a @ x
        parts = [np.max(self.col_lo - x, initial=0.0), np.max(x - self.col_hi, initial=0.0),
                 np.max(self.row_lo - ax, initial=0.0), np.max(ax - self.row_hi, initial=0.0),
                 np.max(np.abs(x[self.integer] - np.rint(x[self.integer])), initial=0.0)]
        return float(max(parts))

    def feasible(self, x: np.ndarray, tol: float = 1e-6) -> bool:
        """``x`` satisfies every bound, row and integrality within ``tol``."""
        return x.shape == self.c.shape and self.violation(x) <= tol


@dataclass(frozen=True, kw_only=True)
class Options:
    """How to solve."""

    time_limit_s: float = math.inf  #: wall-clock limit of the solver call, seconds
    #: most branch-and-bound nodes (HiGHS ``mip_max_nodes``; None: no limit): the same on
    #: every machine, unlike ``time_limit_s``
    node_limit: int | None = None
    mip_rel_gap: float = 1e-7  #: relative gap at which branch and bound stops
    presolve: bool = True  #: HiGHS presolve on or off
    start: np.ndarray | None = None  #: a warm start (incumbent), ignored when infeasible


@dataclass(frozen=True, kw_only=True)
class Solution:
    """What a solver returned, read back into plain numbers."""

    #: "optimal" (within the gap), "time_limit" (stopped at the time or node limit, or
    #: another HiGHS limit: best found + bound), "infeasible",
    #: "no_solution" (stopped without a point), "error" or "suspect" (the guard refused it)
    status: str
    x: np.ndarray | None  #: the point (None when none was found)
    objective: float  #: ``c @ x`` (+inf without a point)
    dual_bound: float  #: proven lower bound on the optimum (-inf when unknown)
    gap: float  #: relative gap ``(objective - dual_bound) / max(|objective|, 1e-9)``
    solve_s: float  #: wall time of the solver call, seconds
    cpu_s: float  #: CPU time of this process during the call, seconds
    presolve: bool  #: whether presolve was on
    backend: str  #: "highspy" or "scipy"
    retried: bool = False  #: the guard solved it again without presolve
    known: float = math.inf  #: the best feasible value the guard checked against

    @property
    def found(self) -> bool:
        """A point came back."""
        return self.x is not None


#: A solver: the problem and how to solve it in, a :class:`Solution` out.
Solver = Callable[[Problem, Options], Solution]


def _gap(obj: float, bound: float) -> float:
    if not (math.isfinite(obj) and math.isfinite(bound)):
        return math.inf
    return max(0.0, (obj - bound) / max(abs(obj), 1e-9))


def _highs_lp(problem: Problem) -> Any:
    import highspy

    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = problem.n_cols, problem.n_rows
    lp.col_cost_ = problem.c
    lp.col_lower_, lp.col_upper_ = problem.col_lo, problem.col_hi
    inf = highspy.kHighsInf
    lp.row_lower_ = np.where(np.isfinite(problem.row_lo), problem.row_lo, -inf)
    lp.row_upper_ = np.where(np.isfinite(problem.row_hi), problem.row_hi, inf)
    a = problem.a
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = problem.n_cols, problem.n_rows
    lp.a_matrix_.start_, lp.a_matrix_.index_ = a.indptr, a.indices
    lp.a_matrix_.value_ = a.data
    if problem.integer.any():
        lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                           for i in problem.integer]
    return lp


_HIGHS_STATUS = {"kOptimal": "optimal", "kTimeLimit": "time_limit", "kInfeasible": "infeasible",
                 "kInterrupt": "time_limit", "kSolutionLimit": "time_limit",
                 "kIterationLimit": "time_limit", "kObjectiveBound": "time_limit"}


_BANNER_SHOWN: list[bool] = []


def _new_highs() -> object:
    """A silent ``highspy.Highs``; the first one of a process prints a banner on the C stdout,
    which would land in the CLI's output, so file descriptor 1 goes to /dev/null for it."""
    import highspy

    if _BANNER_SHOWN:
        return highspy.Highs()  # type: ignore[no-untyped-call]
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            h = highspy.Highs()  # type: ignore[no-untyped-call]
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    _BANNER_SHOWN.append(True)
    return h


def highs_solver(problem: Problem, options: Options) -> Solution:
    """Solve with HiGHS through ``highspy`` (warm start via ``setSolution``)."""
    import highspy

    h: Any = _new_highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("presolve", "on" if options.presolve else "off")
    h.setOptionValue("mip_rel_gap", float(options.mip_rel_gap))
    h.setOptionValue("threads", HIGHS_THREADS)
    h.setOptionValue("random_seed", 0)
    if math.isfinite(options.time_limit_s):
        h.setOptionValue("time_limit", float(options.time_limit_s))
    if options.node_limit is not None:
        h.setOptionValue("mip_max_nodes", int(options.node_limit))
    h.passModel(_highs_lp(problem))
    mip = bool(problem.integer.any())
    if mip and options.start is not None and problem.feasible(options.start):
        sol = highspy.HighsSolution()
        sol.col_value = np.where(problem.integer, np.rint(options.start), options.start)
        h.setSolution(sol)
    t0, c0 = time.perf_counter(), time.process_time()
    h.run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    name = h.modelStatusToString(h.getModelStatus())
    status = _HIGHS_STATUS.get(str(h.getModelStatus()).split(".")[-1], "error")
    info = h.getInfo()
    has_x = info.primal_solution_status == highspy.kSolutionStatusFeasible
    x = np.asarray(h.getSolution().col_value, dtype=float) if has_x else None
    if x is not None and mip:
        x = np.where(problem.integer, np.rint(x), x)
    obj = float(problem.c @ x) if x is not None else math.inf
    if mip:
        bound = float(info.mip_dual_bound)
        bound = bound if math.isfinite(bound) and abs(bound) < 1e30 else -math.inf
    else:
        bound = obj if status == "optimal" else -math.inf
    if status == "optimal" and x is None:
        status = "error"
    elif status == "time_limit" and x is None:
        status = "no_solution"
    log.debug("highspy: %s (%s) obj=%.6g bound=%.6g %.3fs", status, name, obj, bound, wall)
    return Solution(status=status, x=x, objective=obj, dual_bound=bound, gap=_gap(obj, bound),
                    solve_s=wall, cpu_s=cpu, presolve=options.presolve, backend="highspy")


def scipy_solver(problem: Problem, options: Options) -> Solution:
    """The previous path, :func:`scipy.optimize.milp` (no warm start); for benchmarks only."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    opts: dict[str, object] = {"disp": False, "presolve": options.presolve,
                               "mip_rel_gap": float(options.mip_rel_gap)}
    if math.isfinite(options.time_limit_s):
        opts["time_limit"] = float(options.time_limit_s)
    if options.node_limit is not None:
        opts["node_limit"] = int(options.node_limit)
    t0, c0 = time.perf_counter(), time.process_time()
    cons = (LinearConstraint(problem.a.tocsr(), problem.row_lo, problem.row_hi)
            if problem.n_rows else ())
    res = milp(problem.c, integrality=problem.integer.astype(int),
               bounds=Bounds(problem.col_lo, problem.col_hi), constraints=cons, options=opts)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    x = None if res.x is None else np.asarray(res.x, dtype=float)
    if x is not None and problem.integer.any():
        x = np.where(problem.integer, np.rint(x), x)
    status = {0: "optimal", 1: "time_limit", 2: "infeasible"}.get(res.status, "error")
    if status == "time_limit" and x is None:
        status = "no_solution"
    obj = float(problem.c @ x) if x is not None else math.inf
    dual = getattr(res, "mip_dual_bound", None)
    if problem.integer.any():
        bound = float(dual) if dual is not None and np.isfinite(dual) else -math.inf
    else:
        bound = obj if status == "optimal" else -math.inf
    return Solution(status=status, x=x, objective=obj, dual_bound=bound, gap=_gap(obj, bound),
                    solve_s=wall, cpu_s=cpu, presolve=options.presolve, backend="scipy")


def contradicts(sol: Solution, known: float, rel_gap: float = 0.0) -> bool:
    """The solver's claim is impossible given a feasible point of value ``known`` (minimising),
    or given its own bound.

    A proven optimum (or LP optimum) above ``known``, or a dual bound above it, cannot be; nor
    can an "optimal" whose own dual bound lies further below it than the gap it was asked for
    (``rel_gap``; HiGHS 1.16 with presolve and a warm start was seen to claim optimal at
    -25.31 with bound -38.11 on a 6-variable knapsack whose optimum is -37.23).
    """
    if sol.status == "optimal" and math.isfinite(sol.dual_bound) and math.isfinite(sol.objective):
        allowed = max(rel_gap, GUARD_RTOL) * max(1.0, abs(sol.objective)) + GUARD_RTOL
        if sol.objective - sol.dual_bound > allowed:
            return True
    if not math.isfinite(known):
        return False
    tol = GUARD_RTOL * max(1.0, abs(known))
    if sol.status == "optimal" and sol.objective > known + tol:
        return True
    return sol.status in ("optimal", "time_limit") and sol.dual_bound > known + tol


def solve(problem: Problem, *, time_limit_s: float = math.inf, mip_rel_gap: float = 1e-7,
          presolve: bool = True, start: np.ndarray | None = None, known: float = math.inf,
          solver: Solver | None = None, node_limit: int | None = None) -> Solution:
    """Solve ``problem`` and check the answer against every feasible value known.

    Parameters
    ----------
    problem : the model (minimised).
    time_limit_s, mip_rel_gap, presolve, node_limit : solver options (:class:`Options`).
    start : a warm start; when feasible its value also counts as known.
    known : the best objective of a feasible point known otherwise (e.g. a policy's schedule).
    solver : :func:`highs_solver` by default; any :data:`Solver` (tests inject a wrong one).

    Returns
    -------
    Solution
        Status ``"suspect"`` when the answer contradicts a known feasible value (or claims
        optimal beyond its own bound) even after a re-solve without presolve (logged at
        WARNING). Without any contradiction, the solver's
        answer unchanged (``retried`` tells if the re-solve was needed).
    """
    run = highs_solver if solver is None else solver
    if start is not None and problem.feasible(start):
        known = min(known, float(problem.c @ start))
    opts = Options(time_limit_s=time_limit_s, mip_rel_gap=mip_rel_gap, presolve=presolve,
                   start=start, node_limit=node_limit)
    sol = run(problem, opts)
    if not contradicts(sol, known, mip_rel_gap):
        return replace(sol, known=known)
    log.warning("solver (%s, presolve %s) claims %s %.9g, bound %.9g, known feasible %.9g: "
                "contradicted; solving again without presolve", sol.backend, sol.presolve,
                sol.status, sol.objective, sol.dual_bound, known)
    again = run(problem, replace(opts, presolve=False))
    if not contradicts(again, known, mip_rel_gap):
        return replace(again, retried=True, known=known)
    log.warning("solver still contradicts a feasible value %.9g (claims %.9g, bound %.9g): "
                "suspect", known, again.objective, again.dual_bound)
    return replace(again, status="suspect", retried=True, known=known)
