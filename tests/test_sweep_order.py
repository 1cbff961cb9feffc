"""Which cell a sweep starts next (longest estimated first: the table's cost per job, rescaled
by the cells finished), and where it runs (pinned to one core)."""

from __future__ import annotations

import itertools
import os
from concurrent.futures import Future

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psched.runs.local import pinned
from psched.runs.sweep import SweepCell
from psched.runs.sweep_order import (
    LOAD_EXPONENT,
    POLICY_CPU_S_PER_1K_JOBS,
    CellCosts,
    next_cell,
    seed_order,
)


def _cells(policies: str, seeds: tuple[int, ...] = (0, 1)) -> list[SweepCell]:
    return [SweepCell(policy=p, seed=s, load=1.0, scale=1.0)
            for s in seeds for p in policies.split(",")]


def _ready(*seeds: int) -> dict[int, Future[object]]:
    out: dict[int, Future[object]] = {}
    for s in seeds:
        f: Future[object] = Future()
        f.set_result([])
        out[s] = f
    return out


def _costs(walls: dict[str, list[float]], jobs: int = 10_000) -> CellCosts:
    costs = CellCosts(jobs)
    for policy, times in walls.items():
        for i, w in enumerate(times):
            costs.observe(SweepCell(policy=policy, seed=i, load=1.0, scale=1.0), w)
    return costs


def test_with_nothing_finished_the_policy_costliest_per_job_in_the_table_starts_first() -> None:
    queue = _cells("srtf,fifo,drf")  # table: drf 0.49 > fifo 0.37 > srtf 0.21 CPU s per 1k jobs
    picked = [next_cell(queue, CellCosts(10_000), _ready(0, 1)).policy for _ in range(6)]
    assert picked == ["drf", "drf", "fifo", "fifo", "srtf", "srtf"]


def test_a_policy_missing_from_the_table_counts_as_the_costliest() -> None:
    costs = CellCosts(1000)
    unknown = SweepCell(policy="not-in-table", seed=0, load=1.0, scale=1.0)
    assert costs.prior_s(unknown) == max(POLICY_CPU_S_PER_1K_JOBS.values())
    queue = _cells("oasis,not-in-table")
    assert next_cell(queue, costs, _ready(0, 1)).policy == "oasis"  # a tie: sweep order


def test_known_policies_start_longest_mean_first() -> None:
    queue = _cells("fifo,srtf,drf")
    costs = _costs({"fifo": [10.0, 12.0], "srtf": [30.0], "drf": [20.0, 25.0]})
    order = [(c.policy, c.seed) for c in (next_cell(queue, costs, _ready(0, 1))
                                          for _ in range(6))]
    assert order == [("srtf", 0), ("srtf", 1), ("drf", 0), ("drf", 1), ("fifo", 0), ("fifo", 1)]
    assert queue == []


def test_an_unfinished_policy_is_its_prior_rescaled_by_the_finished_cells() -> None:
    costs = CellCosts(80_000)
    srtf = SweepCell(policy="srtf", seed=0, load=1.0, scale=1.0)
    rrh = SweepCell(policy="rrh", seed=0, load=1.0, scale=1.0)
    assert costs.estimate_s(rrh) == pytest.approx(30.2)  # nothing finished: the table's
    costs.observe(srtf, 2 * 16.8)  # this machine runs srtf at half the table's speed
    assert costs.estimate_s(rrh) == pytest.approx(2 * 30.2)
    assert costs.estimate_s(srtf) == pytest.approx(2 * 16.8)


def test_a_cell_is_estimated_by_finished_cells_of_its_policy_load_and_scale_first() -> None:
    costs = CellCosts(10_000)
    at = {ld: SweepCell(policy="fifo", seed=0, load=ld, scale=1.0) for ld in (1.0, 2.0, 3.0)}
    costs.observe(at[1.0], 10.0)
    costs.observe(at[2.0], 30.0)
    assert costs.estimate_s(at[1.0]) == pytest.approx(10.0)
    assert costs.estimate_s(at[2.0]) == pytest.approx(30.0)
    # load 3: its prior times the policy's mean ratio (wall / prior) of the loads seen
    ratio = (10.0 / costs.prior_s(at[1.0]) + 30.0 / costs.prior_s(at[2.0])) / 2
    assert costs.estimate_s(at[3.0]) == pytest.approx(costs.prior_s(at[3.0]) * ratio)


