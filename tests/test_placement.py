"""Round-robin placement: the closed form against the literal one-at-a-time deal."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import clusters, job_specs

from psched.core.model import Cluster, JobSpec, Pool, resolve_job
from psched.core.placement import Cursor, Pools, deal, most_workers, next_with_room, place, room


def literal_deal(capacity: list[int], count: int, start: int) -> tuple[list[int], int] | None:
    """Visit servers cyclically from ``start``, one container per visit to one with room."""
    n = len(capacity)
    if sum(capacity) < count:
        return None
    counts, pos, last = [0] * n, start % n, None
    while sum(counts) < count:
        if counts[pos] < capacity[pos]:
            counts[pos] += 1
            last = pos
        pos = (pos + 1) % n
    return counts, (start % n if last is None else (last + 1) % n)


capacities = st.lists(st.integers(0, 6), min_size=1, max_size=8)


@settings(max_examples=300)
@given(capacities, st.integers(0, 40), st.integers(0, 20))
def test_deal_equals_the_literal_round_robin(capacity: list[int], count: int, start: int) -> None:
    got = deal(np.array(capacity), count, start)
    want = literal_deal(capacity, count, start)
    if want is None:
        assert got is None
    else:
        assert got is not None
        assert got[0].tolist() == want[0]
        assert got[1] == want[1]


@settings(max_examples=100)
@given(capacities, st.lists(st.integers(0, 8), min_size=1, max_size=4), st.integers(0, 7))
def test_deal_continues_round_robin_across_jobs(capacity: list[int], counts: list[int],
                                                start: int) -> None:
    """Dealing several jobs with the cursor carried on equals one long deal."""
    left, pos, total = np.array(capacity), start, np.zeros(len(capacity), dtype=int)
    for c in counts:
        got = deal(left, c, pos)
        if got is None:
            return
        left, pos, total = left - got[0], got[1], total + got[0]
    want = literal_deal(capacity, int(total.sum()), start)
    assert want is not None
    assert total.tolist() == want[0]
    assert pos == want[1]


@settings(max_examples=200)
@given(st.lists(st.integers(0, 40).map(lambda x: x / 4), min_size=3, max_size=3),
       st.lists(st.integers(0, 12).map(lambda x: x / 4), min_size=3, max_size=3))
def test_room_is_the_most_containers_that_fit(free: list[float], demand: list[float]) -> None:
    f, d = np.array([free]), np.array(demand)
    got = int(room(f, d, 60)[0])  # at most 10 / 0.25 = 40 unless nothing is demanded
    fits = [c for c in range(61) if np.all(c * d <= f[0] + 1e-9)]
    assert got == max(fits)


@settings(max_examples=100)
@given(st.lists(st.lists(st.integers(0, 8), min_size=2, max_size=2), min_size=1, max_size=6),
       st.lists(st.integers(1, 3), min_size=2, max_size=2), st.integers(0, 9))
def test_next_with_room_is_a_deal_of_one(free: list[list[int]], demand: list[int],
                                         start: int) -> None:
    f, d = np.array(free, dtype=float), np.array(demand, dtype=float)
    start %= len(free)
    got = next_with_room(f, d, start)
    one = deal(room(f, d, 1), 1, start)
    assert (got is None) == (one is None)
    if one is not None:
        assert got == int(np.flatnonzero(one[0])[0])


@settings(max_examples=60, deadline=None)
@given(clusters(), job_specs(), st.integers(0, 12), st.integers(0, 5))
def test_place_respects_capacity_and_pools(cluster: Cluster, spec: JobSpec, workers: int,
                                           start: int) -> None:
    pools = Pools.of(cluster)
    w, s = spec.worker_demand.as_array(), spec.ps_demand.as_array()
    ps = min(workers, int(np.ceil(workers / 2)))
    free = cluster.capacity
    placed = place(free, pools, worker_demand=w, ps_demand=s, workers=workers, ps=ps,
                   cursor=Cursor(worker=start % pools.worker.size, ps=start % pools.ps.size))
    w_room = int(room(free[pools.worker], w, workers).sum())
    p_room = int(room(free[pools.ps], s, ps).sum())
    if placed is None:
        assert w_room < workers or p_room < ps
        return
    alloc = placed.alloc
    assert alloc.n_workers == workers and alloc.n_ps == ps
    assert all(cluster.pool_of(h) == Pool.WORKER for h, _ in alloc.workers)
    assert all(cluster.pool_of(k) == Pool.PS for k, _ in alloc.ps)
    use = np.zeros_like(free)
    for h, c in alloc.workers:
        use[h] += c * w
    for k, c in alloc.ps:
        use[k] += c * s
    assert np.all(use <= free + 1e-9)
    np.testing.assert_allclose(placed.free, free - use, atol=1e-9)


def test_place_refuses_without_placing_anything() -> None:
    free = np.array([[1.0, 4.0], [1.0, 4.0], [0.0, 8.0]])
    pools = Pools(worker=np.array([0, 1]), ps=np.array([2]))
    demand_w, demand_ps = np.array([1.0, 1.0]), np.array([0.0, 5.0])
    assert place(free, pools, worker_demand=demand_w, ps_demand=demand_ps, workers=3,
                 ps=1) is None
    assert place(free, pools, worker_demand=demand_w, ps_demand=demand_ps, workers=2,
                 ps=2) is None
    ok = place(free, pools, worker_demand=demand_w, ps_demand=demand_ps, workers=2, ps=1)
    assert ok is not None
    assert ok.alloc.workers == ((0, 1), (1, 1)) and ok.alloc.ps == ((2, 1),)
    assert np.array_equal(free[:, 0], [1.0, 1.0, 0.0])  # input untouched


@settings(max_examples=60, deadline=None)
@given(clusters(), job_specs(max_workers=12), st.integers(0, 14))
def test_most_workers_is_the_largest_count_that_places(cluster: Cluster, spec: JobSpec,
                                                       limit: int) -> None:
    job = resolve_job(spec, cluster.slot_seconds, 20)
    pools = Pools.of(cluster)
    w, s = spec.worker_demand.as_array(), spec.ps_demand.as_array()
    fits = [n for n in range(0, min(limit, job.max_workers) + 1)
            if job.ps_needed(n) <= n
            and place(cluster.capacity, pools, worker_demand=w, ps_demand=s, workers=n,
                      ps=job.ps_needed(n)) is not None]
    assert most_workers(cluster.capacity, pools, job, limit) == max(fits)


@pytest.mark.parametrize("count", [0, 1, 5])
def test_deal_on_an_empty_pool(count: int) -> None:
    got = deal(np.zeros(0, dtype=int), count, 0)
    assert (got is None) == (count > 0)
