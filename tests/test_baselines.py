"""Behaviour of the FIFO and DRF baselines (``baselines.md``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import Instance, allocations_by_slot, clusters, instances, job_specs

from psched.core.model import (
    Alloc,
    Cluster,
    Job,
    JobSpec,
    Pool,
    Resources,
    Server,
    ceil_eps,
    resolve_job,
)
from psched.core.placement import Pools, next_with_room, room
from psched.core.simulator import simulate
from psched.core.utility import Utility
from psched.policies import JobStatus, RunContext, View, make_policy
from psched.policies.drf import DrfPolicy, share_key
from psched.policies.fifo import MAX_REQUEST, FifoPolicy, job_rng

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def server(sid: str, pool: Pool, **capacity: float) -> Server:
    """A server with the given capacities and, unless given, 100 Gbps (never binding)."""
    capacity.setdefault("bandwidth_gbps", 100.0)
    return Server(server_id=sid, pool=pool, capacity=Resources(**capacity))


def spec(job_id: str, arrival: int, n: int, slots_at_n: int, *, b: float = 0.0,
         big_b: float = 1.0, ps: Resources | None = None, **worker: float) -> JobSpec:
    """A job with exactly ``W = n * slots_at_n`` worker-slots of work."""
    return JobSpec(job_id=job_id, arrival=arrival, epochs=1, max_workers=n, minibatches=1,
                   tau_s=slots_at_n * 3600.0, grad_mb=1.0, tau_includes_comm=True,
                   worker_demand=Resources(bandwidth_gbps=b, **worker),
                   ps_demand=replace(ps or Resources(cpu=1.0), bandwidth_gbps=big_b),
                   utility=Utility(kind="constant", value=1.0))


def one_box(gpu: float = 4.0, ps_cpu: float = 8.0) -> Cluster:
    return Cluster(servers=(server("w0", Pool.WORKER, gpu=gpu, cpu=64, memory_gb=64),
                            server("p0", Pool.PS, cpu=ps_cpu, memory_gb=64)))


def started(policy: str, specs: list[JobSpec], cluster: Cluster, horizon: int,
            **opts: object) -> dict[str, int | None]:
    result = simulate(specs, cluster, make_policy(policy, **opts), horizon)
    return {j: r.first_slot for j, r in result.records.items()}


# -- FIFO -------------------------------------------------------------------------------------
def test_fifo_does_not_backfill_around_a_waiting_head() -> None:
    """A (3 GPUs, slots 0-2) blocks B (2 GPUs); C (1 GPU) would fit but waits behind B."""
    jobs = [spec("A", 0, 1, 3, gpu=3), spec("B", 1, 1, 2, gpu=2), spec("C", 2, 1, 1, gpu=1)]
    assert started("fifo", jobs, one_box(gpu=4), 10) == {"A": 0, "B": 3, "C": 3}


def test_fifo_draws_each_request_once_from_seed_and_job_id() -> None:
    cluster = Cluster(servers=(server("w0", Pool.WORKER, gpu=1000, cpu=1000),
                               server("p0", Pool.PS, cpu=1000)))
    jobs = [resolve_job(spec(f"job{i}", 0, 20 + i, 1000, gpu=1), 3600.0, 50) for i in range(40)]
    a, b = FifoPolicy(trim=False), FifoPolicy(trim=False)
    a.start(RunContext(cluster=cluster, horizon=50, seed=5))
    b.start(RunContext(cluster=cluster, horizon=50, seed=5))
    forward = [a.request(j) for j in jobs]
    backward = [b.request(j) for j in reversed(jobs)][::-1]
    assert forward == backward
    drawn = [int(job_rng(5, j.job_id).integers(1, MAX_REQUEST + 1)) for j in jobs]
    assert forward == [min(j.max_workers, r) for j, r in zip(jobs, drawn, strict=True)]
    assert len(set(forward)) > 5  # really drawn, not constant
    c = FifoPolicy(trim=False)
    c.start(RunContext(cluster=cluster, horizon=50, seed=6))
    assert [c.request(j) for j in jobs] != forward


def test_fifo_shrinks_a_request_no_empty_cluster_could_hold() -> None:
    """r > 4 workers of 1 GPU on a 4-GPU cluster would block the queue forever: cut to 4."""
    cluster = one_box(gpu=4)
    jobs = [resolve_job(spec(f"big{i}", 0, 30, 1, gpu=1), 3600.0, 100) for i in range(20)]
    policy = FifoPolicy(trim=False)
    policy.start(RunContext(cluster=cluster, horizon=100, seed=1))
    drawn = [int(job_rng(1, j.job_id).integers(1, MAX_REQUEST + 1)) for j in jobs]
    assert [policy.request(j) for j in jobs] == [min(4, r) for r in drawn]
    assert policy.report()["fifo_requests_shrunk"] == sum(r > 4 for r in drawn) > 0
    result = simulate([j.spec for j in jobs[:3]], cluster, FifoPolicy(trim=False), 100, seed=1)
    assert all(r.completion is not None for r in result.records.values())


def test_fifo_shrinks_to_what_the_ps_pool_holds() -> None:
    """b = B needs one PS per worker; the PS server holds 2, so the request is 2 workers."""
    job = resolve_job(spec("j", 0, 30, 50, b=1.0, big_b=1.0, ps=Resources(cpu=4), gpu=0.1),
                      3600.0, 100)
    policy = FifoPolicy(max_request=1_000_000, trim=False)
    policy.start(RunContext(cluster=one_box(gpu=4, ps_cpu=8), horizon=100, seed=0))
    assert policy.request(job) == 2


def test_fifo_trims_to_the_fewest_workers_with_the_same_duration() -> None:
    """W = 10 with 7 workers takes 2 slots; 5 workers also take 2 slots."""
    cluster = Cluster(servers=(server("w0", Pool.WORKER, gpu=100, cpu=100),
                               server("p0", Pool.PS, cpu=100)))
    policy = FifoPolicy()
    policy.start(RunContext(cluster=cluster, horizon=50, seed=0))
    for i in range(30):
        job = resolve_job(spec(f"t{i}", 0, 10, 1, gpu=1), 3600.0, 50)  # W = 10
        n = policy.request(job)
        r = min(10, int(job_rng(0, job.job_id).integers(1, MAX_REQUEST + 1)))
        assert n == ceil_eps(10 / ceil_eps(10 / r))
        assert ceil_eps(10 / n) == ceil_eps(10 / r)


@SETTINGS
@given(instance=instances())
def test_fifo_runs_fixed_requests_strictly_in_arrival_order(instance: Instance) -> None:
    cluster, specs, horizon = instance
    policy = FifoPolicy()
    result = simulate(specs, cluster, policy, horizon, seed=2)
    by_slot = allocations_by_slot(result.allocations)
    pools = Pools.of(cluster)
    admitted = [r for r in result.records.values() if r.admitted]
    starts = [r.first_slot if r.first_slot is not None else horizon for r in admitted]
    assert starts == sorted(starts), "a later job started before an earlier one"
    for rec in admitted:
        job_id, job = rec.job.job_id, rec.job
        if rec.first_slot is None:
            continue
        end = rec.completion if rec.completion is not None else horizon - 1
        rows = [by_slot.get(t, {}).get(job_id) for t in range(rec.first_slot, end + 1)]
        assert all(r == rows[0] for r in rows), f"{job_id} changed its allocation"
        assert rows[0] is not None
        assert sum(rows[0][0].values()) == policy.request(job)
        assert sum(rows[0][1].values()) == job.ps_needed(policy.request(job))
    # the head of the queue waits only when its request does not fit what is free
    for t in range(horizon):
        waiting = [r for r in admitted if r.job.arrival <= t
                   and (r.first_slot is None or r.first_slot > t)]
        if not waiting:
            continue
        head = waiting[0].job
        free = cluster.capacity.copy()
        for job_id, (workers, ps) in by_slot.get(t, {}).items():
            j = result.records[job_id].job
            for h, c in workers.items():
                free[h] -= c * j.spec.worker_demand.as_array()
            for k, c in ps.items():
                free[k] -= c * j.spec.ps_demand.as_array()
        n = policy.request(head)
        fits_w = room(free[pools.worker], head.spec.worker_demand.as_array(), n).sum() >= n
        fits_p = room(free[pools.ps], head.spec.ps_demand.as_array(),
                      head.ps_needed(n)).sum() >= head.ps_needed(n)
        assert not (fits_w and fits_p), f"slot {t}: head {head.job_id} fits but waits"


# -- DRF --------------------------------------------------------------------------------------
def drf_paper_cluster() -> Cluster:
    """Ghodsi et al.'s example: 9 CPUs and 18 GB, no PS needed (b = 0)."""
    return Cluster(servers=(server("w0", Pool.WORKER, cpu=9, memory_gb=18),
                            server("p0", Pool.PS, storage_gb=10)))


