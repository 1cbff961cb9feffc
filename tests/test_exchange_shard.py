"""Parameter exchange between a worker and its PS shards: versions, held slices, exact values.

A shard sends its slice only to a caller that does not already hold the current version; a
worker keeps the slices of its last pull or push and asks only for changed ones. These tests
check that nothing stale is ever used: a worker trained over several segments, with another
party pushing to one shard in between, takes exactly the steps a single-process loop takes.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
import ray

from ray_cluster.ps.actors import PSShard, Worker
from ray_cluster.ps.elastic import LRScaleSchedule
from ray_cluster.ps.optim import FUSED_MIN_ELEMENTS, MomentumSGD, MomentumState, shard_bounds
from ray_cluster.workloads.builtin import get_workload

FAR = 60.0  # seconds: a deadline no test reaches; the mini-batch count ends training first


def _shards(opt: MomentumSGD, params: np.ndarray, n_shards: int) -> tuple[list[Any], list]:
    bounds = shard_bounds(params.size, n_shards)
    shards = [PSShard.remote(opt) for _ in bounds]
    sched = LRScaleSchedule().to_dict()
    piece = {"lo": 0, "hi": params.size, "params": params,
             "buffer": np.zeros(params.size, np.float32)}
    ray.get([s.load.remote(lo, hi, 0, 0, sched, piece)
             for s, (lo, hi) in zip(shards, bounds, strict=True)])
    return shards, bounds


@pytest.mark.ray
def test_shard_sends_its_slice_only_when_the_caller_lacks_the_version(ray_session) -> None:
    opt = MomentumSGD(lr=0.1, momentum=0.9)
    params = np.arange(10, dtype=np.float32)
    (shard,), _ = _shards(opt, params, 1)
    v1, p1 = ray.get(shard.pull_if_changed.remote(None))
    assert p1 is not None and np.array_equal(p1, params)
    v2, p2 = ray.get(shard.pull_if_changed.remote(v1))
    assert v2 == v1 and p2 is None  # held already: no array moves
    grad = np.ones(10, np.float32)
    batches, v3, p3 = ray.get(shard.push_pull.remote(grad))
    want, _ = opt.update(params, grad, opt.init(10))
    assert batches == 1 and v3 != v1 and np.array_equal(p3, want)
    v4, p4 = ray.get(shard.pull_if_changed.remote(v1))  # an old version gets the new values
    assert v4 == v3 and np.array_equal(p4, want)
    ray.get(shard.load.remote(0, 10, 0, 0, LRScaleSchedule().to_dict(),
                              {"lo": 0, "hi": 10, "params": params, "buffer": params}))
    v5, p5 = ray.get(shard.pull_if_changed.remote(v3))  # a load is a new version too
    assert v5 != v3 and np.array_equal(p5, params)
    other, _ = _shards(opt, params, 1)
    v6, p6 = ray.get(other[0].pull_if_changed.remote(v5))  # versions name one shard only
    assert v6 != v5 and p6 is not None
    for a in (shard, *other):
        ray.kill(a)


@pytest.mark.ray
@pytest.mark.parametrize("n_shards", [1, 2, 3])
def test_worker_over_segments_with_foreign_pushes_takes_the_single_process_steps(
        ray_session, n_shards: int) -> None:
    wl = get_workload("softmax")
    opt = MomentumSGD(lr=0.05, momentum=0.9)
    params = wl.init_params(0)
    shards, bounds = _shards(opt, params, n_shards)
    worker = Worker.remote(wl, 2, 16)
    ray.get(worker.set_shards.remote(shards, bounds))
    ray.get(worker.set_partitions.remote([1], [5, 6]))
    # the same mini-batch stream in this process, and the same steps on the whole vector
    stream = wl.batches(wl.partition(2, 1), 16, np.random.default_rng([5, 6]))
    state = opt.init(params.size)
    last = len(bounds) - 1
    foreign = np.full(bounds[last][1] - bounds[last][0], 0.5, np.float32)
    applied = 0
    try:
        for segment in range(4):
            steps = 3
            out = ray.get(worker.train.remote(time.time() + FAR, applied + steps))
            assert out["batches"] == steps
            applied += steps
            for _ in range(steps):
                _, grad = wl.gradient(params, next(stream))
                params, state = opt.update(params, grad, state)
            if segment in (0, 2):  # someone else changes the last shard between segments
                ray.get(shards[last].push.remote(foreign))
                lo, hi = bounds[last]
                full = np.zeros(params.size, np.float32)
                full[lo:hi] = foreign
                # element-wise update: the other slices' elements are left as they are
                new_p, new_s = opt.update(params, full, state)
                params[lo:hi], state.buffer[lo:hi] = new_p[lo:hi], new_s.buffer[lo:hi]
                if n_shards == 1:
                    state = new_s
                if n_shards == 1:  # shard 0 counts the batches train stops on
                    applied += 1
        got = np.concatenate(ray.get([s.pull.remote() for s in shards]))
        np.testing.assert_allclose(got, params, rtol=1e-5, atol=1e-6)
    finally:
        for a in (worker, *shards):
            ray.kill(a)


def _push_and_compare(shard: Any, opt: MomentumSGD, want: np.ndarray, state: MomentumState,
                      pushes: int, rng: np.random.Generator) -> tuple[np.ndarray, MomentumState]:
    """``pushes`` pushes to ``shard``, holding ``want`` and ``state``: each returns the pure
    update's bits; returns where the pure update stands after them."""
    for _ in range(pushes):
        grad = rng.standard_normal(want.size, dtype=np.float32)
        _, _, got = ray.get(shard.push_pull.remote(grad))
        want, state = opt.update(want, grad, state)
        assert np.array_equal(got, want)
    return want, state


