"""Dorm and the elastic MIP under the window rule (issue 18).

Within reach (no decision with more jobs than ``max_jobs``) no decision is split, and each
decides what ``tests/golden/runs.csv`` records for it (``tests/test_golden.py``); beyond it the
solver sees the window, the rest is planned by the documented FIFO fill, every split is
counted, capacity is never exceeded and the same seed gives the same run. Solver time limits
are raised far above what these small models need, so that no run depends on the machine's
speed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from golden.cases import random_epoch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from psched.core.model import EPS
from psched.core.simulator import simulate
from psched.policies import make_policy
from psched.policies.dorm_reach import fifo_fill, split
from psched.policies.epoch import feasible
from psched.policies.greedy import fifo_fill as greedy_fifo_fill
from psched.policies.reach import window_fill
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

SLOW_LIMIT = {"dorm": {"time_limit_s": 60.0}, "elastic-mip": {"time_limit_s": 60.0}}


def _run(policy: Any, seed: int, n: int = 24, slots: int = 30) -> tuple[Any, ...]:
    specs, _ = oasis_paper_jobs(n, seed=seed, slots=slots)
    r = simulate(specs, oasis_paper_cluster(seed=seed), policy, slots, seed=seed)
    records = [(j, rec.admitted, rec.reason, rec.completion, rec.first_slot, rec.done)
               for j, rec in r.records.items()]
    return r.allocations, records, r.report


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("name", ["dorm", "elastic-mip"])
def test_within_reach_no_decision_is_split_and_a_wider_window_changes_nothing(
        name: str, seed: int) -> None:
    default = _run(make_policy(name, **SLOW_LIMIT[name]), seed)
    wider = _run(make_policy(name, **SLOW_LIMIT[name], max_jobs=4096), seed)
    prefix = "dorm" if name == "dorm" else "mip"
    rep = default[2]
    assert rep[f"{prefix}_reach_split"] == 0 and rep[f"{prefix}_reach_decisions"] > 0
    assert default[:2] == wider[:2]


@pytest.mark.parametrize("seed", [1, 4])
@pytest.mark.parametrize("name", ["dorm", "elastic-mip"])
def test_beyond_reach_same_seed_same_run_and_every_split_counted(name: str, seed: int) -> None:
    opts = {**SLOW_LIMIT[name], "max_jobs": 3}
    first = _run(make_policy(name, **opts), seed, n=16, slots=20)
    again = _run(make_policy(name, **opts), seed, n=16, slots=20)
    assert first == again
    rep = first[2]
    prefix = "dorm" if name == "dorm" else "mip"
    split_n = rep[f"{prefix}_reach_split"]
    assert 0 < split_n <= rep[f"{prefix}_reach_decisions"]
    assert rep[f"{prefix}_reach_jobs_in_window"] == 3 * split_n  # the window is always full
    assert rep[f"{prefix}_reach_jobs_beyond"] >= split_n


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), max_jobs=st.integers(1, 5), n=st.integers(4, 14),
       name=st.sampled_from(["dorm", "elastic-mip"]))
def test_capacity_is_never_exceeded_under_the_window_rule(seed: int, max_jobs: int, n: int,
                                                          name: str) -> None:
    """``simulate`` runs the independent plan checker on every slot (it raises on any server
    over capacity, any PS rule broken); the counts of the split add up."""
    specs, _ = oasis_paper_jobs(n, seed=seed, slots=12)
    policy = make_policy(name, **SLOW_LIMIT[name], max_jobs=max_jobs)
    r = simulate(specs, oasis_paper_cluster(seed=seed), policy, 12, seed=seed, check=True)
    prefix = "dorm" if name == "dorm" else "mip"
    assert r.report[f"{prefix}_reach_jobs_in_window"] == max_jobs * r.report[
        f"{prefix}_reach_split"]


@pytest.mark.parametrize("max_jobs", [2, 3])
def test_dorm_reusing_a_settled_decision_equals_solving_it_again(max_jobs: int) -> None:
    """Within reach every event changes the MILP's jobs (an arrival or a completion), so only
    split decisions can repeat one."""
    opts = {**SLOW_LIMIT["dorm"], "max_jobs": max_jobs}
    reused = _run(make_policy("dorm", **opts), 2, n=20, slots=24)
    solved = _run(make_policy("dorm", **opts, reuse=False), 2, n=20, slots=24)
    assert reused[:2] == solved[:2]
    assert reused[2]["dorm_reused"] > 0 and solved[2]["dorm_reused"] == 0
    assert (reused[2]["dorm_solves"] + reused[2]["dorm_reused"]
            <= solved[2]["dorm_solves"])


# -- the rule itself ------------------------------------------------------------------------

def test_split_takes_running_jobs_then_the_earliest_queued() -> None:
    current = np.array([0, 2, 0, 1, 0, 0, 3])
    part = split(current, 4)
    assert part.window.tolist() == [0, 1, 3, 6] and part.held.tolist() == []
    assert part.rest.tolist() == [2, 4, 5]
    part = split(current, 2)  # more running jobs than the window: the latest are held
    assert part.window.tolist() == [1, 3] and part.held.tolist() == [6]
    assert part.rest.tolist() == [0, 2, 4, 5]
    part = split(current, 10)
    assert part.window.tolist() == list(range(7)) and part.rest.size == part.held.size == 0
    with pytest.raises(ValueError, match="max_jobs"):
        split(current, 0)


def _literal_fill(w: np.ndarray, s: np.ndarray, ratio: np.ndarray, upper: np.ndarray,
                  free_w: np.ndarray, free_p: np.ndarray) -> np.ndarray:
    """The documented FIFO fill, one job and one worker at a time."""
    def ps(r: float, n: int) -> float:
        return float(np.ceil(r * n - EPS)) if n else 0.0

    def fits(j: int, n: int, fw: np.ndarray, fp: np.ndarray) -> bool:
        extra_p = ps(ratio[j], n) - ps(ratio[j], int(counts[j]))
        return bool(np.all((n - counts[j]) * w[j] <= fw + 1e-9 * np.maximum(1, abs(fw)))
                    and np.all(extra_p * s[j] <= fp + 1e-9 * np.maximum(1, abs(fp))))

    counts = np.zeros(upper.size, dtype=np.int64)
    fw, fp = free_w.astype(float).copy(), free_p.astype(float).copy()
    for j in range(upper.size):
        if upper[j] >= 1 and fits(j, 1, fw, fp):
            fw, fp = fw - w[j], fp - ps(ratio[j], 1) * s[j]
            counts[j] = 1
    for j in range(upper.size):
        while counts[j] and counts[j] < upper[j] and fits(j, int(counts[j]) + 1, fw, fp):
            fw = fw - w[j]
            fp = fp - (ps(ratio[j], int(counts[j]) + 1) - ps(ratio[j], int(counts[j]))) * s[j]
            counts[j] += 1
    return counts


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 9).flatmap(lambda k: st.tuples(
    st.lists(st.tuples(st.integers(0, 4), st.integers(1, 6)), min_size=k, max_size=k),
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 3)), min_size=k, max_size=k),
    st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=k, max_size=k),
    st.lists(st.integers(0, 8), min_size=k, max_size=k),
    st.tuples(st.integers(0, 12), st.integers(0, 30)),
    st.tuples(st.integers(0, 4), st.integers(0, 8)))))
def test_fill_is_the_documented_fifo_fill_and_fits_what_is_left(data: tuple) -> None:
    w_l, s_l, ratio_l, upper_l, free_w_l, free_p_l = data
    w, s = np.array(w_l, dtype=float), np.array(s_l, dtype=float)
    ratio, upper = np.array(ratio_l), np.array(upper_l, dtype=float)
    free_w, free_p = np.array(free_w_l, dtype=float), np.array(free_p_l, dtype=float)
    counts = fifo_fill(w, s, ratio, upper, free_w, free_p)
    np.testing.assert_array_equal(counts, _literal_fill(w, s, ratio, upper, free_w, free_p))
    assert np.all(counts <= upper) and np.all(counts >= 0)
    ps = np.where(counts > 0, np.ceil(ratio * counts - EPS), 0.0)
    assert np.all(counts @ w <= free_w + 1e-9) and np.all(ps @ s <= free_p + 1e-9)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 30),
       running_share=st.sampled_from([0.0, 0.2, 0.6]))
def test_window_fill_equals_the_greedy_fifo_fill(seed: int, n: int,
                                                 running_share: float) -> None:
    epoch = random_epoch(seed, n, running_share)
    counts = window_fill(epoch)
    np.testing.assert_array_equal(counts, greedy_fifo_fill(epoch))
    assert feasible(epoch, counts)
