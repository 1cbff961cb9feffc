"""Start-up priced in where it is paid (``psched.core.keeping``): once a workload's start-up
cost is measured, jobs are decided at the share of their work they keep from it, and the
capacity the loop reserves for a job behind pays it as few times as it can."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psched.core.arrivals import TraceArrivals
from psched.core.loop import SchedulerLoop
from psched.core.placement import Pools, most_workers
from psched.core.reality import Reality, RealityExecutor
from psched.core.speed import Z_PROMISE
from psched.policies import make_policy
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs
from ray_cluster.service import SchedulerService, ServiceConfig


def _loop(policy: str, seed: int, startup: float) -> tuple[SchedulerLoop, list]:
    specs, _ = oasis_paper_jobs(40, seed=seed, slots=20)
    loop = SchedulerLoop(cluster=oasis_paper_cluster(seed=seed), policy=make_policy(policy),
                         horizon=60, arrivals=TraceArrivals(specs), known_jobs=specs,
                         executor=RealityExecutor(Reality(startup=startup, seed=seed)))
    decisions: list = []
    loop.on_decision.append(decisions.append)
    return loop, decisions


@pytest.mark.parametrize("policy", ["oasis", "oasis-rp"])
@pytest.mark.parametrize("seed", [0, 4])
def test_once_start_up_is_measured_jobs_are_decided_at_the_share_of_work_they_keep(policy,
                                                                                    seed):
    loop, decisions = _loop(policy, seed, 0.5)
    eff: dict[int, float] = {}
    prior: dict[int, float] = {}

    def note(t: int) -> None:
        mu, sd = loop.speeds.prior("")
        if policy == "oasis":  # commits on arrival: at the promise's quantile of the spread
            mu *= math.exp(-Z_PROMISE * sd / mu)
        eff[t], prior[t] = loop.speeds.efficiency(""), mu

    loop.before_slot.append(note)
    loop.run()
    records = loop.state.records
    arrivals = [a for a in decisions if a.slot == records[a.job_id].job.arrival
                and not a.behind]  # each job's decision on arrival
    late = [a for a in arrivals if eff[a.slot] < 1.0]
    assert late, "start-up was never measured"
    for a in arrivals:  # its workload's prior times the share it keeps from start-up
        assert a.planned_speed == pytest.approx(prior[a.slot] * eff[a.slot], rel=1e-12)
    assert all(0.5 <= e <= 1.0 for e in eff.values())  # half a slot lost, at most, per slot


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_capacity_reserved_for_a_job_covers_its_work_less_what_its_starts_lose(seed):
    loop, _ = _loop("oasis", seed, 0.5)
    loop.run(until=15)
    cost = loop.speeds.startup("")
    assert cost > 0.0
    for job_id in list(loop.state.active)[:5]:
        job = loop.state.records[job_id].job
        got = loop.reserve_idle(job, 12, 15)
        if not got:
            continue
        before = loop.last_plan.get(job_id)
        kept = 0.0
        for s in sorted(got):
            prev = got.get(s - 1, before if s == 15 else None)
            kept += got[s].n_workers * (1.0 if got[s] == prev else 1.0 - cost)
        assert kept >= 12 - 1e-9
        changes = sum(1 for s in sorted(got)[1:] if got.get(s - 1) != got[s])
        assert changes <= len(got) - 1


def test_with_no_start_up_cost_reservations_and_decisions_are_the_models():
    loop, decisions = _loop("oasis", 3, 0.0)
    loop.run()
    assert loop.speeds.efficiency("") == 1.0
    assert all(a.planned_speed == 1.0 for a in decisions)


@pytest.mark.parametrize("policy", ["oasis", "oasis-rp"])
@pytest.mark.parametrize("rate", [0.8, 0.95, 1.2])
def test_jobs_at_one_speed_with_no_start_up_cost_measure_none(policy, rate):
    """A start slot and a steady one at the same speed differ only in the last bits of
    their ratio: that is no start-up cost, and nothing is priced for it."""
    specs, _ = oasis_paper_jobs(40, seed=5, slots=20)
    loop = SchedulerLoop(cluster=oasis_paper_cluster(seed=5), policy=make_policy(policy),
                         horizon=60, arrivals=TraceArrivals(specs), known_jobs=specs,
                         executor=RealityExecutor(Reality(rate=rate)))
    loop.run()
    assert loop.speeds.startup("") == 0.0 and loop.speeds.efficiency("") == 1.0


def _empty_loop_with_cost(cost: float) -> SchedulerLoop:
    """A loop at slot 0 with nothing committed, whose workload ``""`` has a measured
    start-up cost of ``cost`` (one job that started at it, then ran steady)."""
    specs, _ = oasis_paper_jobs(4, seed=0, slots=2)
    loop = SchedulerLoop(cluster=oasis_paper_cluster(seed=0), policy=make_policy("oasis"),
                         horizon=40, arrivals=TraceArrivals([]), known_jobs=specs)
    loop.speeds.observe_start("seen", "", 4, 4 * (1.0 - cost))
    loop.speeds.observe("seen", "", 4, 4.0)
    assert loop.speeds.startup("") == pytest.approx(cost)
    return loop


@settings(max_examples=40, deadline=None)
@given(work=st.integers(1, 300), cost=st.sampled_from([0.25, 0.5, 0.75]),
       pick=st.integers(0, 3))
def test_on_free_capacity_a_reservation_starts_once_and_holds_its_workers(work, cost, pick):
    """The first slot of a reservation asks for the workers that finish the work in it, at
    what a slot that starts the job keeps; later slots keep that allocation, never a
    shrinking tail of smaller ones that each pay the start-up again."""
    loop = _empty_loop_with_cost(cost)
    specs, _ = oasis_paper_jobs(4, seed=0, slots=2)
    job = loop.resolve(specs[pick])
    got = loop.reserve_idle(job, work, 0)
    assert got and sorted(got) == list(range(len(got)))
    assert len(set(got.values())) == 1  # one allocation, held: one start
    n = got[0].n_workers
    assert n == most_workers(np.asarray(loop.cluster.capacity, dtype=float),
                             Pools.of(loop.cluster), job,
                             min(job.max_workers, math.ceil(work / (1.0 - cost) - 1e-9)))
    kept = n * (1.0 - cost) + n * (len(got) - 1)
    assert kept >= work - 1e-9 and kept - n < work  # no slot more than it needs


@pytest.mark.parametrize("seed", [0, 1])
def test_capacity_freed_early_moves_no_job_to_a_later_finish_start_up_counted(tmp_path, seed):
    """Jobs of spread speeds finish ahead of their schedules; every other job re-decided
    into the freed capacity keeps the new schedule only if, losing the measured start-up
    in each slot that starts or resizes it, it finishes sooner than the old one."""
    specs, _ = oasis_paper_jobs(40, seed=seed, slots=10, slot_seconds=3600.0)
    specs = [dataclasses.replace(s, workload="softmax", hparams='{"dataset": "digits"}')
             for s in specs]
    svc = SchedulerService(tmp_path, config=ServiceConfig(
        policy="oasis", slot_seconds=3600.0, horizon=30, history=tuple(specs)),
        cluster=oasis_paper_cluster(seed=seed, slot_seconds=3600.0),
        executor=RealityExecutor(Reality(sigma_job=0.3, startup=0.5, seed=seed)))
    svc.clock.wait_until = lambda t: None
    loop, reuse = svc.loop, svc.rules.reuse_freed
    checked: list[tuple[str, int, int, int]] = []

    def checking(finished: list[str], t: int) -> None:
        before = {j: loop.finish_along(j, t, {s: a for s, a in sched.items() if s >= t})
                  for j, sched in loop.schedules.items()
                  if j not in finished and any(s >= t for s in sched)}
        reuse(finished, t)
        for j, was in before.items():
            now = {s: a for s, a in loop.schedules.get(j, {}).items() if s >= t}
            if now and loop.speeds.startup("softmax") > 0.0:
                checked.append((j, t, was, loop.finish_along(j, t, now)))

    svc.rules.reuse_freed = checking
    by_slot: dict[int, list] = {}
    for s in specs:
        by_slot.setdefault(s.arrival, []).append(s)
    while loop.state.t < 30:
        for s in by_slot.get(loop.state.t, []):
            svc.submit(s)
        svc.run_for(1)
    svc.close()
    assert checked, "no capacity was freed once start-up was measured"
    assert [c for c in checked if c[3] > c[2]] == []  # (job, slot, finish before, after)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_committing_policy_commits_a_job_at_a_cautious_speed_a_replanning_one_at_the_mean(
        seed):
    """Jobs whose speeds spread: oasis (it commits on arrival) decides each arrival at the
    workload's speed ``Z_PROMISE`` spreads below its mean, oasis-rp (it re-plans) at the
    mean; neither once nothing spreads."""
    specs, _ = oasis_paper_jobs(40, seed=seed, slots=20)
    for policy in ("oasis", "oasis-rp"):
        loop = SchedulerLoop(cluster=oasis_paper_cluster(seed=seed),
                             policy=make_policy(policy), horizon=60,
                             arrivals=TraceArrivals(specs), known_jobs=specs,
                             executor=RealityExecutor(Reality(sigma_job=0.3, seed=seed)))
        loop.run(until=10)
        mu, sd = loop.speeds.prior("")
        assert sd > 0.0
        want = mu * math.exp(-Z_PROMISE * sd / mu) if policy == "oasis" else mu
        assert loop.planned_speed("") == pytest.approx(want, rel=1e-12)
