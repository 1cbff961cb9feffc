"""oasis-rp's density floor (``density_floor``).

Each option runs through the property suite (capacity and PS rules, promises re-derived from
the allocation rows and from the output files), the certificate against the exact optimum on
tiny instances, same seed same run; the clearing density is checked against a direct
computation, and the floor's rejections against the rule itself.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from strategies import Instance, instances
from test_oasis_certificate import (
    assert_rp_certificate_bounds_the_optimum,
    tiny_instance,
)
from test_oasis_rp_levers import run_keeping_every_promise

from psched.core.model import Cluster, Job, JobSpec, Pool, Resources, Server, resolve_job
from psched.core.promises import broken_promises_in
from psched.core.simulator import simulate
from psched.core.utility import Utility
from psched.policies import make_policy
from psched.policies.oasis_rp import OasisRpPolicy
from psched.policies.oasis_rp.admission import REJECT_DENSITY, clearing_density, job_size
from psched.policies.oasis_rp.observer import Observer
from psched.results.output import write_run
from psched.traces.synth import fig5_instance

OPTIONS = [
    {"density_floor": 0.5},
    {"density_floor": 2.0, "price_source": "hindsight"},
    {"density_floor": 0.0},
]
SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _ids(v: dict[str, object]) -> str:
    return ",".join(f"{k}={v[k]}" for k in sorted(v))


@pytest.mark.parametrize("options", OPTIONS, ids=_ids)
@SETTINGS
@given(instance=instances())
def test_every_promise_is_kept_and_every_rule_holds_with_each_admission_lever(
        options: dict[str, object], instance: Instance) -> None:
    run_keeping_every_promise(options, instance)


@pytest.mark.parametrize("options", [{"density_floor": 2.0}], ids=_ids)
@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(instance=instances(max_jobs=6, max_horizon=12))
def test_promises_checked_from_the_output_files_with_each_admission_lever(
        tmp_path_factory: pytest.TempPathFactory, options: dict[str, object],
        instance: Instance) -> None:
    cluster, specs, horizon = instance
    res = simulate(specs, cluster, make_policy("oasis-rp", **options), horizon)
    out: Path = tmp_path_factory.mktemp("run") / "out"
    write_run(out, {}, cluster, {"oasis-rp": res}, plots=False, report=False)
    assert broken_promises_in(out / "oasis-rp") == []


@pytest.mark.parametrize("options", OPTIONS, ids=_ids)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_instance())
def test_certificate_bounds_the_exact_optimum_with_each_admission_lever(
        options: dict[str, object], inst: tuple[list[Job], Cluster]) -> None:
    jobs, cluster = inst
    assert_rp_certificate_bounds_the_optimum(jobs, cluster, options)


@pytest.mark.parametrize("options", OPTIONS[:2], ids=_ids)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance=instances())
def test_same_seed_same_run_with_each_admission_lever(options: dict[str, object],
                                                      instance: Instance) -> None:
    cluster, specs, horizon = instance
    runs = [simulate(specs, cluster, make_policy("oasis-rp", **options), horizon, seed=2)
            for _ in range(2)]
    assert runs[0].allocations == runs[1].allocations
    assert [(r.admitted, r.promised, r.decided, r.reason) for r in runs[0].records.values()] \
        == [(r.admitted, r.promised, r.decided, r.reason) for r in runs[1].records.values()]


def _burst_the_horizon_absorbs() -> Instance:
    """Three jobs at slot 0 that fit 4 slots but not the 1-2 slots of their median window."""
    cap = Resources(gpu=1.0, cpu=2.0, memory_gb=4.0, storage_gb=10.0, bandwidth_gbps=5.0)
    cluster = Cluster(servers=(Server(server_id="w00", pool=Pool.WORKER, capacity=cap),
                               Server(server_id="p01", pool=Pool.PS,
                                      capacity=Resources(cpu=2.0, memory_gb=4.0,
                                                         storage_gb=10.0,
                                                         bandwidth_gbps=5.0))),
                      slot_seconds=3600.0)
    w = Resources(cpu=1.0, memory_gb=1.0)
    p = Resources(cpu=1.0, memory_gb=1.0, bandwidth_gbps=1.0)
    specs = [JobSpec(job_id=j, arrival=0, epochs=1, max_workers=n, minibatches=1, tau_s=tau,
                     grad_mb=1.0, worker_demand=w, ps_demand=p, utility=u,
                     tau_includes_comm=True)
             for j, n, tau, u in (("j0", 2, 3600.0, Utility(kind="deadline", value=3.0,
                                                              target=1.0)),
                                  ("j1", 1, 3600.0, Utility(kind="sigmoid", value=1.0,
                                                              target=1.0)),
                                  ("j2", 2, 7200.0, Utility(kind="deadline", value=5.0,
                                                              target=2.0)))]
    return cluster, specs, 4


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance=instances())
@example(instance=_burst_the_horizon_absorbs())
def test_no_floor_where_the_trace_fits(instance: Instance) -> None:
    """The hindsight floor is the clearing density of every job against the horizon: 0, so
    no floor, when the whole trace fits. (The online floor, the clearing density of the
    recent arrivals against the median window, can be above 0 in a burst the horizon
    absorbs: it sees only what arrived.)"""
    cluster, specs, horizon = instance
    off = simulate(specs, cluster, make_policy("oasis-rp", density_floor=0.0), horizon)
    jobs = [r.job for r in off.records.values()]
    if clearing_density(jobs, cluster, horizon) == 0.0:  # the whole trace fits: no floor
        runs = [simulate(specs, cluster, make_policy("oasis-rp", density_floor=floor,
                                                     price_source="hindsight"), horizon)
                for floor in (0.0, 0.5)]
        assert runs[1].allocations == runs[0].allocations
        assert [r.promised for r in runs[1].records.values()] == [
            r.promised for r in runs[0].records.values()]
    for rec in off.records.values():  # no floor: no rejection by it
        assert rec.reason != REJECT_DENSITY


def _fig5_jobs(seed: int) -> tuple[list[Job], Cluster]:
    specs, cluster = fig5_instance(6, seed=seed, priority=(1.0, 100.0))
    return [resolve_job(s, cluster.slot_seconds, 10) for s in specs], cluster


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_clearing_density_is_where_the_densest_jobs_first_fill_the_horizon(seed: int) -> None:
    jobs, cluster = _fig5_jobs(seed)
    sizes = [job_size(j, cluster) for j in jobs]
    dens = [j.utility_at(j.fastest) / s for j, s in zip(jobs, sizes, strict=True)]
    for horizon in (1, 3, 10, 10_000):
        rho = clearing_density(jobs, cluster, horizon)
        # brute force: the smallest density whose denser-or-equal jobs' sizes reach horizon
        full = [d for d in dens if sum(s for s, e in zip(sizes, dens, strict=True) if e >= d)
                >= horizon]
        assert rho == (max(full) if full else 0.0)


def test_job_size_is_work_times_the_dominant_share() -> None:
    jobs, cluster = _fig5_jobs(5)
    total_gpu = sum(s.capacity.gpu for s in cluster.servers)
    for job in jobs:
        # fig5 workers ask GPU 1-2 of 4 and CPU 1-4 of 16 per server: GPU dominates
        assert job_size(job, cluster) >= job.work * job.spec.worker_demand.gpu / total_gpu * (
            1 - 1e-12)


@pytest.mark.parametrize(("n", "seed"), list(itertools.product((3, 12), (11, 12, 13))))
def test_the_floor_rejects_exactly_the_arrivals_below_it(n: int, seed: int) -> None:
    specs, cluster = fig5_instance(n, seed=seed, priority=(1.0, 100.0))
    jobs = [resolve_job(s, cluster.slot_seconds, 10) for s in specs]
    """With hindsight prices the floor is the whole trace's clearing density: a job that
    could earn less is held below it at every boundary of its window (the queue's probe
    says so), never reserved nor admitted; an admitted job reached it."""
    theta = 1.0
    rho = theta * clearing_density(jobs, cluster, 10)
    pol = OasisRpPolicy(price_source="hindsight", density_floor=theta)
    seen: dict[str, set[str]] = {}
    class Seen(Observer):
        def queued(self, t: int, job_id: str, outcome: str) -> None:
            seen.setdefault(job_id, set()).add(outcome)

    pol.observer = Seen()
    res = simulate(specs, cluster, pol, 10)
    for job_id, rec in res.records.items():
        floor = rho * job_size(rec.job, cluster)
        if rec.admitted:  # checked before any re-pack: its best schedule reached the floor
            assert rec.job.utility_at(rec.job.fastest) >= floor
        elif rec.job.utility_at(rec.job.fastest) < floor:  # nothing it could earn reaches it
            # held below the floor (or, searched again, with no schedule at all, or not
            # searched: the queue's limits), never reserved; decided on arrival in its last
            # slot: rejected for the floor
            assert seen.get(job_id, set()) <= {"floor", "none", "limit", "busy", "tried"}
            assert job_id in seen or rec.reason == REJECT_DENSITY
    assert res.report["levers"]["density_floor"] == theta


@pytest.mark.parametrize("bad", [{"density_floor": -1.0}, {"density_floor": float("inf")}])
def test_bad_admission_lever_options_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        make_policy("oasis-rp", **bad)
