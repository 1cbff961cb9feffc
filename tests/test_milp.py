"""psched.offline.milp: HiGHS through highspy, warm starts, and the guard that refuses an answer a
known
feasible point contradicts (with a deliberately wrong stub solver), never a correct one."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psched.offline.milp import Options, Problem, Rows, Solution, highs_solver, scipy_solver, solve


def repro_problem() -> tuple[Problem, np.ndarray]:
    """``shared/repro/highs_presolve.py``: scipy 1.17.1 (HiGHS 1.12) with presolve says 0.0."""
    c = np.zeros(16)
    c[1:4] = [-80.79787557894878, -80.79787557894878, -60.34197518]
    ub = np.array([1, 0, 1, 1, 1, 2, 1, 2, 1, 2, 2, 2, 2, 2, 2, 2], float)
    a = np.zeros((11, 16))
    lo, hi = np.full(11, -np.inf), np.zeros(11)
    a[0, [0, 1, 2, 3]] = [-1, 1, 1, 1]
    lo[0] = 0
    for j, (y, z) in enumerate(((4, 10), (6, 12), (8, 14))):
        r = 1 + 3 * j
        a[r, 1 + j:4] = -2
        a[r, [y, y + 1]] = 1
        a[r + 1, [y, y + 1]] = -1
        a[r + 1, [z, z + 1]] = 1
        a[r + 2, [y, y + 1]] = -0.2
        a[r + 2, [z, z + 1]] = 1
        lo[r + 2], hi[r + 2] = -0.1, np.inf
    a[10, 0] = -4
    a[10, 4:10] = 1
    lo[10], hi[10] = 0, np.inf
    rows = Rows()
    rr, cc = np.nonzero(a)
    rows.block(rr, cc, a[rr, cc], lo, hi)
    x = np.array([1, 0, 1, 0, 1, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 0], float)
    return Problem.of(c, rows, ub), x


def test_repro_model_is_solved_to_its_true_optimum_with_presolve_on() -> None:
    problem, point = repro_problem()
    assert problem.feasible(point)
    for presolve in (True, False):
        sol = solve(problem, presolve=presolve)
        assert sol.status == "optimal" and sol.backend == "highspy"
        assert sol.objective == pytest.approx(-80.79787557894878, abs=1e-9)
        assert problem.feasible(sol.x)
        assert not sol.retried


def test_guard_repairs_the_old_solver_on_the_repro_model() -> None:
    """Whatever scipy's HiGHS says with presolve, the guarded answer is the true optimum."""
    problem, point = repro_problem()
    sol = solve(problem, solver=scipy_solver, known=float(problem.c @ point))
    assert sol.status == "optimal"
    assert sol.objective == pytest.approx(-80.79787557894878, abs=1e-9)


class WrongSolver:
    """A stub that returns the empty point as "optimal" (with presolve only, or always)."""

    def __init__(self, *, also_without_presolve: bool, bound_only: bool = False) -> None:
        self.also = also_without_presolve
        self.bound_only = bound_only
        self.calls: list[bool] = []

    def __call__(self, problem: Problem, options: Options) -> Solution:
        self.calls.append(options.presolve)
        if options.presolve or self.also:
            if self.bound_only:  # a correct point, with a dual bound above a known value
                right = highs_solver(problem, options)
                return replace(right, dual_bound=right.objective + 10.0)
            x = np.zeros(problem.n_cols)
            return Solution(status="optimal", x=x, objective=0.0, dual_bound=0.0, gap=0.0,
                            solve_s=0.0, cpu_s=0.0, presolve=options.presolve, backend="stub")
        return highs_solver(problem, options)


@pytest.mark.parametrize("lp", [False, True])
def test_guard_re_solves_without_presolve_when_only_presolve_misleads(lp: bool) -> None:
    problem, point = repro_problem()
    problem = problem.relaxed() if lp else problem
    stub = WrongSolver(also_without_presolve=False)
    sol = solve(problem, solver=stub, known=float(problem.c @ point))
    assert stub.calls == [True, False]
    assert sol.retried and sol.status == "optimal"
    assert sol.objective <= float(problem.c @ point) + 1e-9


@pytest.mark.parametrize("bound_only", [False, True])
def test_guard_reports_suspect_when_the_contradiction_persists(bound_only: bool,
                                                               caplog: pytest.LogCaptureFixture
                                                               ) -> None:
    problem, point = repro_problem()
    stub = WrongSolver(also_without_presolve=True, bound_only=bound_only)
    sol = solve(problem, solver=stub, start=point)
    assert stub.calls == [True, False]
    assert sol.status == "suspect" and sol.retried
    assert sol.known == pytest.approx(float(problem.c @ point))
    assert "suspect" in caplog.text