@pytest.mark.ray
@pytest.mark.parametrize("inside", [False, True])
def test_shard_with_a_large_slice_switches_to_the_fused_kernel_with_the_same_bits(
        ray_session, inside: bool) -> None:
    n = FUSED_MIN_ELEMENTS + 7
    opt = MomentumSGD(lr=0.05, momentum=0.9, lr_in_buffer=inside)
    rng = np.random.default_rng(3)
    params = rng.standard_normal(n, dtype=np.float32)
    (shard,), _ = _shards(opt, params, 1)
    assert ray.get(shard.update_kernel.remote()) == "numpy"  # nothing loaded before an update
    want, state = _push_and_compare(shard, opt, params, opt.init(n), 1, rng)
    waited_until = time.time() + 120  # loading takes ~0.5 s; a slow machine gets ample time
    while ray.get(shard.update_kernel.remote()) != "fused":  # started after that update
        assert time.time() < waited_until, "the shard never loaded the fused kernel"
        time.sleep(0.1)
    _push_and_compare(shard, opt, want, state, 2, rng)  # momentum carried across kernels
    ray.kill(shard)


@pytest.mark.ray
def test_warmed_shard_of_a_large_job_updates_with_the_fused_kernel_from_the_start(
        ray_session) -> None:
    n = FUSED_MIN_ELEMENTS + 7
    opt = MomentumSGD(lr=0.05, momentum=0.9)
    rng = np.random.default_rng(4)
    params = rng.standard_normal(n, dtype=np.float32)
    shard = PSShard.remote(opt, n)  # as the runtime creates a spare: told the job's size
    assert ray.get(shard.warm.remote()) == "fused"
    ray.get(shard.load.remote(0, n, 0, 0, LRScaleSchedule().to_dict(),
                              {"lo": 0, "hi": n, "params": params,
                               "buffer": np.zeros(n, np.float32)}))
    _push_and_compare(shard, opt, params, opt.init(n), 2, rng)
    ray.kill(shard)


@pytest.mark.ray
def test_shard_with_a_small_slice_updates_with_numpy_and_loads_no_numba(ray_session) -> None:
    opt = MomentumSGD(lr=0.1, momentum=0.9)
    params = np.arange(100, dtype=np.float32)
    (shard,), _ = _shards(opt, params, 1)
    _, _, got = ray.get(shard.push_pull.remote(np.ones(100, np.float32)))
    want, _ = opt.update(params, np.ones(100, np.float32), opt.init(100))
    assert np.array_equal(got, want)
    assert ray.get(shard.update_kernel.remote()) == "numpy"
    assert ray.get(shard.warm.remote()) == "numpy"  # a small job's shard never loads Numba
    ray.kill(shard)