@pytest.mark.parametrize("shares", ["combined", "per_pool"])
def test_drf_equalises_dominant_shares_on_the_papers_example(shares: str) -> None:
    """A (1 CPU, 4 GB) gets 3 workers, B (3 CPU, 1 GB) gets 2: both dominant shares 2/3."""
    ps = Resources(storage_gb=1)
    jobs = [spec("A", 0, 100, 100, ps=ps, cpu=1, memory_gb=4),
            spec("B", 0, 100, 100, ps=ps, cpu=3, memory_gb=1)]
    result = simulate(jobs, drf_paper_cluster(), make_policy("drf", shares=shares), 1)
    per_job: dict[str, int] = {}
    for _, job_id, _, role, c in result.allocations:
        if role == "worker":
            per_job[job_id] = per_job.get(job_id, 0) + c
    assert per_job == {"A": 3, "B": 2}


def test_drf_never_gives_more_workers_than_the_work_left() -> None:
    """A needs 2 worker-slots; B takes the rest of the 8 GPUs."""
    jobs = [spec("A", 0, 8, 1, gpu=1), spec("B", 0, 8, 10, gpu=1)]
    jobs[0] = replace(jobs[0], tau_s=0.25 * 3600.0)  # W = ceil(8 * 0.25) = 2
    result = simulate(jobs, one_box(gpu=8), make_policy("drf"), 3)
    slot0 = allocations_by_slot(result.allocations)[0]
    assert sum(slot0["A"][0].values()) == 2
    assert sum(slot0["B"][0].values()) == 6


