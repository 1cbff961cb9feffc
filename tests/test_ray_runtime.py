"""The Ray parameter-server runtime of one job: training, resizing, checkpoints, recovery.

All tests share the session's local Ray cluster (``tests/conftest.py``); models are tiny and
training stops at a sample budget, not at a timer, wherever the test can say so.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray
from hypothesis import given, settings
from hypothesis import strategies as st

from ray_cluster.ps.checkpoint import CheckpointMeta, CheckpointStore, write_slice
from ray_cluster.ps.optim import shard_bounds
from ray_cluster.runtime import JobRuntime, RuntimeConfig, TrainingJob, worker_slots
from ray_cluster.workloads.builtin import SoftmaxRegression, get_workload

FAR = 60.0  # seconds: a deadline no test reaches; the sample budget ends training first


def _job(job_id: str, partitions: int = 4, minibatches: int = 50, epochs: int = 1,
         workload: str = "softmax") -> TrainingJob:
    return TrainingJob(job_id=job_id, workload=get_workload(workload), n_partitions=partitions,
                       minibatches=minibatches, epochs=epochs)


def _alive(actor: Any) -> bool:
    try:
        return bool(ray.get(actor.ping.remote(), timeout=30))
    except ray.exceptions.RayError:
        return False


# -- without Ray: checkpoints and units ------------------------------------------------------
def _write(store: CheckpointStore, version: int, arrays: dict[str, np.ndarray],
           n_shards: int, commit: bool = True) -> CheckpointMeta:
    staging = store.staging(version)
    n = arrays["params"].size
    for lo, hi in shard_bounds(n, n_shards):
        write_slice(staging, lo, hi, {k: a[lo:hi] for k, a in arrays.items()})
    meta = CheckpointMeta(version=version, n_params=n, keys=tuple(arrays), step=version,
                          batches=10 * version, n_workers=1, n_shards=n_shards)
    if commit:
        store.commit(meta)
    return meta


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 60), shards=st.integers(1, 6), data=st.data())
def test_checkpoint_reads_any_range_whatever_shards_wrote_it(tmp_path_factory, n, shards,
                                                             data):
    shards = min(shards, n)
    store = CheckpointStore(tmp_path_factory.mktemp("ck"), "j")
    rng = np.random.default_rng(n)
    arrays = {"params": rng.normal(size=n).astype(np.float32),
              "buffer": rng.normal(size=n).astype(np.float32)}
    meta = _write(store, 0, arrays, shards)
    lo = data.draw(st.integers(0, n - 1))
    hi = data.draw(st.integers(lo + 1, n))
    got = store.load(store.latest() or meta, lo, hi)
    for key, arr in arrays.items():
        np.testing.assert_array_equal(got[key], arr[lo:hi])


def test_uncommitted_checkpoint_is_invisible_and_old_versions_are_pruned(tmp_path):
    store = CheckpointStore(tmp_path, "j", keep=2)
    arrays = {"params": np.arange(10, dtype=np.float32)}
    for v in range(3):
        _write(store, v, arrays, 2)
    _write(store, 3, arrays, 2, commit=False)  # a crash between the shards and the commit
    assert store.versions() == [1, 2]
    assert store.latest().version == 2


def test_commit_refuses_slices_with_a_gap(tmp_path):
    store = CheckpointStore(tmp_path, "j")
    staging = store.staging(0)
    write_slice(staging, 0, 4, {"params": np.zeros(4, np.float32)})
    write_slice(staging, 5, 10, {"params": np.zeros(5, np.float32)})
    meta = CheckpointMeta(version=0, n_params=10, keys=("params",), step=0, batches=0,
                          n_workers=1, n_shards=2)
    with pytest.raises(ValueError, match="gap"):
        store.commit(meta)
    assert store.latest() is None


@given(work=st.integers(1, 500), budget=st.integers(1, 10_000), data=st.data())
def test_worker_slots_reach_the_work_exactly_at_the_budget(work, budget, data):
    b = data.draw(st.integers(0, budget))
    w = worker_slots(b, budget, work)
    assert 0 <= w <= work
    assert (w == work) == (b == budget)


# -- on the session's Ray ----------------------------------------------------------------------
@pytest.mark.ray
@pytest.mark.parametrize("mode", ["async", "sync"])
def test_training_lowers_held_out_loss_and_raises_accuracy(ray_session, tmp_path, mode):
    rt = JobRuntime(_job(f"learn-{mode}", minibatches=60),
                    RuntimeConfig(mode=mode, lr=0.05, checkpoint_dir=str(tmp_path)))
    try:
        rt.resize([None, None], [None])
        before = rt.record()
        rt.run_until(time.time() + FAR)
        after = rt.end()
    finally:
        rt.close()
    assert rt.done and after.batches >= rt.job.budget
    assert after.eval_loss < before.eval_loss - 0.5
    assert after.eval_accuracy > before.eval_accuracy + 0.4
    assert after.eval_accuracy > 0.8
    assert rt.seconds_per_batch() is not None and rt.seconds_per_batch() > 0


@pytest.mark.ray
def test_schedule_resizes_live_actors_and_keeps_state_across_reshards(ray_session, tmp_path):
    """Workers 1 -> 4 -> 2 and PS 1 -> 2 -> 1: live actors as planned, state carried exactly.

    Asynchronous (the OASiS model); the synchronous path of a resize is the same code but for
    the step, and is exercised by the executor tests.
    """
    mode = "async"
    rt = JobRuntime(_job(f"resize-{mode}", minibatches=10_000),
                    RuntimeConfig(mode=mode, lr=0.02, checkpoint_dir=str(tmp_path)))
    seen: list[Any] = []
    try:
        for slot, (n_w, n_ps) in enumerate([(1, 1), (4, 2), (2, 1)]):
            before = rt.optimizer_state() if rt.shards else None
            counters = rt.counters() if rt.shards else None
            rt.resize([None] * n_w, [None] * n_ps)
            seen += [a for a in rt.workers + rt.shards if a not in seen]
            live = [a for a in seen if _alive(a)]
            assert len(rt.workers) == n_w and len(rt.shards) == n_ps
            assert len(live) == n_w + n_ps  # the removed ones are gone
            if before is not None:
                after = rt.optimizer_state()
                np.testing.assert_array_equal(after["params"], before["params"])
                np.testing.assert_array_equal(after["buffer"], before["buffer"])
                assert rt.counters() == counters
            # a fixed amount of training per slot, then the slot ends
            target = rt.batches + 30 * n_w
            _train_batches(rt, target)
            rt.end()
            assert rt.batches >= target, f"slot {slot} trained too little"
        sched = ray.get(rt.shards[0].schedule_state.remote())
        assert [r[2] for r in sched["ramps"]] == [4.0, 2.0]  # 1 -> 4 -> 2 workers
    finally:
        rt.close()


def _train_batches(rt: JobRuntime, target: int) -> None:
    """Train until at least ``target`` mini-batches are applied."""
    rt.run_until(time.time() + FAR, until_batches=target)


@pytest.mark.ray
def test_killed_worker_then_shard_lose_at_most_steps_since_checkpoint(ray_session, tmp_path):
    cfg = RuntimeConfig(mode="async", lr=0.05, checkpoint_dir=str(tmp_path),
                        checkpoint_every_s=0.2)
    rt = JobRuntime(_job("crash", partitions=2, minibatches=400), cfg)
    store = CheckpointStore(tmp_path, "crash")
    try:
        rt.resize([None, None], [None, None])
        rt.begin(time.time() + FAR)
        killed_worker = killed_shard = None
        limit = time.time() + FAR
        while rt.pending() and time.time() < limit:
            ready, _ = ray.wait(rt.pending(), num_returns=1, timeout=0.05)
            for ref in ready:
                rt.handle(ref)
            if killed_worker is None and rt.version >= 1:
                killed_worker = rt.workers[0]
                ray.kill(killed_worker, no_restart=True)
            elif (killed_worker is not None and killed_shard is None
                  and any("worker 0 lost" in e for _, e in rt.events)
                  and rt.version >= 3):
                meta = store.latest()
                killed_shard = rt.shards[1]
                ray.kill(killed_shard, no_restart=True)
        assert killed_worker is not None and killed_shard is not None
        assert not _alive(killed_worker) and not _alive(killed_shard)
        assert len(rt.rollbacks) == 1
        live, restored = rt.rollbacks[0]
        # rolled back to the last checkpoint committed before the kill: only the mini-batches
        # trained since it were lost
        assert restored == meta.batches
        assert live >= restored
        end = rt.end()
        assert rt.done and end.batches >= rt.job.budget
        assert end.eval_accuracy > 0.8
        # a worker lost between its pushes leaves its gradient on some shards only: the
        # next quiescent point puts every shard at one version again, and it checkpoints
        lo, hi = rt.bounds[0]
        ray.get(rt.shards[0].push.remote(np.zeros(hi - lo, np.float32)))
        with pytest.raises(RuntimeError, match="disagree"):
            rt.counters()
        rt._align_counters()
        assert rt.counters() == (end.step + 1, end.batches + 1)
        assert rt.checkpoint().batches == end.batches + 1
    finally:
        rt.close()


@pytest.mark.ray
def test_job_stops_and_resumes_from_disk(ray_session, tmp_path):
    cfg = RuntimeConfig(mode="sync", lr=0.05, checkpoint_dir=str(tmp_path))
    first = JobRuntime(_job("resume", minibatches=40), cfg)
    try:
        first.resize([None], [None, None])
        _train_batches(first, 40)
        first.end()
        state, counters = first.optimizer_state(), first.counters()
        first.suspend()
        assert not first.workers and not first.shards
    finally:
        first.close()
    assert Path(tmp_path, "resume").is_dir()
    second = JobRuntime(_job("resume", minibatches=40), cfg)  # a new controller, from disk
    try:
        second.resize([None], [None])  # another shape, same state
        np.testing.assert_array_equal(second.optimizer_state()["params"], state["params"])
        np.testing.assert_array_equal(second.optimizer_state()["buffer"], state["buffer"])
        assert second.counters() == counters
        second.run_until(time.time() + FAR)
        assert second.done
    finally:
        second.close()


class _Broken(SoftmaxRegression):
    """Softmax regression whose gradient always raises: a bug in a user's workload."""

    def gradient(self, params: np.ndarray, batch: Any) -> tuple[float, np.ndarray]:
        raise ValueError("broken workload")


@pytest.mark.ray
@pytest.mark.parametrize("mode", ["async", "sync"])
def test_a_workload_that_always_raises_fails_the_job_after_one_strike_per_slot(ray_session,
                                                                               tmp_path, mode):
    import sys

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests
    from ray_cluster.runtime import MAX_STRIKES

    job = TrainingJob(job_id=f"broken-{mode}", workload=_Broken(), n_partitions=2,
                      minibatches=50, epochs=1)
    rt = JobRuntime(job, RuntimeConfig(mode=mode, checkpoint_dir=str(tmp_path)))
    try:
        rt.resize([None, None], [None])
        for slot in range(1, MAX_STRIKES + 1):  # one strike per slot: it backs off until the next
            assert rt.fatal is None
            rt.run_until(time.time() + FAR)  # without the strikes: retries until the deadline
            assert rt._strikes == slot
        assert rt.fatal is not None and "broken workload" in rt.fatal
        assert rt.batches == 0
        assert [why.split(":")[0] for why, _ in rt.backoffs] == [
            f"strike {k}" for k in range(1, MAX_STRIKES)]
        assert all(_alive(w) for w in rt.workers)  # the actors were fine: no restarts
    finally:
        rt.close()
