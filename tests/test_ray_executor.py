"""psched's scheduling loop on the Ray executor: real training, placement, progress units."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter

import pytest
import ray

from psched.core.arrivals import TraceArrivals
from psched.core.executor import Executor
from psched.core.loop import SchedulerLoop
from psched.core.model import Alloc, Cluster, JobSpec, Pool, Resources, Server, resolve_job
from psched.core.utility import Utility
from psched.policies import make_policy
from ray_cluster.runtime import RuntimeConfig
from ray_cluster.runtime.executor import (
    RayExecutor,
    demand_resource,
    profile_seconds_per_batch,
    training_job,
    with_measured_tau,
)

SLOT_S = 1.0
GPU_NODE_SERVERS = ("gpu0", "gpu1")  # the fake-GPU nodes of tests/conftest.py
HEAD_SERVER = "head"  # its head node


def _spec(job_id: str, *, n: int = 2, m: int = 150, e: int = 1, arrival: int = 0,
          gpu: float = 0.0) -> JobSpec:
    return JobSpec(job_id=job_id, arrival=arrival, epochs=e, max_workers=n, minibatches=m,
                   tau_s=0.004, grad_mb=0.003, tau_includes_comm=True,
                   worker_demand=Resources(gpu=gpu, cpu=1, memory_gb=1, bandwidth_gbps=1),
                   ps_demand=Resources(cpu=1, memory_gb=1, bandwidth_gbps=1),
                   utility=Utility(kind="sigmoid", value=10, decay=0.5, target=5),
                   workload="softmax", hparams='{"dataset": "digits"}')


def _single_machine(slot_s: float = SLOT_S) -> Cluster:
    """One machine split into a worker server and a PS server (``oasis.md`` section 7)."""
    return Cluster(servers=(
        Server(server_id="w", pool=Pool.WORKER,
               capacity=Resources(gpu=0, cpu=8, memory_gb=32, bandwidth_gbps=10)),
        Server(server_id="p", pool=Pool.PS,
               capacity=Resources(cpu=8, memory_gb=32, bandwidth_gbps=10)),
    ), slot_seconds=slot_s)


@pytest.mark.ray
def test_scheduler_loop_trains_jobs_to_completion_on_ray(ray_session, tmp_path):
    """tau is profiled; the loop's completion comes from measured progress in worker-slots."""
    cluster = _single_machine()
    config = RuntimeConfig(mode="async", lr=0.05, checkpoint_dir=str(tmp_path))
    raw = [_spec("a", n=2, m=150), _spec("b", n=2, m=100, arrival=1)]
    sec = profile_seconds_per_batch(training_job(resolve_job(raw[0], SLOT_S, 10)), config)
    assert 0 < sec < SLOT_S
    specs = [with_measured_tau(s, sec) for s in raw]
    executor = RayExecutor(cluster, config)
    assert isinstance(executor, Executor)
    loop = SchedulerLoop(cluster=cluster, policy=make_policy("fifo"), horizon=30,
                         arrivals=TraceArrivals(specs), executor=executor)
    try:
        while loop.state.active or loop.arrivals.pending():
            loop.step()
            assert loop.state.t < 30, "jobs did not complete"
    finally:
        executor.close()
    for rec in loop.state.records.values():
        assert rec.completion is not None
        assert rec.done == pytest.approx(rec.job.work)
    # each job trained its whole sample budget E N M before the loop saw it complete
    assert not executor.runtimes  # released on completion


@pytest.mark.ray
def test_executor_keeps_fresh_ray_processes_waiting_on_every_node(ray_session, tmp_path):
    """Started (and topped up after each boundary) in the background: an actor no lookahead
    foresaw then starts in a waiting process (``tests/test_warmpool.py`` checks that)."""
    cluster = Cluster(servers=ray_session.servers, slot_seconds=0.5)
    executor = RayExecutor(cluster, RuntimeConfig(checkpoint_dir=str(tmp_path)),
                           node_of="auto", warm_processes=2)
    try:
        executor.warm.wait()
        assert set(executor.warm.counts) == set(ray_session.node_ids.values())
        assert min(executor.warm.counts.values()) >= 2
    finally:
        executor.close()


@pytest.mark.ray
def test_placement_follows_plan_on_fake_gpu_nodes(ray_session, tmp_path):
    """Node affinity, one fake GPU per worker, demands held as custom resources."""
    cluster = Cluster(servers=ray_session.servers, slot_seconds=0.5)
    g0, g1, head = 0, 1, 2
    job = resolve_job(_spec("placed", n=2, m=100_000, gpu=1), 0.5, 100)
    executor = RayExecutor(cluster, RuntimeConfig(mode="sync", checkpoint_dir=str(tmp_path)),
                           node_of="auto", demands_as_resources=True)
    plans = [Alloc.of({g0: 1}, {head: 1}), None, Alloc.of({g1: 1}, {head: 1}),
             Alloc.of({g0: 1, g1: 1}, {head: 2})]
    node = ray_session.node_ids
    try:
        batches = 0
        for t, alloc in enumerate(plans):
            report = executor.apply(t, {} if alloc is None else {"placed": alloc},
                                    {"placed": job})
            rt = executor.runtimes["placed"]
            if alloc is None:
                assert not rt.workers and not rt.shards  # suspended, on disk
                assert report.progress == {}
                continue
            assert rt.batches >= batches  # resumed where it was
            batches = rt.batches
            where_w = ray.get([w.where.remote() for w in rt.workers])
            where_p = ray.get([s.where.remote() for s in rt.shards])
            planned = Counter(node[cluster.servers[h].server_id] for h, c in alloc.workers
                              for _ in range(c))
            assert Counter(n for n, _ in where_w) == planned
            assert all(len(gpus) == 1 for _, gpus in where_w)  # one fake GPU each
            assert {n for n, _ in where_p} == {node[HEAD_SERVER]}
            assert len(where_p) == alloc.n_ps
            # the demands are held as custom resources: 1 vCPU per worker, per PS
            _wait_for_held(demand_resource(Pool.WORKER, "cpu"), alloc.n_workers)
            _wait_for_held(demand_resource(Pool.PS, "cpu"), alloc.n_ps)
        # sync mode, 1 -> 2 workers across a suspension: the Dynamic SGD ramp was started
        sched = ray.get(executor.runtimes["placed"].shards[0].schedule_state.remote())
        assert [r[2] for r in sched["ramps"]] == [2.0]
        # training time left after cold actor start-up varies with the machine's load: the
        # loop test above checks progress, this one placement
    finally:
        executor.close()