def view_at_start(jobs: list[Job], cluster: Cluster, done: list[float]) -> View:
    active = {j.job_id: JobStatus(job=j, done=d, first_slot=None)
              for j, d in zip(jobs, done, strict=True)}
    return View(t=0, cluster=cluster, horizon=30, active=active, arrived=tuple(active))


def literal_drf(jobs: list[Job], done: list[float], cluster: Cluster) -> list[Alloc]:
    """Progressive filling written out: recompute every share, pick the argmin each step,
    place each container on the next server with room."""
    pools = Pools.of(cluster)
    tot = cluster.capacity.sum(axis=0)
    free_w, free_p = cluster.capacity[pools.worker].copy(), cluster.capacity[pools.ps].copy()
    cap = [min(j.max_workers, ceil_eps(j.work - d)) for j, d in zip(jobs, done, strict=True)]
    n, p, frozen = [0] * len(jobs), [0] * len(jobs), [False] * len(jobs)
    at_w: list[dict[int, int]] = [{} for _ in jobs]
    at_p: list[dict[int, int]] = [{} for _ in jobs]
    cw = cp = 0

    def share(i: int) -> float:
        # per-unit shares divided first, as the policy does, so ties are the same floats
        unit_w = [d / c if c > 0 else 0.0 for d, c in zip(jobs[i].spec.worker_demand.as_array(),
                                                          tot, strict=True)]
        unit_s = [d / c if c > 0 else 0.0 for d, c in zip(jobs[i].spec.ps_demand.as_array(),
                                                          tot, strict=True)]
        return share_key(n[i], p[i], unit_w, unit_s)

    while True:
        open_ = [i for i in range(len(jobs)) if not frozen[i] and n[i] < cap[i]]
        if not open_:
            return [Alloc.of({int(pools.worker[h]): c for h, c in at_w[i].items()},
                             {int(pools.ps[k]): c for k, c in at_p[i].items()})
                    for i in range(len(jobs))]
        i = min(open_, key=lambda k: (share(k), k))
        w, s = jobs[i].spec.worker_demand.as_array(), jobs[i].spec.ps_demand.as_array()
        h = next_with_room(free_w, w, cw)
        k = next_with_room(free_p, s, cp) if jobs[i].ps_needed(n[i] + 1) > p[i] else -1
        if h is None or k is None:
            frozen[i] = True
            continue
        free_w[h] -= w
        n[i], cw = n[i] + 1, (h + 1) % len(free_w)
        at_w[i][h] = at_w[i].get(h, 0) + 1
        if k >= 0:
            free_p[k] -= s
            p[i], cp = p[i] + 1, (k + 1) % len(free_p)
            at_p[i][k] = at_p[i].get(k, 0) + 1