def test_infeasible_warm_start_is_ignored_and_counts_for_nothing() -> None:
    problem, point = repro_problem()
    bad = point.copy()
    bad[1] = 1.0  # above its upper bound 0
    assert not problem.feasible(bad)
    sol = solve(problem, start=bad)
    assert sol.status == "optimal" and math.isinf(sol.known)
    good = solve(problem, start=point)
    assert good.objective == pytest.approx(sol.objective)
    assert good.known == pytest.approx(float(problem.c @ point))


@st.composite
def knapsacks(draw: st.DrawFn) -> tuple[Problem, np.ndarray]:
    """A small multi-row integer knapsack and a random feasible point of it."""
    n, m = draw(st.integers(1, 6)), draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    a = rng.integers(0, 5, (m, n)).astype(float)
    ub = rng.integers(0, 3, n).astype(float)
    point = np.floor(rng.uniform(0, ub + 1)).clip(0, ub)
    slack = rng.integers(0, 4, m)
    rows = Rows()
    rr, cc = np.nonzero(np.ones_like(a))
    rows.block(rr, cc, a[rr, cc], np.full(m, -np.inf), a @ point + slack)
    c = -rng.uniform(0, 10, n)
    return Problem.of(c, rows, ub), point


def brute(problem: Problem) -> float:
    best = math.inf
    for cand in itertools.product(*[range(int(u) + 1) for u in problem.col_hi]):
        x = np.array(cand, dtype=float)
        if problem.feasible(x):
            best = min(best, float(problem.c @ x))
    return best


@settings(max_examples=60, deadline=None)
@given(case=knapsacks(), presolve=st.booleans(), warm=st.booleans())
def test_guard_never_fires_on_correct_answers(case: tuple[Problem, np.ndarray], presolve: bool,
                                              warm: bool) -> None:
    problem, point = case
    known = float(problem.c @ point)
    start = point if warm else None
    sol = solve(problem, presolve=presolve, known=known, start=start)
    assert sol.status == "optimal"
    assert sol.objective == pytest.approx(brute(problem), abs=1e-6)
    if sol.retried:  # the guard fired: the first answer must have been wrong
        first = highs_solver(problem, Options(presolve=presolve, start=start))
        assert first.status != "optimal" or first.objective > brute(problem) + 1e-6
    lp = solve(problem.relaxed(), presolve=presolve, known=known)
    assert lp.status == "optimal" and not lp.retried
    assert lp.objective <= sol.objective + 1e-6


def test_time_limit_returns_the_warm_start_or_better_with_a_bound() -> None:
    problem, point = repro_problem()
    sol = solve(problem, start=point, time_limit_s=1e-6)
    assert sol.status in ("optimal", "time_limit")
    assert sol.found and sol.objective <= float(problem.c @ point) + 1e-9
    assert sol.dual_bound <= sol.objective + 1e-9


def test_an_optimal_claim_far_above_its_own_bound_is_solved_again() -> None:
    """HiGHS 1.16, presolve on and a warm start, claimed "optimal" at -25.31 with dual bound
    -38.11 on this knapsack (optimum -37.23, found by Hypothesis): the guard refuses a claim
    its own bound contradicts, and the re-solve without presolve is the optimum."""
    a = np.array([[4, 0, 4, 2, 1, 4], [1, 3, 0, 3, 4, 2], [2, 3, 3, 4, 2, 2]], dtype=float)
    rows = Rows()
    rr, cc = np.nonzero(np.ones_like(a))
    rows.block(rr, cc, a[rr, cc], np.full(3, -np.inf), np.array([23.0, 17.0, 23.0]))
    c = -np.array([2.03883585, 8.72023568, 5.38597421, 6.59321428, 0.4747752, 0.43763173])
    problem = Problem.of(c, rows, np.array([2.0, 1, 2, 2, 1, 2]))
    point = np.array([0.0, 0, 2, 2, 1, 2])
    sol = solve(problem, presolve=True, start=point)
    assert sol.status == "optimal"
    assert sol.objective == pytest.approx(brute(problem), abs=1e-6)
    assert sol.objective - sol.dual_bound <= 1e-6 * max(1.0, abs(sol.objective)) + 1e-6
