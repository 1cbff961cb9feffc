"""The loop's API for a live owner (admit, book, replan, drop, restore, hooks) leaves a
simulated run exactly as it was: every registered policy, several seeds, against a reference
loop that is the pre-API ``step`` written out literally."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from strategies import instances

from psched.core.arrivals import QueueArrivals
from psched.core.checker import check_plan, plan_usage
from psched.core.executor import SimulatedExecutor, SlotReport
from psched.core.loop import SchedulerLoop
from psched.core.model import (
    RESOURCES,
    Cluster,
    Decision,
    Job,
    JobSpec,
    Pool,
    SlotPlan,
    resolve_job,
)
from psched.core.policy import JobStatus, RunContext, View
from psched.core.records import (
    REJECT_CANNOT_FIT,
    REJECT_PAST_HORIZON,
    JobRecord,
    RunResult,
    cannot_fit,
)
from psched.core.simulator import simulate
from psched.policies import available_policies, make_policy
from psched.traces.synth import fig5_instance

#: the reference loop predates held jobs (``Decision.hold``, ``admit_held``):
#: ``oasis-rp``, which holds every arrival to its slot's boundary, is not compared with it
POLICIES = [p for p in available_policies() if p != "oasis-rp"]


def reference_run(specs: list[JobSpec], cluster: Cluster, policy_name: str,
                  horizon: int) -> dict[str, object]:
    """The loop as it was before its live API, step by step (hindsight, no history)."""
    policy = make_policy(policy_name)

    def resolve(s: JobSpec) -> Job:
        return resolve_job(s, cluster.slot_seconds, horizon, None)

    policy.start(RunContext(cluster=cluster, horizon=horizon,
                            known_jobs=tuple(resolve(s) for s in specs)))
    queue = deque(sorted(specs, key=lambda s: s.arrival))
    records: dict[str, JobRecord] = {}
    active: list[str] = []
    completed_last: list[str] = []
    allocations = []
    usage = np.zeros((2, len(RESOURCES)))
    rows = np.array([0 if s.pool == Pool.WORKER else 1 for s in cluster.servers])
    executor = SimulatedExecutor()
    for t in range(horizon):
        arrived = []
        while queue and queue[0].arrival <= t:
            spec = queue.popleft()
            job = resolve(spec)
            rec = records[spec.job_id] = JobRecord(job=job)
            if spec.arrival >= horizon:
                rec.reason = REJECT_PAST_HORIZON
                continue
            if cannot_fit(job, cluster):
                rec.reason = REJECT_CANNOT_FIT
                continue
            dec: Decision = policy.on_arrival(job, View(t=t, cluster=cluster, horizon=horizon,
                                                        active={}))
            rec.admitted, rec.payoff = dec.admitted, dec.payoff
            if dec.admitted:
                active.append(spec.job_id)
                arrived.append(spec.job_id)
            else:
                rec.reason = dec.reason or "rejected"
        view = View(t=t, cluster=cluster, horizon=horizon,
                    active={j: JobStatus(job=records[j].job, done=records[j].done,
                                         first_slot=records[j].first_slot) for j in active},
                    arrived=tuple(arrived), completed=tuple(completed_last))
        plan = {j: a for j, a in policy.plan(view).items() if a.n_workers or a.n_ps}
        jobs = {j: records[j].job for j in active}
        check_plan(t, plan, cluster, jobs)
        report = executor.apply(t, plan, jobs)
        for job_id, alloc in plan.items():
            allocations += [(t, job_id, h, "worker", n) for h, n in alloc.workers]
            allocations += [(t, job_id, k, "ps", n) for k, n in alloc.ps]
            if records[job_id].first_slot is None and alloc.n_workers > 0:
                records[job_id].first_slot = t
        if plan:
            np.add.at(usage, rows, plan_usage(plan, cluster, jobs))
        finished = []
        for job_id, amount in report.progress.items():
            rec = records[job_id]
            rec.done += amount
            if rec.done >= rec.job.work - 1e-9 and rec.completion is None:
                rec.completion = t
                finished.append(job_id)
        for job_id in finished:
            active.remove(job_id)
        completed_last = finished
    for spec in queue:
        records.setdefault(spec.job_id, JobRecord(job=resolve(spec), reason=REJECT_PAST_HORIZON))
    return {"allocations": allocations, "usage": usage.tolist(), "records": _records(records)}


def _records(records: dict[str, JobRecord]) -> dict[str, tuple[object, ...]]:
    return {j: (r.admitted, r.reason, r.payoff, r.done, r.first_slot, r.completion)
            for j, r in records.items()}


def _fingerprint(result: RunResult) -> dict[str, object]:
    return {"allocations": result.allocations, "usage": result.usage.tolist(),
            "records": _records(result.records)}


@pytest.mark.parametrize("policy_name", POLICIES)
@pytest.mark.parametrize("seed", [0, 3])
def test_a_simulated_run_is_the_reference_loops_run(policy_name: str, seed: int) -> None:
    specs, cluster = fig5_instance(4, seed=seed)
    horizon = 10
    got = simulate(specs, cluster, make_policy(policy_name),
                   horizon)
    assert _fingerprint(got) == reference_run(specs, cluster, policy_name, horizon)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances())
@pytest.mark.parametrize("policy_name", ["oasis", "fifo", "srtf"])
def test_random_instances_run_as_the_reference_loop(policy_name: str, inst) -> None:
    cluster, specs, horizon = inst
    got = simulate(specs, cluster, make_policy(policy_name), horizon)
    assert _fingerprint(got) == reference_run(specs, cluster, policy_name, horizon)


# -- the live owner's API -------------------------------------------------------------------
def _loop(policy_name: str, specs: list[JobSpec], cluster: Cluster, horizon: int,
          **kw) -> SchedulerLoop:
    return SchedulerLoop(cluster=cluster, policy=make_policy(policy_name), horizon=horizon,
                         arrivals=QueueArrivals(), known_jobs=specs, **kw)


@pytest.mark.parametrize("policy_name", ["oasis", "fifo"])
def test_booked_arrivals_are_decided_in_their_slot_as_in_a_simulation(policy_name: str) -> None:
    specs, cluster = fig5_instance(4, seed=1)
    horizon = 10
    loop = _loop(policy_name, specs, cluster, horizon)
    for spec in specs:
        loop.book(spec)
    while loop.state.t < horizon:
        loop.step()
    assert _records(loop.result().records) == _records(
        simulate(specs, cluster, make_policy(policy_name), horizon).records)
    assert loop.result().allocations == simulate(specs, cluster, make_policy(policy_name),
                                                 horizon).allocations


def test_admit_returns_the_decision_and_the_committed_schedule() -> None:
    specs, cluster = fig5_instance(4, seed=2)
    horizon = 10
    loop = _loop("oasis", specs, cluster, horizon)
    out = loop.admit(0, [s for s in specs if s.arrival == 0] or specs[:1])
    for adm in out:
        rec = loop.state.records[adm.job_id]
        assert (adm.admitted, adm.reason, adm.payoff) == (rec.admitted, rec.reason, rec.payoff)
        assert bool(adm.schedule) == adm.admitted  # oasis commits a schedule on admission
        if adm.admitted:
            assert sum(a.n_workers for a in adm.schedule.values()) >= rec.job.work
    again = _loop("fifo", specs, cluster, horizon).admit(0, specs[:1])[0]
    assert again.schedule == {}  # a re-planning policy commits nothing


def test_booking_or_admitting_an_id_twice_is_refused() -> None:
    specs, cluster = fig5_instance(4, seed=2)
    horizon = 10
    loop = _loop("fifo", specs, cluster, horizon)
    loop.book(specs[0])
    with pytest.raises(ValueError, match="twice"):
        loop.book(specs[0])
    loop.admit(0, [specs[1]])
    with pytest.raises(ValueError, match="twice"):
        loop.admit(0, [specs[1]])
    assert loop.known(specs[0].job_id) and loop.known(specs[1].job_id)


def test_a_job_admitted_between_slots_is_an_event_for_a_replanning_policy() -> None:
    specs, cluster = fig5_instance(4, seed=4)
    horizon = 10
    seen: list[View] = []
    policy = make_policy("fifo")
    plan = policy.plan

    def spy(view: View) -> SlotPlan:
        seen.append(view)
        return plan(view)

    policy.plan = spy  # type: ignore[method-assign]
    loop = SchedulerLoop(cluster=cluster, policy=policy, horizon=horizon,
                         arrivals=QueueArrivals())
    loop.step()
    late = specs[0]
    assert loop.admit(1, [late])[0].admitted
    loop.step()
    assert seen[-1].arrived == (late.job_id,) and seen[-1].event


def test_hooks_run_around_every_slot_with_the_executed_plan() -> None:
    specs, cluster = fig5_instance(4, seed=5)
    horizon = 10
    calls: list[tuple[str, int]] = []
    plans: dict[int, SlotPlan] = {}

    def after(t: int, plan: SlotPlan, report: SlotReport) -> None:
        calls.append(("after", t))
        plans[t] = dict(plan)
        assert report.slot == t

    loop = _loop("oasis", specs, cluster, horizon,
                 before_slot=[lambda t: calls.append(("before", t))], after_slot=[after])
    for spec in specs:
        loop.book(spec)
    for _ in range(3):
        loop.step()
    assert calls == [("before", 0), ("after", 0), ("before", 1), ("after", 1),
                     ("before", 2), ("after", 2)]
    rows = [(t, j, h, role, n) for t, plan in plans.items() for j, a in plan.items()
            for role, pairs in (("worker", a.workers), ("ps", a.ps)) for h, n in pairs]
    assert sorted(rows) == sorted(loop.state.allocations)


def test_drop_releases_the_job_once() -> None:
    released: list[str] = []

    class Spy(SimulatedExecutor):
        def release(self, job_id: str) -> None:
            released.append(job_id)

    specs, cluster = fig5_instance(4, seed=6)
    horizon = 10
    loop = SchedulerLoop(cluster=cluster, policy=make_policy("fifo"), horizon=horizon,
                         arrivals=QueueArrivals(), executor=Spy())
    job_id = specs[0].job_id
    loop.admit(0, [specs[0]])
    assert loop.drop(job_id, "cancelled") and not loop.drop(job_id, "cancelled")
    assert released == [job_id] and loop.state.records[job_id].reason == "cancelled"
    assert job_id not in loop.state.active


@pytest.mark.parametrize("policy_name", ["oasis", "fifo"])
@pytest.mark.parametrize("cut", [0, 2, 5])
def test_restore_from_a_record_carries_on_as_the_uninterrupted_run(policy_name: str,
                                                                   cut: int) -> None:
    """Record decisions and executed slots up to ``cut``, rebuild a fresh loop from them
    (forced decisions, restore): the same state at ``cut``; run on, a policy that restores
    its decisions (oasis) makes the same run as without the interruption (a re-planning
    policy starts afresh and may place differently)."""
    specs, cluster = fig5_instance(4, seed=8)
    horizon = 10
    ref = _loop(policy_name, specs, cluster, horizon)
    decisions: dict[str, Decision] = {}
    slots: list[tuple[int, SlotPlan]] = []
    ref.after_slot.append(lambda t, plan, report: slots.append((t, dict(plan))))
    while ref.state.t < horizon:
        t = ref.state.t
        if t == cut:
            snap = (dict(decisions), list(slots),
                    {j: r.done for j, r in ref.state.records.items()},
                    {j: r.completion for j, r in ref.state.records.items()
                     if r.completion is not None})
        for adm in ref.admit(t, [s for s in specs if s.arrival == t]):
            decisions[adm.job_id] = Decision(admitted=adm.admitted, reason=adm.reason,
                                             payoff=adm.payoff, schedule=adm.schedule or None)
        ref.step()
    decided, done_slots, done, completed = snap
    again = _loop(policy_name, specs, cluster, horizon)
    by_id = {s.job_id: s for s in specs}
    for j, dec in decided.items():
        again.admit(by_id[j].arrival, [by_id[j]], forced={j: dec})
    again.restore(slots=done_slots, done={j: done[j] for j in decided},
                  completed={j: c for j, c in completed.items() if j in decided})
    for spec in specs:
        if spec.job_id not in decided:
            again.book(spec)
    assert again.state.t == cut
    assert again.state.allocations == [a for a in ref.state.allocations if a[0] < cut]
    at_cut = {j: (r.admitted, r.reason, r.done, r.completion)
              for j, r in again.state.records.items()}
    assert at_cut == {j: (decided[j].admitted, again.state.records[j].reason, done[j],
                          completed.get(j)) for j in decided}
    if policy_name != "oasis":
        return
    while again.state.t < horizon:
        again.step()
    assert again.result().allocations == ref.result().allocations
    assert _records(again.result().records) == _records(ref.result().records)

