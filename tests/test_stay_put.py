"""A job keeps the allocation it ran with (``psched.core.idle.IdleRoom.stay_put``): once its
workload's start-up cost is measured, the loop runs a job that a plan would move, pause, or
resize when that is not worth a start-up, on the servers it ran on, where they still have
room; with no cost measured every slot runs the plan as its policy made it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psched.core.arrivals import TraceArrivals
from psched.core.loop import SchedulerLoop
from psched.core.model import Alloc
from psched.core.reality import Reality, RealityExecutor
from psched.policies import make_policy
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

Plans = dict[int, dict[str, Alloc]]


def _run(policy: str, seed: int, reality: Reality, jobs: int = 40,
         slots: int = 60) -> tuple[SchedulerLoop, Plans, Plans, dict[int, float],
                                   dict[int, set[str]]]:
    """A run of ``jobs`` jobs arriving over a third of ``slots`` slots: the policy's plan of
    every slot, the plan the slot ran, and the start-up cost measured and the background
    jobs when it began."""
    specs, _ = oasis_paper_jobs(jobs, seed=seed, slots=slots // 3)
    loop = SchedulerLoop(cluster=oasis_paper_cluster(seed=seed), policy=make_policy(policy),
                         horizon=slots, arrivals=TraceArrivals(specs), known_jobs=specs,
                         executor=RealityExecutor(reality))
    made: Plans = {}
    ran: Plans = {}
    cost: dict[int, float] = {}
    background: dict[int, set[str]] = {}
    plan = loop.policy.plan

    def planning(view):  # type: ignore[no-untyped-def]
        got = plan(view)
        made[view.t] = {j: a for j, a in got.items() if a.n_workers or a.n_ps}
        return got

    loop.policy.plan = planning  # type: ignore[method-assign]
    begin = loop.begin_slot

    def beginning(t: int):  # type: ignore[no-untyped-def]
        cost[t] = loop.speeds.startup("")  # what the slot's plan was held with
        got = begin(t)
        background[t] = set(loop.background)
        return got

    loop.begin_slot = beginning  # type: ignore[method-assign]
    loop.after_slot.append(lambda t, p, report: ran.__setitem__(t, dict(p)))
    loop.run()
    return loop, made, ran, cost, background


def _held(made: Plans, ran: Plans, cost: dict[int, float],
          background: dict[int, set[str]]) -> dict[str, int]:
    """Check every slot against the rule; the held jobs by how the plan would change them."""
    held = {"same": 0, "grown": 0, "shrunk": 0, "paused": 0}
    for t, plan in made.items():
        before = ran.get(t - 1, {})
        for job_id in ran[t].keys() - plan.keys():  # paused by the plan, yet running
            if job_id not in background[t]:  # else a background job on idle room
                assert ran[t][job_id] == before.get(job_id) and cost[t] > 0.0  # where it ran
                held["paused"] += 1
        for job_id, want in plan.items():
            got = ran[t][job_id]  # every planned job runs
            if got == want:
                continue
            was = before.get(job_id)
            assert was != want  # only a job the plan starts, moves or resizes is changed
            if got == was:  # held: only once the cost is measured
                assert cost[t] > 0.0
                kind = ("same" if got.n_workers == want.n_workers else
                        "grown" if want.n_workers > got.n_workers else "shrunk")
                held[kind] += 1
            else:  # started or moved either way: elsewhere, with the planned counts
                assert (got.n_workers, got.n_ps) == (want.n_workers, want.n_ps)
    return held


@pytest.mark.parametrize("policy", ["oasis", "oasis-rp", "elastic-mip"])
@pytest.mark.parametrize("seed", [0, 3])
def test_a_job_the_plan_would_move_runs_where_it_ran_and_only_jobs_that_move_anyway_move(
        policy, seed):
    held = _held(*_run(policy, seed, Reality(startup=0.5, sigma_slot=0.1, seed=seed))[1:])
    assert held["same"] > 0 and held["grown"] + held["shrunk"] > 0, held
    if policy == "oasis":  # its schedules leave gaps: a job paused keeps running on idle room
        assert held["paused"] > 0, held


@settings(max_examples=8, deadline=None)
@given(policy=st.sampled_from(["oasis", "oasis-rp"]), seed=st.integers(0, 10**6),
       startup=st.floats(0.05, 1.0), resize=st.one_of(st.none(), st.floats(0.0, 1.0)),
       sigma=st.sampled_from([0.0, 0.1, 0.3]))
def test_under_any_start_up_cost_only_jobs_the_plan_changes_are_changed(policy, seed,
                                                                        startup, resize,
                                                                        sigma):
    reality = Reality(startup=startup, resize=resize, sigma_slot=sigma, sigma_job=sigma,
                      seed=seed)
    _held(*_run(policy, seed % 50, reality, jobs=20, slots=30)[1:])


@pytest.mark.parametrize("policy", ["oasis", "oasis-rp"])
@pytest.mark.parametrize("reality", [Reality(), Reality(rate=0.9, sigma_job=0.2, seed=2)],
                         ids=["exact", "no-start-up-cost"])
def test_with_no_start_up_cost_every_slot_runs_the_plan_as_its_policy_made_it(policy,
                                                                             reality):
    loop, made, ran, _, _ = _run(policy, 1, reality)
    assert loop.speeds.startup("") == 0.0
    for t, plan in made.items():
        assert {j: a for j, a in ran[t].items() if j in plan} == plan