@st.composite
def crowded(draw: st.DrawFn) -> tuple[Cluster, list[JobSpec]]:
    """A small cluster and 2-8 jobs of up to 12 workers: contention is the rule."""
    cluster = draw(clusters(max_servers=4))
    n = draw(st.integers(2, 8))
    return cluster, [draw(job_specs(job_id=f"j{i}", max_workers=12)) for i in range(n)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance=crowded())
def test_drf_fills_like_the_literal_progressive_filling(
        instance: tuple[Cluster, list[JobSpec]]) -> None:
    cluster, specs = instance
    jobs = [resolve_job(s, cluster.slot_seconds, 30) for s in specs]
    jobs = [j for j in jobs if j.ps_needed(1) <= 1]
    pairs = [(j, float(i % 3) * 0.5) for i, j in enumerate(jobs)]
    pairs = [(j, d) for j, d in pairs if j.work > d]  # only unfinished jobs are active
    jobs, done = [j for j, _ in pairs], [d for _, d in pairs]
    policy = DrfPolicy()
    policy.start(RunContext(cluster=cluster, horizon=30))
    plan = policy.plan(view_at_start(jobs, cluster, done))
    assert [plan.get(j.job_id, Alloc()) for j in jobs] == literal_drf(jobs, done, cluster)


@SETTINGS
@given(instance=instances())
def test_drf_leaves_nothing_that_fits_after_filling(instance: Instance) -> None:
    """Work conservation: no job below its cap can take one more worker (and its PS)."""
    cluster, specs, _ = instance
    jobs = [j for j in (resolve_job(s, cluster.slot_seconds, 30) for s in specs)
            if j.ps_needed(1) <= 1]
    policy = DrfPolicy()
    policy.start(RunContext(cluster=cluster, horizon=30))
    plan = policy.plan(view_at_start(jobs, cluster, [0.0] * len(jobs)))
    pools = Pools.of(cluster)
    free = cluster.capacity.copy()
    for j in jobs:
        a = plan.get(j.job_id)
        if a is None:
            continue
        assert a.n_ps == j.ps_needed(a.n_workers)
        for h, c in a.workers:
            free[h] -= c * j.spec.worker_demand.as_array()
        for k, c in a.ps:
            free[k] -= c * j.spec.ps_demand.as_array()
    for j in jobs:
        n = plan[j.job_id].n_workers if j.job_id in plan else 0
        if n >= min(j.max_workers, j.work):
            continue
        worker_fits = room(free[pools.worker], j.spec.worker_demand.as_array(), 1).sum() > 0
        ps_fits = (j.ps_needed(n + 1) == j.ps_needed(n)
                   or room(free[pools.ps], j.spec.ps_demand.as_array(), 1).sum() > 0)
        assert not (worker_fits and ps_fits), f"{j.job_id} could take one more worker"


