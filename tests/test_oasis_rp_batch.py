"""oasis-rp's ``batch`` lever: the arrivals of one slot decided together, densest first.

Pinned here: the worked instance it was built for (a slot brings more deadline jobs than fit;
the most valuable win, not the first in the trace), that a slot with one arrival is decided
exactly as without the lever (whole runs equal), the density order itself (packing-aware
shares, stable ties), and the usual property suite with the lever on -- every rule, every
promise re-derived from the allocation rows, the certificate against the exact optimum, same
seed same run.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from strategies import Instance, instances
from test_oasis_certificate import T, offline_optimum, tiny_instance
from test_oasis_rp import _server, _spec
from test_policy_properties import check_schedule

from psched.model import Cluster, Job, Pool, Resources, Server, resolve_job
from psched.policies import make_policy
from psched.policies.rp_batch import containers_that_fit, density, density_order
from psched.promises import broken_promises
from psched.simulator import HELD, simulate
from psched.utility import Utility

OPTIONS = [
    {"batch": True},
    {"batch": True, "defer": True},
    {"batch": True, "own_price": "off", "repack_late": True},
]
SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _ids(v: dict[str, object]) -> str:
    return ",".join(f"{k}={v[k]}" for k in sorted(v))


def _two_at_a_time() -> Cluster:
    """One worker server with 2 GPUs (two 1-GPU workers per slot) and a PS server."""
    return Cluster(servers=(_server("w0", Pool.WORKER, 2), _server("p0", Pool.PS, 0)))


def _slot_rush(values: list[float]) -> list:
    """One 1-worker, 1-slot job per value, all arriving in slot 0, worth only in slot 0."""
    return [_spec(f"j{i}", 0, 1, 1, Utility(kind="deadline", value=v, target=1.0))
            for i, v in enumerate(values)]


@pytest.mark.parametrize("batch", [False, True])
def test_the_most_valuable_arrivals_of_a_rushed_slot_win_with_the_lever(batch: bool) -> None:
    """Four jobs worth 10, 20, 90, 80 arrive in slot 0 and two fit: in trace order the first
    two are admitted (30); decided together, the 90 and the 80 (170), each kept."""
    specs = _slot_rush([10.0, 20.0, 90.0, 80.0])
    res = simulate(specs, _two_at_a_time(), make_policy("oasis-rp", batch=batch), 4)
    admitted = sorted(j for j, r in res.records.items() if r.admitted)
    assert admitted == (["j2", "j3"] if batch else ["j0", "j1"])
    assert sum(r.utility for r in res.records.values()) == (170.0 if batch else 30.0)
    assert broken_promises(res) == []
    for r in res.records.values():
        assert r.decided == 0 and r.reason != HELD
        assert r.admitted or r.reason == "payoff<=0"


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(instance=instances())
def test_one_arrival_per_slot_is_decided_as_without_the_lever(instance: Instance) -> None:
    cluster, specs, horizon = instance
    seen: set[int] = set()
    alone = []
    for s in specs:  # at most one arrival per slot
        if s.arrival not in seen:
            seen.add(s.arrival)
            alone.append(s)
    runs = [simulate(alone, cluster, make_policy("oasis-rp", batch=b), horizon, seed=1)
            for b in (False, True)]
    assert runs[0].allocations == runs[1].allocations
    assert [(r.admitted, r.promised, r.completion) for r in runs[0].records.values()] == [
        (r.admitted, r.promised, r.completion) for r in runs[1].records.values()]


def test_containers_that_fit_count_whole_containers_per_server() -> None:
    """Two 20 Gbps PS fit a 50 Gbps server, not 2.5; a resource not demanded does not bind."""
    ps = Server(server_id="p", pool=Pool.PS,
                capacity=Resources(cpu=36, memory_gb=60, bandwidth_gbps=50))
    cluster = Cluster(servers=(_server("w", Pool.WORKER, 8), ps, dataclasses.replace(ps,
                                                                                   server_id="q")))
    demand = Resources(cpu=4, memory_gb=8, bandwidth_gbps=20).as_array()
    assert containers_that_fit(cluster, Pool.PS, demand) == 4
    gpu_only = np.zeros_like(demand)
    gpu_only[0] = 1.0
    assert containers_that_fit(cluster, Pool.WORKER, gpu_only) == 8


def test_density_is_utility_per_dominant_share_over_the_work_and_ties_keep_order() -> None:
    cluster = _two_at_a_time()
    specs = [_spec("a", 0, 1, 2, Utility(kind="constant", value=10.0)),   # 2 worker-slots
             _spec("b", 0, 1, 1, Utility(kind="constant", value=10.0)),   # 1: twice as dense
             _spec("c", 0, 1, 2, Utility(kind="constant", value=10.0))]   # ties with a
    jobs = [resolve_job(s, 3600.0, 10) for s in specs]
    # one worker is 1/2 of the worker pool (2 GPUs); its PS 1/6 of the PS pool (25 / 4 Gbps)
    assert density(jobs[0], cluster) == pytest.approx(10.0 / (2 * 0.5))
    assert [j.job_id for j in density_order(jobs, cluster)] == ["b", "a", "c"]


@pytest.mark.parametrize("options", OPTIONS, ids=_ids)
@SETTINGS
@given(instance=instances())
def test_every_promise_is_kept_and_every_rule_holds_with_the_batch(
        options: dict[str, object], instance: Instance) -> None:
    cluster, specs, horizon = instance
    result = simulate(specs, cluster, make_policy("oasis-rp", **options), horizon, seed=3)
    check_schedule(result, cluster, horizon)
    assert broken_promises(result) == []
    for rec in result.records.values():
        assert rec.reason != HELD
        assert (rec.promised is not None) == rec.admitted
        if rec.admitted:
            assert rec.decided is not None
            assert rec.job.arrival <= rec.decided <= rec.promised <= rec.job.last_slot
            assert rec.completion is not None and rec.completion <= rec.promised
            if not options.get("defer"):  # decided in its arrival slot
                assert rec.decided == rec.job.arrival


@pytest.mark.parametrize("options", OPTIONS[:2], ids=_ids)
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(inst=tiny_instance())
def test_certificate_bounds_the_exact_optimum_with_the_batch(
        options: dict[str, object], inst: tuple[list[Job], Cluster]) -> None:
    jobs, cluster = inst
    res = simulate([j.spec for j in jobs], cluster, make_policy("oasis-rp", **options), T,
                   max_window=T)
    opt = offline_optimum(jobs, cluster)
    got = sum(r.utility for r in res.records.values())
    assert got <= opt + 1e-9 * max(1.0, opt)
    assert res.report["dual_bound"] >= opt - 1e-9 * max(1.0, opt)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance=instances())
def test_same_seed_same_run_with_the_batch(instance: Instance) -> None:
    cluster, specs, horizon = instance
    runs = [simulate(specs, cluster, make_policy("oasis-rp", batch=True), horizon, seed=2)
            for _ in range(2)]
    assert runs[0].allocations == runs[1].allocations
    assert [(r.admitted, r.promised, r.decided) for r in runs[0].records.values()] == [
        (r.admitted, r.promised, r.decided) for r in runs[1].records.values()]
