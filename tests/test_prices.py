"""OASiS prices (22)-(26): zero load admits, a full resource never pays, prices only rise,
no overflow at any utility scale, and no unit changes any decision."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from oasis_cases import make_cluster, make_job

from psched.core.model import Cluster, JobSpec, Resources, Server, resolve_job
from psched.core.policy import RunContext, View
from psched.core.records import cannot_fit
from psched.core.simulator import simulate
from psched.core.utility import Utility
from psched.oasis.fast import solve_fast
from psched.oasis.ledger import Ledger
from psched.oasis.prices import (
    fixed_params,
    log_utility,
    mean_capacity,
    normalise,
    params_from_jobs,
)
from psched.policies import make_policy
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

T = 60
SEEDS = [0, 3]


def paper_instance(seed: int, n: int = 40) -> tuple[list[JobSpec], Cluster]:
    specs, _ = oasis_paper_jobs(n, seed=seed, slots=T)
    return specs, oasis_paper_cluster(seed=seed)


def resolved(specs: list[JobSpec], cluster: Cluster) -> list:
    return [resolve_job(s, cluster.slot_seconds, T) for s in specs]


@pytest.mark.parametrize("seed", SEEDS)
def test_every_job_with_positive_utility_is_admitted_at_zero_load(seed: int) -> None:
    specs, cluster = paper_instance(seed)
    jobs = resolved(specs, cluster)
    params = params_from_jobs(jobs, cluster, T)
    for job in jobs:
        if cannot_fit(job, cluster) or job.window == 0:
            continue
        best = solve_fast(Ledger(cluster, T, params).inputs(job), floor=0.0)
        assert best.counts is not None and best.payoff > 0, job.job_id


@pytest.mark.parametrize("seed", SEEDS)
def test_one_unit_of_a_full_resource_costs_at_least_any_utility(seed: int) -> None:
    """U^r w~^r >= f(fastest) >= f(d) for every reference job demanding r (both pools)."""
    specs, cluster = paper_instance(seed)
    jobs = resolved(specs, cluster)
    params = params_from_jobs(jobs, cluster, T)
    for pool, demand in ((0, "worker_demand"), (1, "ps_demand")):
        cbar = mean_capacity(cluster, (cluster.servers[0].pool, cluster.servers[-1].pool)[pool])
        for job in jobs:
            w = normalise(getattr(job.spec, demand).as_array(), cbar)
            for r in np.nonzero(w > 0)[0]:
                assert (params.log_u[pool][r] + math.log(w[r])
                        >= float(log_utility(job, job.fastest)) - 1e-12)


def test_a_schedule_needing_a_full_resource_is_never_chosen() -> None:
    """Server 0 has its CPU full; even with capacity ignored (relaxed) it is never used."""
    cluster = make_cluster([(4, 8, 8, 10), (4, 8, 8, 10)], [(8, 8, 10)])
    jobs = [make_job(work=6, window=4, max_workers=3, job_id="a"),
            make_job(work=2, window=4, max_workers=2, job_id="b",
                     utility=Utility(kind="constant", value=3.0))]
    params = params_from_jobs(jobs, cluster, 4)
    for job in jobs:
        ledger = Ledger(cluster, 4, params)
        ledger.usage[0][:, 0, 1] = 8.0  # CPU of worker server 0 full in every slot
        best = solve_fast(ledger.inputs(job, relaxed=True), floor=0.0)
        if best.counts is not None:
            from psched.oasis.schedule import schedule_allocs
            sched = schedule_allocs(ledger.inputs(job, relaxed=True), best.counts)
            assert all(h != 0 for a in sched.values() for h, _ in a.workers)


@pytest.mark.parametrize("seed", SEEDS)
def test_prices_never_decrease(seed: int) -> None:
    specs, cluster = paper_instance(seed)
    jobs = resolved(specs, cluster)
    pol = make_policy("oasis")
    pol.start(RunContext(cluster=cluster, horizon=T, known_jobs=jobs))
    ledger = pol.ledger
    before = [ledger.scaled_prices(p, 0, T) for p in (0, 1)]
    admitted = 0
    for job in jobs:
        if cannot_fit(job, cluster):
            continue
        d = pol.on_arrival(job, View(t=job.arrival, cluster=cluster, horizon=T, active={}))
        admitted += d.admitted
        after = [ledger.scaled_prices(p, 0, T) for p in (0, 1)]
        for b, a in zip(before, after, strict=True):
            assert np.all(a >= b)
        before = after
    assert admitted > 0


def scaled_utilities(specs: list[JobSpec], factor: float) -> list[JobSpec]:
    return [replace(s, utility=replace(s.utility, value=s.utility.value * factor))
            for s in specs]


def decisions(result) -> list[tuple[str, bool, int | None]]:
    return [(j, r.admitted, r.completion) for j, r in result.records.items()]


@pytest.mark.parametrize("factor", [1e-300, 1e-30, 1e30, 1e300])
def test_no_overflow_and_same_decisions_at_any_utility_scale(factor: float) -> None:
    specs, cluster = paper_instance(1, n=25)
    base = simulate(specs, cluster, make_policy("oasis"), T)
    big = simulate(scaled_utilities(specs, factor), cluster, make_policy("oasis"), T)
    assert decisions(big) == decisions(base)
    assert big.allocations == base.allocations
    for rec in big.records.values():
        assert rec.payoff is None or not math.isnan(rec.payoff)
    rep = big.report
    assert not math.isnan(rep["dual_bound"]) and rep["dual_bound"] > 0
    assert rep["alpha"] == pytest.approx(base.report["alpha"], rel=1e-6)


def in_megabytes(specs: list[JobSpec], cluster: Cluster) -> tuple[list[JobSpec], Cluster]:
    def mb(r: Resources) -> Resources:
        return replace(r, memory_gb=r.memory_gb * 1000.0, storage_gb=r.storage_gb * 1024.0)

    servers = tuple(Server(server_id=s.server_id, pool=s.pool, capacity=mb(s.capacity))
                    for s in cluster.servers)
    return ([replace(s, worker_demand=mb(s.worker_demand), ps_demand=mb(s.ps_demand))
             for s in specs], replace(cluster, servers=servers))


@pytest.mark.parametrize("seed", SEEDS)
def test_other_units_give_the_same_decisions(seed: int) -> None:
    specs, cluster = paper_instance(seed, n=30)
    base = simulate(specs, cluster, make_policy("oasis"), T)
    specs_mb, cluster_mb = in_megabytes(specs, cluster)
    other = simulate(specs_mb, cluster_mb, make_policy("oasis"), T)
    assert decisions(other) == decisions(base)
    assert other.allocations == base.allocations
    assert other.report["dual_bound"] == pytest.approx(base.report["dual_bound"], rel=1e-9)


def test_estimate_factor_scales_u_with_l_fixed() -> None:
    specs, cluster = paper_instance(0, n=20)
    params = params_from_jobs(resolved(specs, cluster), cluster, T)
    for factor in (0.2, 10.0):
        est = params.scaled(factor)
        assert est.log_l == params.log_l
        for u, u0, lo in zip(est.log_u, params.log_u, params.log_l, strict=True):
            assert np.allclose(u, np.maximum(u0 + math.log(factor), lo))
    assert params.alpha >= 1.0
    assert all(np.all(u >= lo) for u, lo in zip(params.log_u, params.log_l, strict=True))


def test_fixed_prices_are_taken_as_given() -> None:
    params = fixed_params({"gpu": 4.0, "cpu": 2.0, "memory_gb": 1.0, "storage_gb": 1.0,
                           "bandwidth_gbps": 1.0}, 0.5, 3.0, 0.25)
    assert math.exp(params.log_u[0][0]) == pytest.approx(4.0)
    assert math.exp(params.log_l[1]) == pytest.approx(0.25)
    assert params.alpha == pytest.approx(max(math.log(4.0 / 0.5), math.log(3.0 / 0.25)))
    with pytest.raises(ValueError):
        fixed_params(1.0, 0.0, 1.0, 1.0)
