"""The scheduling loop's own rules, with tiny hand-written policies."""

from __future__ import annotations

from typing import Any

import pytest

from psched.core.arrivals import QueueArrivals
from psched.core.checker import check_plan
from psched.core.errors import PlanViolation
from psched.core.executor import SlotReport
from psched.core.loop import SchedulerLoop
from psched.core.model import Alloc, Cluster, Decision, Job, JobSpec, Pool, Resources, Server
from psched.core.policy import RunContext, View
from psched.core.records import REJECT_CANNOT_FIT, REJECT_PAST_HORIZON
from psched.core.simulator import simulate
from psched.core.utility import Utility


def cluster(n_worker: int = 1, n_ps: int = 1, gpu: float = 4) -> Cluster:
    servers = [Server(server_id=f"w{i}", pool=Pool.WORKER,
                      capacity=Resources(gpu=gpu, cpu=16, memory_gb=64, bandwidth_gbps=10))
               for i in range(n_worker)]
    servers += [Server(server_id=f"p{i}", pool=Pool.PS,
                       capacity=Resources(cpu=16, memory_gb=64, bandwidth_gbps=10))
                for i in range(n_ps)]
    return Cluster(servers=tuple(servers), slot_seconds=3600)


def spec(job_id: str, arrival: int = 0, n: int = 2, f: int = 2, gpu: float = 1,
         b: float = 1.0, big_b: float = 2.0) -> JobSpec:
    """A job of exactly ``n * f`` worker-slots (tau chosen so, no communication)."""
    return JobSpec(job_id=job_id, arrival=arrival, epochs=1, max_workers=n, minibatches=1,
                   tau_s=f * 3600.0, grad_mb=0.0, tau_includes_comm=True,
                   worker_demand=Resources(gpu=gpu, cpu=1, memory_gb=1, bandwidth_gbps=b),
                   ps_demand=Resources(cpu=1, memory_gb=1, bandwidth_gbps=big_b),
                   utility=Utility(kind="sigmoid", value=10, decay=1, target=3))


class Greedy:
    """Gives every active job all its workers on server 0 and the PS it needs on the PS server."""

    name = "greedy-test"
    commits_on_arrival = False

    def __init__(self) -> None:
        self.views: list[View] = []

    def start(self, ctx: RunContext) -> None:
        self.ps_server = int(ctx.cluster.indices(Pool.PS)[0])

    def on_arrival(self, job: Job, view: View) -> Decision:
        return Decision(admitted=True)

    def plan(self, view: View) -> dict[str, Alloc]:
        self.views.append(view)
        out = {}
        for j, st in view.active.items():
            n = st.job.max_workers
            out[j] = Alloc.of({0: n}, {self.ps_server: st.job.ps_needed(n)})
        return out

    def report(self) -> dict[str, Any]:
        return {}


def test_job_completes_in_slot_where_cumulative_workers_reach_its_work() -> None:
    res = simulate([spec("a", arrival=1, n=2, f=3)], cluster(), Greedy(), horizon=10)
    rec = res.records["a"]
    assert rec.job.work == 6
    assert rec.completion == 3 and rec.duration == 3
    assert rec.utility == pytest.approx(10 / 2)  # sigmoid at d == target


def test_completion_and_arrival_of_one_slot_form_one_event() -> None:
    pol = Greedy()
    simulate([spec("a", arrival=0, n=2, f=1), spec("b", arrival=1)], cluster(), pol, horizon=5)
    v1 = pol.views[1]
    assert v1.arrived == ("b",) and v1.completed == ("a",) and v1.event
    assert pol.views[3].completed == ("b",) and not pol.views[4].event


def test_loop_refuses_a_plan_that_exceeds_capacity() -> None:
    with pytest.raises(PlanViolation, match="gpu"):
        simulate([spec("a", n=2), spec("b", n=2)], cluster(gpu=3), Greedy(), horizon=5)


def test_checker_names_each_per_job_rule() -> None:
    c = cluster()
    job = SchedulerLoop(cluster=c, policy=Greedy(), horizon=5, arrivals=QueueArrivals()).resolve(
        spec("a", n=2))
    with pytest.raises(PlanViolation, match="N = 2"):
        check_plan(0, {"a": Alloc.of({0: 3}, {1: 2})}, c, {"a": job})
    with pytest.raises(PlanViolation, match="PS >"):
        check_plan(0, {"a": Alloc.of({0: 1}, {1: 2})}, c, {"a": job})
    with pytest.raises(PlanViolation, match="ceil"):
        check_plan(0, {"a": Alloc.of({0: 2}, {})}, c, {"a": job})
    with pytest.raises(PlanViolation, match="pool"):
        check_plan(0, {"a": Alloc.of({1: 1}, {0: 1})}, c, {"a": job})
    with pytest.raises(PlanViolation, match="not admitted"):
        check_plan(0, {"b": Alloc.of({0: 1}, {1: 1})}, c, {"a": job})


def test_jobs_that_cannot_fit_or_arrive_too_late_are_rejected_with_a_reason() -> None:
    jobs = [spec("big", gpu=8), spec("late", arrival=7), spec("ok")]
    res = simulate(jobs, cluster(gpu=4), Greedy(), horizon=5)
    assert res.records["big"].reason == REJECT_CANNOT_FIT
    assert res.records["late"].reason == REJECT_PAST_HORIZON
    assert res.records["ok"].admitted and res.records["ok"].completion is not None


def test_live_arrivals_pushed_while_the_loop_runs_are_decided_in_their_slot() -> None:
    arrivals = QueueArrivals()
    pol = Greedy()
    loop = SchedulerLoop(cluster=cluster(), policy=pol, horizon=10, arrivals=arrivals)
    loop.step()
    arrivals.push(spec("x", arrival=1))
    loop.step()
    assert pol.views[-1].arrived == ("x",)
    assert loop.state.records["x"].first_slot == 1


class Slow:
    """An executor measuring half the modelled progress (a real one may lag its plan)."""

    def apply(self, t: int, plan: Any, jobs: Any) -> SlotReport:
        return SlotReport(slot=t, progress={j: a.n_workers / 2 for j, a in plan.items()})

    def release(self, job_id: str) -> None:
        pass

    def close(self) -> None:
        pass


def test_loop_counts_measured_progress_not_planned_progress() -> None:
    loop = SchedulerLoop(cluster=cluster(), policy=Greedy(), horizon=10,
                         arrivals=QueueArrivals(), executor=Slow())
    loop.arrivals.push(spec("a", n=2, f=2))  # type: ignore[attr-defined]
    res = loop.run(until=6)
    assert res.records["a"].completion == 3  # 4 worker-slots at 1 per slot


def test_wall_clock_starts_each_slot_no_earlier_than_its_time() -> None:
    import time

    from psched.core.arrivals import WallClock

    clock = WallClock(slot_seconds=0.02)
    for t in range(3):
        clock.wait_until(t)
        assert time.time() >= clock.start + t * 0.02
        assert clock.slot_now() >= t
