"""Start-up priced in where it is paid (``psched.core.keeping``): once a workload's start-up
cost is measured, jobs are decided at the share of their work they keep from it, and the
capacity the loop reserves for a job behind pays it as few times as it can."""

from __future__ import annotations

import pytest

from psched.core.arrivals import TraceArrivals
from psched.core.loop import SchedulerLoop
from psched.core.reality import Reality, RealityExecutor
from psched.policies import make_policy
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs


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
        eff[t], prior[t] = loop.speeds.efficiency(""), loop.speeds.prior("")[0]

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
