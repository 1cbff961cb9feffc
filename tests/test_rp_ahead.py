"""oasis-rp's work ahead: idle capacity of a slot handed to admitted jobs, taken from the
end of their plans (:mod:`psched.policies.oasis_rp.ahead`).

Property suite (capacity and PS rules, every promise re-derived from the allocation rows),
the certificate against the exact optimum on tiny instances, same seed same run, and the
worked instance of BENCHMARKS section 11 in miniature: a long job planned into empty later
slots works ahead into idle capacity now, and the short deadline job that arrives later
finds the room that was booked.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from strategies import Instance, instances
from test_oasis_certificate import assert_rp_certificate_bounds_the_optimum, tiny_instance
from test_oasis_rp_levers import run_keeping_every_promise

from psched.core.model import Alloc, Cluster, Job, JobSpec, Pool, Resources, Server, resolve_job
from psched.core.promises import broken_promises
from psched.core.simulator import simulate
from psched.core.utility import Utility
from psched.policies import make_policy
from psched.policies.oasis_rp.ahead import place, trim_tail

OPTIONS = [{}, {"price_source": "hindsight"}, {"promise_rtol": 0.0}]
SETTINGS = settings(max_examples=10, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _ids(v: dict[str, object]) -> str:
    return ",".join(f"{k}={v[k]}" for k in sorted(v)) or "default"


@pytest.mark.parametrize("options", OPTIONS, ids=_ids)
@SETTINGS
@given(instance=instances())
def test_every_promise_is_kept_and_every_rule_holds_when_working_ahead(
        options: dict[str, object], instance: Instance) -> None:
    run_keeping_every_promise(options, instance)


@pytest.mark.parametrize("options", OPTIONS[:2], ids=_ids)
@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(inst=tiny_instance())
def test_certificate_bounds_the_exact_optimum_when_working_ahead(
        options: dict[str, object], inst: tuple[list[Job], Cluster]) -> None:
    jobs, cluster = inst
    assert_rp_certificate_bounds_the_optimum(jobs, cluster, options)


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(instance=instances())
def test_same_seed_same_run_when_working_ahead(instance: Instance) -> None:
    cluster, specs, horizon = instance
    runs = [simulate(specs, cluster, make_policy("oasis-rp"), horizon, seed=5)
            for _ in range(2)]
    assert runs[0].allocations == runs[1].allocations
    assert {j: (r.admitted, r.completion, r.promised) for j, r in runs[0].records.items()} == {
        j: (r.admitted, r.completion, r.promised) for j, r in runs[1].records.items()}


def test_trimming_the_tail_takes_the_last_slots_first_and_keeps_the_ps_they_need() -> None:
    job = resolve_job(_spec("j", 0, n=4, work=11, ps_ratio_gbps=(5.0, 20.0)), 3600.0, 10)
    plan = {1: Alloc.of({0: 4}, {2: 1}), 2: Alloc.of({0: 2, 1: 2}, {2: 1}),
            3: Alloc.of({0: 3}, {2: 1})}
    got = trim_tail(job, plan, 1, 4)
    assert 3 not in got  # all three of slot 3 went, then one of slot 2
    assert got[2] == Alloc.of({0: 2, 1: 1}, {2: 1})
    assert got[1] == plan[1]  # slot t itself is never trimmed
    assert sum(a.n_workers for a in got.values()) == 11 - 4


def test_placing_extra_containers_fills_the_servers_already_used_first() -> None:
    import numpy as np
    got = place({5: 1}, 3, np.array([2, 1, 4]), np.array([3, 4, 5]))
    assert got == {5: 4}
    assert place({}, 4, np.array([1, 1, 1]), np.array([3, 4, 5])) is None
    assert place({}, 3, np.array([1, 1, 1]), np.array([3, 4, 5])) == {3: 1, 4: 1, 5: 1}


def _spec(job_id: str, arrival: int, *, n: int, work: int, deadline: int = 0,
          value: float = 10.0, ps_ratio_gbps: tuple[float, float] = (10.0, 10.0)) -> JobSpec:
    """A job of ``work`` worker-slots (1 s per mini-batch at 1-h slots), at most ``n``
    workers, worth ``value`` up to ``deadline`` slots (0: the horizon); W = work."""
    b, big_b = ps_ratio_gbps
    return JobSpec(job_id=job_id, arrival=arrival, epochs=1, max_workers=n,
                   minibatches=1, tau_s=work * 3600.0 / n, grad_mb=1.0, tau_includes_comm=True,
                   worker_demand=Resources(gpu=1, cpu=1, memory_gb=1, bandwidth_gbps=b),
                   ps_demand=Resources(cpu=1, memory_gb=1, bandwidth_gbps=big_b),
                   utility=Utility(kind="deadline", value=value,
                                   target=float(deadline or 1000)))


def _cluster(gpus: int, ps: int) -> Cluster:
    return Cluster(servers=(
        Server(server_id="w0", pool=Pool.WORKER,
               capacity=Resources(gpu=gpus, cpu=64, memory_gb=64, bandwidth_gbps=1000)),
        Server(server_id="p0", pool=Pool.PS,
               capacity=Resources(cpu=ps, memory_gb=64, bandwidth_gbps=1000))))


def test_a_long_job_works_ahead_and_a_later_burst_finds_room() -> None:
    """4 GPUs. ``mid`` (2 workers, 1 slot, due in slot 0) and ``long`` (10 worker-slots at up
    to 4, due by slot 3) arrive in slot 0; ``long``'s cheapest plan is 1 + 3 + 3 + 3 workers
    in slots 0-3 (the emptier slots are cheaper), leaving a GPU idle in slots 0 and 1 and
    ending at its promise. ``burst`` (4 worker-slots, due by slot 3, worth 50) arrives in
    slot 2 and would find slots 2-3 booked. Working ahead, ``long`` takes the idle GPUs of
    slots 0 and 1 (2 + 4 workers) from the end of its plan, and ``burst`` fits."""
    specs = [_spec("long", 0, n=4, work=10, deadline=4, value=10.0),
             _spec("mid", 0, n=2, work=2, deadline=1, value=10.0),
             _spec("burst", 2, n=4, work=4, deadline=2, value=50.0)]
    res = simulate(specs, _cluster(4, 8), make_policy("oasis-rp"), 8)
    assert broken_promises(res) == []
    recs = res.records
    assert recs["long"].utility == 10.0 and recs["mid"].utility == 10.0
    assert recs["burst"].utility == 50.0
    assert res.report["ahead_moved"] > 0
    workers_of_long = {t: c for t, j, _, role, c in res.allocations
                       if j == "long" and role == "worker"}
    assert sum(workers_of_long.values()) == 10
