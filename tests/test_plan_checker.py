"""PlanChecker: the loop's incremental checker gives check_plan's verdicts and plan_usage's
matrices, slot after slot, whatever changes between slots."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psched.core.arrivals import TraceArrivals
from psched.core.checker import PlanChecker, check_plan, plan_usage
from psched.core.errors import PlanViolation
from psched.core.loop import SchedulerLoop
from psched.core.model import Alloc, Cluster, JobSpec, Pool, Resources, Server, resolve_job
from psched.core.utility import Utility
from psched.policies import JobStatus, make_policy
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

CLUSTER = Cluster(servers=(
    Server(server_id="w0", pool=Pool.WORKER, capacity=Resources(gpu=4, cpu=16, memory_gb=64)),
    Server(server_id="w1", pool=Pool.WORKER, capacity=Resources(gpu=2, cpu=16, memory_gb=64)),
    Server(server_id="p0", pool=Pool.PS, capacity=Resources(cpu=8, memory_gb=32)),
), slot_seconds=3600.0)


def _job(job_id: str, arrival: int, n: int):
    spec = JobSpec(job_id=job_id, arrival=arrival, epochs=1, max_workers=n, minibatches=1,
                   tau_s=4 * 3600.0, grad_mb=0.0, tau_includes_comm=True,
                   worker_demand=Resources(gpu=1, cpu=2, memory_gb=4, bandwidth_gbps=1),
                   ps_demand=Resources(cpu=2, memory_gb=4, bandwidth_gbps=2),
                   utility=Utility(kind="constant", value=1.0))
    return resolve_job(spec, 3600.0, 50, None)


JOBS = {j: _job(j, a, n) for j, a, n in (("a", 0, 3), ("b", 1, 2), ("c", 2, 4))}

allocs = st.builds(
    lambda w0, w1, p0, bad: Alloc.of({2 if bad else 0: w0, 1: w1}, {0 if bad else 2: p0}),
    st.integers(0, 4), st.integers(0, 3), st.integers(0, 3), st.integers(0, 9).map(lambda k:
                                                                                  k == 0))
plans = st.dictionaries(st.sampled_from(["a", "b", "c", "x"]), allocs, max_size=3)
slots = st.lists(st.tuples(plans, st.sampled_from([("a", "b", "c"), ("a", "c"), ("b",)]),
                           st.booleans()), min_size=1, max_size=8)


def _verdict(fn):
    try:
        fn()
    except PlanViolation as err:
        return str(err)
    return None


@settings(max_examples=150, deadline=None)
@given(slots)
def test_incremental_checker_gives_the_same_verdicts_and_usage(seq) -> None:
    checker = PlanChecker()
    previous: dict[str, Alloc] = {}
    for t, (plan, alive, repeat) in enumerate(seq):
        plan = dict(previous) if repeat and previous else plan
        active = {j: JOBS[j] for j in alive}
        want = _verdict(lambda: check_plan(t, plan, CLUSTER, active))  # noqa: B023
        got = _verdict(lambda: checker.check(t, plan, CLUSTER, active))  # noqa: B023
        assert got == want
        if want is None:
            np.testing.assert_array_equal(checker.usage(plan, CLUSTER, active),
                                          plan_usage(plan, CLUSTER, active))
            previous = plan


@pytest.mark.parametrize("name", ["fifo", "srtf", "drf"])
@pytest.mark.parametrize("seed", [0, 3])
def test_view_active_is_what_the_records_say_every_slot(name: str, seed: int) -> None:
    """The loop keeps View.active between slots; each slot it equals a fresh build."""
    specs, _ = oasis_paper_jobs(40, seed=seed, slots=40)
    policy = make_policy(name)
    loop = SchedulerLoop(cluster=oasis_paper_cluster(seed=seed), policy=policy, horizon=40,
                         arrivals=TraceArrivals(specs), seed=seed)
    inner = policy.plan
    checked = []

    def plan(view):
        recs = loop.state.records
        assert view.active == {j: JobStatus(job=recs[j].job, done=recs[j].done,
                                            first_slot=recs[j].first_slot)
                               for j in loop.state.active}
        checked.append(len(view.active))
        return inner(view)

    policy.plan = plan
    loop.run()
    assert len(checked) == 40 and max(checked) > 5
