"""Invariants every registered policy keeps, re-derived from the executed schedule.

Parametrised over :func:`available_policies` (a policy registered later is covered without
editing this file) and several seeds, with Hypothesis over small random clusters and traces.
``simulate`` already runs the checker; the checks below recompute everything independently
from ``RunResult.allocations`` and the records.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from strategies import Instance, allocations_by_slot, instances

from psched.core.model import RESOURCES, Cluster, JobSpec, Pool, Resources, Server
from psched.core.promises import broken_promises
from psched.core.records import REJECT_PAST_HORIZON, RunResult
from psched.core.simulator import simulate
from psched.core.utility import Utility
from psched.policies import available_policies, make_policy
from psched.results.metrics import summarize

POLICIES = available_policies()
SEEDS = [0, 7]
SETTINGS = settings(max_examples=20, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def check_schedule(result: RunResult, cluster: Cluster, horizon: int) -> None:
    """Capacities, per-job rules and the work/completion bookkeeping, from the rows alone."""
    cap = cluster.capacity
    records = result.records
    by_slot = allocations_by_slot(result.allocations)
    cumulative: dict[str, int] = defaultdict(int)
    first: dict[str, int] = {}
    pool_use = np.zeros((2, len(RESOURCES)))
    for t in sorted(by_slot):
        assert 0 <= t < horizon
        use = np.zeros_like(cap)
        for job_id, (workers, ps) in by_slot[t].items():
            rec = records[job_id]
            job = rec.job
            assert rec.admitted, f"{job_id} runs but was not admitted"
            assert t >= job.arrival, f"{job_id} runs in {t} before arriving in {job.arrival}"
            assert cumulative[job_id] < job.work, f"{job_id} runs in {t} after completing"
            assert all(cluster.pool_of(h) == Pool.WORKER for h in workers)
            assert all(cluster.pool_of(k) == Pool.PS for k in ps)
            assert all(c > 0 for c in (*workers.values(), *ps.values()))
            n_w, n_ps = sum(workers.values()), sum(ps.values())
            assert n_w <= job.max_workers
            assert job.ps_needed(n_w) <= n_ps <= n_w
            w, s = job.spec.worker_demand.as_array(), job.spec.ps_demand.as_array()
            for h, c in workers.items():
                use[h] += c * w
            for k, c in ps.items():
                use[k] += c * s
            cumulative[job_id] += n_w
            if n_w:
                first.setdefault(job_id, t)
            if cumulative[job_id] >= job.work:
                assert rec.completion == t, f"{job_id} reached its work in {t}"
        assert np.all(use <= cap + 1e-9 * np.maximum(1.0, cap)), f"over capacity in slot {t}"
        for row, pool in enumerate((Pool.WORKER, Pool.PS)):
            pool_use[row] += use[cluster.indices(pool)].sum(axis=0)
    np.testing.assert_allclose(result.usage, pool_use, rtol=1e-9, atol=1e-9)
    for job_id, rec in records.items():
        job = rec.job
        assert rec.done == pytest.approx(cumulative[job_id])
        assert rec.first_slot == first.get(job_id)
        if rec.completion is None:
            assert cumulative[job_id] < job.work
        else:
            assert job.arrival <= rec.completion < horizon
            assert cumulative[job_id] >= job.work
        if not rec.admitted:
            assert rec.reason
            assert cumulative[job_id] == 0
        if job.arrival >= horizon:
            assert not rec.admitted and rec.reason == REJECT_PAST_HORIZON


def recomputed_utility(result: RunResult) -> float:
    total = 0.0
    for rec in result.records.values():
        if rec.completion is not None:
            total += float(rec.job.spec.utility(rec.completion - rec.job.arrival + 1))
    return total


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("policy", POLICIES)
@SETTINGS
@given(instance=instances())
def test_every_policy_keeps_capacity_and_job_rules(policy: str, seed: int,
                                                   instance: Instance) -> None:
    cluster, specs, horizon = instance
    result = simulate(specs, cluster, make_policy(policy), horizon, seed=seed)
    assert set(result.records) == {s.job_id for s in specs}
    check_schedule(result, cluster, horizon)
    assert broken_promises(result) == []  # independent: completions from the rows alone
    utility = recomputed_utility(result)
    assert sum(r.utility for r in result.records.values()) == pytest.approx(utility)
    assert summarize(result)["total_utility"] == pytest.approx(utility)


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance=instances())
def test_same_seed_gives_the_same_run(policy: str, instance: Instance) -> None:
    cluster, specs, horizon = instance
    runs = [simulate(specs, cluster, make_policy(policy), horizon, seed=3) for _ in range(2)]
    assert runs[0].allocations == runs[1].allocations
    for a, b in zip(runs[0].records.values(), runs[1].records.values(), strict=True):
        assert (a.job.job_id, a.admitted, a.reason, a.completion, a.done) == (
            b.job.job_id, b.admitted, b.reason, b.completion, b.done)


@pytest.mark.parametrize("policy", POLICIES)
def test_an_idle_cluster_runs_a_lone_job_to_completion(policy: str) -> None:
    """A single small job on an empty, roomy cluster is admitted and finishes."""
    roomy = Resources(gpu=8, cpu=64, memory_gb=256, storage_gb=100, bandwidth_gbps=50)
    cluster = Cluster(servers=(
        Server(server_id="w0", pool=Pool.WORKER, capacity=roomy),
        Server(server_id="p0", pool=Pool.PS, capacity=replace(roomy, gpu=0.0)),
    ))
    spec = JobSpec(job_id="lone", arrival=2, epochs=1, max_workers=4, minibatches=1,
                   tau_s=2 * 3600.0, grad_mb=10.0, tau_includes_comm=True,
                   worker_demand=Resources(gpu=1, cpu=2, memory_gb=4, bandwidth_gbps=1),
                   ps_demand=Resources(cpu=1, memory_gb=2, bandwidth_gbps=5),
                   utility=Utility(kind="sigmoid", value=10.0, decay=0.5, target=4.0))
    result = simulate([spec], cluster, make_policy(policy), 20, seed=0)
    rec = result.records["lone"]
    assert rec.job.work == 8
    assert rec.admitted and rec.completion is not None
    check_schedule(result, cluster, 20)