@pytest.mark.ray
def test_lookahead_starts_next_slots_actors_during_this_slot(ray_session, tmp_path):
    cluster = _single_machine(slot_s=0.3)
    job = resolve_job(_spec("ahead", n=4, m=100_000), 0.3, 100)
    plans = {0: {"ahead": Alloc.of({0: 1}, {1: 1})}, 1: {"ahead": Alloc.of({0: 3}, {1: 2})}}
    executor = RayExecutor(cluster, RuntimeConfig(checkpoint_dir=str(tmp_path)),
                           lookahead=plans.get)
    try:
        executor.apply(0, plans[0], {"ahead": job})
        rt = executor.runtimes["ahead"]
        spares = [a for k in ("worker", "ps") for _, a in rt._spares[k]]
        assert len(rt._spares["worker"]) == 2 and len(rt._spares["ps"]) == 1
        executor.apply(1, plans[1], {"ahead": job})
        assert len(rt.workers) == 3 and len(rt.shards) == 2
        # the boundary used the actors started a slot early, and kept none spare
        assert all(a in rt.workers + rt.shards for a in spares)
        assert not rt._spares["worker"] and not rt._spares["ps"]
    finally:
        executor.close()


def _wait_for_held(resource: str, amount: float, timeout_s: float = 20.0) -> None:
    """Poll Ray's resource view until ``amount`` of ``resource`` is in use (it lags a bit)."""
    limit = time.time() + timeout_s
    while True:
        held = ray.cluster_resources()[resource] - ray.available_resources().get(resource, 0.0)
        if held == pytest.approx(amount) or time.time() > limit:
            break
        time.sleep(0.1)  # polling Ray's eventually-consistent view, not standing in for work
    assert held == pytest.approx(amount), f"{resource}: {held} held, expected {amount}"


def test_job_without_workload_is_reported_failed_not_raised():
    """Bad input stays one line in the slot report; no Ray call is needed to say so."""
    cluster = _single_machine()
    job = resolve_job(dataclasses.replace(_spec("sim-only"), workload=""), SLOT_S, 10)
    executor = RayExecutor(cluster)
    report = executor.apply(0, {"sim-only": Alloc.of({0: 1}, {1: 1})}, {"sim-only": job})
    assert report.progress == {}
    assert "names no workload" in report.failed["sim-only"]
    executor.close()


@pytest.mark.ray
def test_a_gpu_one_job_leaves_at_a_boundary_is_free_for_another_in_any_order(ray_session,
                                                                              tmp_path):
    """Slot 1: ``b`` (first in the plan) takes the GPU ``a`` shrinks off; slot 2: they swap
    GPUs. Every job first stops the workers it leaves, so no start waits for a GPU (before,
    ``b``'s start waited out ``start_timeout_s`` and the slot failed it)."""
    cluster = Cluster(servers=ray_session.servers, slot_seconds=SLOT_S)
    g0, g1, head = 0, 1, 2
    jobs = {j: resolve_job(_spec(j, n=2, m=100_000, gpu=1), SLOT_S, 100) for j in ("a", "b")}
    executor = RayExecutor(cluster, RuntimeConfig(mode="async", checkpoint_dir=str(tmp_path),
                                                  start_timeout_s=10.0), node_of="auto")
    plans = [{"a": Alloc.of({g0: 1, g1: 1}, {head: 1})},
             {"b": Alloc.of({g1: 1}, {head: 1}), "a": Alloc.of({g0: 1}, {head: 1})},
             {"b": Alloc.of({g0: 1}, {head: 1}), "a": Alloc.of({g1: 1}, {head: 1})}]
    node = ray_session.node_ids
    try:
        for t, plan in enumerate(plans):
            report = executor.apply(t, plan, jobs)
            assert report.failed == {}, (t, report.failed)
            for job_id, alloc in plan.items():
                rt = executor.runtimes[job_id]
                where = [n for n, _ in ray.get([w.where.remote() for w in rt.workers])]
                assert Counter(where) == Counter(node[cluster.servers[h].server_id]
                                                 for h, c in alloc.workers for _ in range(c))
        assert executor.slot_log[1]["resize_s"] < 10.0  # no start waited for a GPU
    finally:
        executor.close()
