"""within_reach: an exact chooser on one window of an epoch, a greedy on the rest."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psched.policies.epoch import Epoch, brute_force, feasible
from psched.policies.greedy import fifo_fill
from psched.policies.reach import ReachReport, within_reach


def _epoch(n_jobs: int, running: list[bool], gpu: list[int], cap_gpu: float) -> Epoch:
    allowed = tuple(np.array([1, 2], dtype=np.int64) for _ in range(n_jobs))
    cur = np.array([1 if r else 0 for r in running], dtype=np.int64)
    wd = np.array([[g, 1.0] for g in gpu], dtype=float)
    sd = np.array([[0.0, 1.0] for _ in gpu], dtype=float)
    used = float(sum(g for g, r in zip(gpu, running, strict=True) if r))
    return Epoch(ids=tuple(f"j{i}" for i in range(n_jobs)), allowed=allowed,
                 speed=tuple(a.astype(float) for a in allowed),
                 ps=tuple(np.array([1, 1], dtype=np.int64) for _ in range(n_jobs)),
                 remaining=np.full(n_jobs, 4.0), weight=np.ones(n_jobs),
                 penalty=np.full(n_jobs, 0.01), current=cur, worker_demand=wd, ps_demand=sd,
                 worker_cap=np.array([max(cap_gpu, used), 100.0]),
                 ps_cap=np.array([0.0, 100.0]))


def _best(epoch: Epoch) -> np.ndarray:
    return brute_force(epoch)[1][:, 0]


epochs = st.integers(2, 7).flatmap(lambda n: st.builds(
    _epoch, st.just(n), st.lists(st.booleans(), min_size=n, max_size=n),
    st.lists(st.integers(1, 3), min_size=n, max_size=n), st.integers(2, 9).map(float)))


@settings(max_examples=60, deadline=None)
@given(epochs, st.integers(1, 4))
def test_plan_is_feasible_and_the_solver_sees_running_then_earliest_queued(
        epoch: Epoch, max_jobs: int) -> None:
    seen: list[tuple[str, ...]] = []

    def solver(e: Epoch) -> np.ndarray:
        seen.append(e.ids)
        return _best(e)

    report = ReachReport()
    counts = within_reach(solver, max_jobs, report=report)(epoch)
    assert feasible(epoch, counts)
    n = len(epoch.ids)
    if n <= max_jobs:
        assert seen == [epoch.ids] and report.split == 0
        np.testing.assert_array_equal(counts, _best(epoch))
        return
    running = [i for i in range(n) if epoch.current[i]]
    queued = [i for i in range(n) if not epoch.current[i]]
    want = sorted((running + queued)[:max_jobs])
    assert seen == [tuple(epoch.ids[i] for i in want)]
    assert report.split == 1 and report.jobs_in_window == max_jobs
    assert report.jobs_beyond == n - max_jobs  # every job outside is counted, none dropped
    held = running[max_jobs:]
    assert all(counts[i] == epoch.current[i] for i in held)


def test_small_epoch_is_left_to_the_solver_untouched() -> None:
    e = _epoch(4, [True, False, False, False], [1, 2, 1, 3], 5.0)
    assert np.array_equal(within_reach(_best, 4)(e), _best(e))


def test_jobs_outside_the_window_get_the_greedy_plan_on_what_is_left() -> None:
    e = _epoch(5, [False] * 5, [1, 1, 1, 1, 1], 6.0)
    counts = within_reach(_best, 2)(e)
    window = _best(_epoch(2, [False] * 2, [1, 1], 6.0))
    np.testing.assert_array_equal(counts[:2], window)
    left = 6.0 - float(window.sum())
    rest = fifo_fill(_epoch(3, [False] * 3, [1, 1, 1], left))
    np.testing.assert_array_equal(counts[2:], rest)


def test_max_jobs_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_jobs"):
        within_reach(_best, 0)