@settings(max_examples=40, deadline=None)
@given(caps=st.lists(st.integers(1, 12), min_size=1, max_size=8),
       gpus=st.lists(st.integers(1, 10), min_size=1, max_size=4))
def test_drf_splits_one_resource_max_min_fairly(caps: list[int], gpus: list[int]) -> None:
    """Identical one-GPU workers: counts differ by at most one unless a job is at its cap."""
    servers = [server(f"w{i}", Pool.WORKER, gpu=g) for i, g in enumerate(gpus)]
    cluster = Cluster(servers=(*servers, server("p0", Pool.PS, cpu=1)))
    jobs = [resolve_job(spec(f"j{i}", 0, c, 5, gpu=1), 3600.0, 30) for i, c in enumerate(caps)]
    policy = DrfPolicy()
    policy.start(RunContext(cluster=cluster, horizon=30))
    plan = policy.plan(view_at_start(jobs, cluster, [0.0] * len(jobs)))
    n = [plan[j.job_id].n_workers if j.job_id in plan else 0 for j in jobs]
    assert sum(n) == min(sum(caps), sum(gpus))
    top = max(n)
    for got, cap in zip(n, caps, strict=True):
        assert got == cap or got >= top - 1


@SETTINGS
@given(instance=instances())
def test_drf_holds_its_allocation_between_events(instance: Instance) -> None:
    cluster, specs, horizon = instance
    result = simulate(specs, cluster, make_policy("drf"), horizon)
    by_slot = allocations_by_slot(result.allocations)
    recs = result.records
    for t in range(1, horizon):
        arrived = any(r.admitted and r.job.arrival == t for r in recs.values())
        completed = any(r.completion == t - 1 for r in recs.values())
        if not (arrived or completed):
            assert by_slot.get(t, {}) == by_slot.get(t - 1, {}), f"slot {t} re-planned"


def test_drf_handles_hundreds_of_jobs_per_event() -> None:
    """400 jobs at once on 100 servers: every GPU that can be used is used, caps respected."""
    rng = np.random.default_rng(0)
    servers = [server(f"w{i}", Pool.WORKER, gpu=4 * (1 + i % 2), cpu=32 * (1 + i % 2),
                      memory_gb=244 * (1 + i % 2)) for i in range(50)]
    servers += [server(f"p{i}", Pool.PS, cpu=16 + 20 * (i % 2), memory_gb=30 + 30 * (i % 2))
                for i in range(50)]
    cluster = Cluster(servers=tuple(servers))
    jobs = [resolve_job(spec(f"j{i}", 0, int(rng.integers(5, 100)), 5, b=1.0,
                             big_b=float(rng.uniform(5, 20)), ps=Resources(cpu=2, memory_gb=4),
                             gpu=float(rng.integers(1, 5)), cpu=2, memory_gb=8),
                        3600.0, 300) for i in range(400)]
    policy = DrfPolicy()
    policy.start(RunContext(cluster=cluster, horizon=300))
    plan = policy.plan(view_at_start(jobs, cluster, [0.0] * len(jobs)))
    used_gpu = sum(a.n_workers * jobs[int(j[1:])].spec.worker_demand.gpu for j, a in plan.items())
    assert used_gpu == 300  # every GPU: one-GPU jobs are far from their caps
    assert all(a.n_workers <= jobs[int(j[1:])].max_workers for j, a in plan.items())
