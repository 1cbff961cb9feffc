"""Which cell a sweep starts next (unknown policies first, then the longest known), and
where it runs (pinned to one core)."""

from __future__ import annotations

import os
from concurrent.futures import Future

import pytest

from psched.sweep import SweepCell, _next_cell, _pinned


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


def test_a_policy_with_no_finished_cell_starts_before_known_ones_in_sweep_order() -> None:
    queue = _cells("fifo,srtf,drf")
    wall = {"fifo": [30.0]}
    picked = [_next_cell(queue, wall, _ready(0, 1)).policy for _ in range(2)]
    assert picked == ["srtf", "drf"]


def test_known_policies_start_longest_mean_first() -> None:
    queue = _cells("fifo,srtf,drf")
    wall = {"fifo": [10.0, 12.0], "srtf": [30.0], "drf": [20.0, 25.0]}
    order = [(c.policy, c.seed) for c in (_next_cell(queue, wall, _ready(0, 1))
                                          for _ in range(6))]
    assert order == [("srtf", 0), ("srtf", 1), ("drf", 0), ("drf", 1), ("fifo", 0), ("fifo", 1)]
    assert queue == []


def test_a_cell_whose_jobs_are_mapped_goes_before_one_still_loading() -> None:
    queue = _cells("fifo", seeds=(0, 1))
    loading = _ready(1)
    loading[0] = Future()  # seed 0 still being mapped
    assert _next_cell(queue, {}, loading).seed == 1


@pytest.mark.parametrize("n", [1, 2, 5])
def test_every_cell_is_handed_out_exactly_once(n: int) -> None:
    queue = _cells("a,b,c", seeds=tuple(range(n)))
    want = sorted(c.key for c in queue)
    wall: dict[str, list[float]] = {}
    got = []
    while queue:
        c = _next_cell(queue, wall, _ready(*range(n)))
        wall.setdefault(c.policy, []).append(float(len(c.policy) + c.seed))
        got.append(c.key)
    assert sorted(got) == want


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
@pytest.mark.parametrize("core", [0, 1, 5])
def test_a_pinned_cell_runs_on_one_core_and_gives_the_others_back(core: int) -> None:
    before = os.sched_getaffinity(0)
    with _pinned(core):
        inside = os.sched_getaffinity(0)
    assert inside == {sorted(before)[core % len(before)]}
    assert os.sched_getaffinity(0) == before


def test_no_core_index_leaves_the_affinity_alone() -> None:
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    with _pinned(None):
        if before is not None:
            assert os.sched_getaffinity(0) == before


def test_among_cells_of_one_policy_the_seed_a_worker_just_freed_goes_first() -> None:
    queue = _cells("fifo,srtf", seeds=(0, 1, 2))
    wall = {"fifo": [10.0], "srtf": [30.0]}
    picked = _next_cell(queue, wall, _ready(0, 1, 2), prefer=2)
    assert (picked.policy, picked.seed) == ("srtf", 2)


@pytest.mark.parametrize("prefer", [0, 1, None])
def test_the_preferred_seed_never_goes_before_a_longer_policy(prefer: int | None) -> None:
    queue = _cells("fifo,srtf", seeds=(0, 1))
    wall = {"fifo": [10.0], "srtf": [30.0]}
    queue = [c for c in queue if not (c.policy == "srtf" and c.seed == 0)]
    picked = _next_cell(queue, wall, _ready(0, 1), prefer=prefer)
    assert (picked.policy, picked.seed) == ("srtf", 1)