@pytest.mark.parametrize("policy", ["fifo", "srtf", "not-in-table"])
def test_a_denser_load_is_estimated_longer_by_the_measured_exponent(policy: str) -> None:
    costs = CellCosts(30_000)
    light, dense = (SweepCell(policy=policy, seed=0, load=ld, scale=1.0) for ld in (1.0, 2.0))
    assert costs.estimate_s(dense) == pytest.approx(costs.estimate_s(light) * 2 ** LOAD_EXPONENT)
    queue = [light, dense]
    assert next_cell(queue, costs, {}) is dense


def test_seeds_are_mapped_in_the_order_their_first_cell_starts() -> None:
    cells = [SweepCell(policy=p, seed=s, load=1.0, scale=1.0)
             for s, p in [(0, "srtf"), (1, "srtf"), (2, "drf"), (0, "drf"), (3, "fifo")]]
    assert seed_order(cells, CellCosts(1000)) == [2, 0, 3, 1]


def test_a_cell_whose_jobs_are_mapped_goes_before_one_still_loading() -> None:
    queue = _cells("fifo", seeds=(0, 1))
    loading = _ready(1)
    loading[0] = Future()  # seed 0 still being mapped
    assert next_cell(queue, CellCosts(1000), loading).seed == 1


@pytest.mark.parametrize("n", [1, 2, 5])
def test_every_cell_is_handed_out_exactly_once(n: int) -> None:
    queue = _cells("fifo,srtf,drf", seeds=tuple(range(n)))
    want = sorted(c.key for c in queue)
    costs = CellCosts(1000)
    got = []
    while queue:
        c = next_cell(queue, costs, _ready(*range(n)))
        costs.observe(c, float(len(c.policy) + c.seed))
        got.append(c.key)
    assert sorted(got) == want


def _list_schedule(walls: list[float], places: int, order: list[int]) -> float:
    """The end of the cells handed out in ``order``, each to the place that frees first."""
    free = [0.0] * places
    for i in order:
        k = free.index(min(free))
        free[k] += walls[i]
    return max(free)


def _best_end(walls: list[float], places: int) -> float:
    """The best end over every assignment of the cells to the places (brute force)."""
    return min(_list_schedule(walls, places, list(perm))
               for perm in itertools.permutations(range(len(walls))))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(sorted(POLICY_CPU_S_PER_1K_JOBS)), min_size=2, max_size=7),
       st.integers(min_value=2, max_value=3))
def test_with_exact_estimates_the_sweep_ends_within_grahams_lpt_bound(
        policies: list[str], places: int) -> None:
    """Cells cost exactly their table prior: handing them out with ``next_cell`` to the
    place that frees first ends within (4/3 - 1/(3k)) of the best assignment (brute force)."""
    cells = [SweepCell(policy=p, seed=i, load=1.0, scale=1.0) for i, p in enumerate(policies)]
    costs = CellCosts(10_000)
    walls = [costs.prior_s(c) for c in cells]
    queue = list(cells)
    order = [cells.index(next_cell(queue, costs, {})) for _ in cells]
    assert sorted(walls[i] for i in order) == sorted(walls)
    assert all(walls[a] >= walls[b] for a, b in itertools.pairwise(order))
    end = _list_schedule(walls, places, order)
    assert end <= (4 / 3 - 1 / (3 * places)) * _best_end(walls, places) + 1e-9


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
@pytest.mark.parametrize("core", [0, 1, 5])
def test_a_pinned_cell_runs_on_one_core_and_gives_the_others_back(core: int) -> None:
    before = os.sched_getaffinity(0)
    with pinned(core):
        inside = os.sched_getaffinity(0)
    assert inside == {sorted(before)[core % len(before)]}
    assert os.sched_getaffinity(0) == before


def test_no_core_index_leaves_the_affinity_alone() -> None:
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    with pinned(None):
        if before is not None:
            assert os.sched_getaffinity(0) == before


def test_among_cells_of_one_policy_the_seed_a_worker_just_freed_goes_first() -> None:
    queue = _cells("fifo,srtf", seeds=(0, 1, 2))
    wall = {"fifo": [10.0], "srtf": [30.0]}
    picked = next_cell(queue, _costs(wall), _ready(0, 1, 2), prefer=2)
    assert (picked.policy, picked.seed) == ("srtf", 2)


@pytest.mark.parametrize("prefer", [0, 1, None])
def test_the_preferred_seed_never_goes_before_a_longer_policy(prefer: int | None) -> None:
    queue = _cells("fifo,srtf", seeds=(0, 1))
    wall = {"fifo": [10.0], "srtf": [30.0]}
    queue = [c for c in queue if not (c.policy == "srtf" and c.seed == 0)]
    picked = next_cell(queue, _costs(wall), _ready(0, 1), prefer=prefer)
    assert (picked.policy, picked.seed) == ("srtf", 1)
