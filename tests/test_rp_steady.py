"""``oasis-rp``'s steady boundary re-plan (:mod:`psched.policies.oasis_rp.steady`): when reality
runs behind and each resume costs start-up, jobs do not swap slots back and forth; with
reality as planned it decides exactly as the literal re-plan.

Reality behind is :class:`psched.behind.StartupExecutor` in the scheduler service (the
loop the live service runs): each worker does ``rate`` of its planned work, and a job that
starts or resumes loses ``startup`` of the slot, as a resume costs actor start-up on Ray.
Suspensions are counted from ``allocations`` (:func:`psched.behind.churn`).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_journal import _cluster, _drive, _spec
from test_service_oasis_rp import _config, _random_plan

from psched.behind import StartupExecutor, churn
from psched.executor import SimulatedExecutor
from psched.model import Alloc
from psched.policies.oasis_rp import OasisRpPolicy
from psched.policies.oasis_rp.steady import keeps_running, tightest_first
from psched.simulator import simulate
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs
from ray_cluster.service import SchedulerService


def _service(tmp_path, executor, steady: bool) -> SchedulerService:
    # decided on arrival and without working ahead, as these scenarios were measured (the
    # scenarios submit and expect an answer at once; batch and soft, on by default since,
    # hold arrivals to a boundary; ahead, on by default since session 8, fills the idle
    # worker server at each boundary, so the two jobs below no longer swap slots even under
    # the literal rule: 1 suspension at most)
    svc = SchedulerService(tmp_path, config=_config(policy_options={"batch": False,
                                                                    "soft": False,
                                                                    "ahead": False}),
                           cluster=_cluster(), executor=executor)
    svc.policy.steady = steady  # type: ignore[attr-defined]
    return svc


def _kept(svc: SchedulerService) -> tuple[int, int, int]:
    """(admitted, promises kept, completed) of a service's run."""
    adm = [r for r in svc.loop.state.records.values() if r.promised is not None]
    kept = sum(r.completion is not None and r.completion <= r.promised for r in adm)
    return len(adm), kept, sum(r.completion is not None for r in adm)


def _two_jobs_sharing_the_server(tmp_path, steady: bool) -> SchedulerService:
    """The Ray test's scenario: ``j1`` takes the worker server from slot 0, ``j2`` (steep)
    arrives in slot 1 and is re-packed in front of it; a resume costs the whole slot and
    every worker does 0.9 of its planned work."""
    svc = _service(tmp_path, StartupExecutor(0.9, 1.0), steady)
    # OASiS's pricing (the scenario of the Ray test as measured): with own-usage pricing, the
    # default since, j1 is planned on one worker first, j2 runs slots 1-2, falls behind, and
    # once past its promise is moved as late as its window allows (finishes in slot 11
    # against promise 3): the steady rule's known weak spot, kept visible in BENCHMARKS §9
    svc.policy.own_price = "off"  # type: ignore[attr-defined]
    assert svc.submit(_spec(1, n=2, work_s=0.06, value=10))["admitted"]
    svc.run_for(1)
    assert svc.submit(_spec(2, n=2, work_s=0.04, value=20))["admitted"]
    svc.run_for(40)
    return svc


def test_two_jobs_behind_swap_slots_every_boundary_under_the_literal_rule(tmp_path):
    """The thrash the steady rule removes: each re-plans alone into the other's slot; each
    resume costs a slot, so neither progresses and ``j1`` is dropped past its window."""
    svc = _two_jobs_sharing_the_server(tmp_path, steady=False)
    assert churn(svc.loop.state.allocations).max_suspensions >= 10
    assert svc.loop.state.records["j1"].completion is None


def test_two_jobs_behind_do_not_swap_and_both_complete_under_the_steady_rule(tmp_path):
    svc = _two_jobs_sharing_the_server(tmp_path, steady=True)
    got = churn(svc.loop.state.allocations)
    assert got.max_suspensions <= 1 and got.suspensions <= 2
    recs = svc.loop.state.records
    assert all(recs[j].completion is not None for j in ("j1", "j2"))
    assert max(recs[j].completion for j in ("j1", "j2")) <= 12  # type: ignore[type-var]
    assert svc.policy.report()["kept_running"] > 0  # type: ignore[attr-defined]


@pytest.mark.parametrize(("rate", "startup"), [(0.9, 1.0), (0.8, 0.5)])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_with_reality_behind_steady_suspends_less_and_completes_no_fewer(
        tmp_path_factory, seed, rate, startup):
    """Eight random jobs on one worker server (``_random_plan``), reality behind with a
    start-up per resume: the steady rule suspends fewer times than the literal one and
    completes at least as many admitted jobs."""
    runs = {}
    for steady in (False, True):
        svc = _service(tmp_path_factory.mktemp(f"s{steady}"), StartupExecutor(rate, startup),
                       steady)
        _drive(svc, _random_plan(seed), 60)
        runs[steady] = (churn(svc.loop.state.allocations), _kept(svc))
    (lit, lit_kept), (std, std_kept) = runs[False], runs[True]
    assert std.suspensions < lit.suspensions
    assert std_kept[2] >= lit_kept[2]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_with_reality_as_planned_steady_decides_as_the_literal_rule(tmp_path_factory, seed):
    """No job is ever off its plan, so the steady rule never acts: the service journals the
    same decisions and runs the same allocations either way."""
    runs = []
    for steady in (False, True):
        svc = _service(tmp_path_factory.mktemp(f"s{steady}"), SimulatedExecutor(), steady)
        _drive(svc, _random_plan(seed), 40)
        runs.append(([(r.job_id, r.kind, r.slot, r.schedule, r.promised, r.payoff)
                      for r in svc.journal.decisions()], sorted(svc.loop.state.allocations)))
    assert runs[0] == runs[1]


@pytest.mark.parametrize("seed", [0, 1])
def test_on_the_oasis_paper_scenario_as_planned_steady_runs_the_literal_schedule(seed):
    specs, _info = oasis_paper_jobs(40, seed=seed)
    cluster = oasis_paper_cluster(seed=seed)
    runs = [simulate(specs, cluster, OasisRpPolicy(steady=s), 300) for s in (False, True)]
    assert runs[0].allocations == runs[1].allocations
    assert {j: (r.admitted, r.completion, r.promised) for j, r in runs[0].records.items()} == {
        j: (r.admitted, r.completion, r.promised) for j, r in runs[1].records.items()}
    assert runs[1].report["kept_running"] == 0


def test_jobs_are_re_planned_tightest_promise_first_then_by_id():
    assert tightest_first(["b", "a", "c"], {"a": 5, "b": 3, "c": 5}) == ["b", "a", "c"]


def test_a_plan_that_stops_or_resizes_a_running_job_is_not_kept():
    two, one = Alloc.of({0: 2}, {1: 1}), Alloc.of({0: 1}, {1: 1})
    old = {4: two, 5: two}
    assert keeps_running(old, {4: two, 7: one}, 4, ran=True)
    assert not keeps_running(old, {5: two, 6: two}, 4, ran=True)  # stopped in slot 4
    assert not keeps_running(old, {4: one, 5: two, 6: one}, 4, ran=True)  # resized
    assert keeps_running(old, {5: two, 6: two}, 4, ran=False)  # it was not running


def test_the_startup_executor_charges_a_start_and_a_resume_not_a_continued_slot():
    ex, a = StartupExecutor(0.5, 0.4), Alloc.of({0: 2}, {1: 1})
    assert ex.apply(0, {"j": a}, {}).progress == {"j": pytest.approx(0.5 * 2 * 0.6)}
    assert ex.apply(1, {"j": a}, {}).progress == {"j": pytest.approx(1.0)}
    assert ex.apply(2, {}, {}).progress == {}
    assert ex.apply(3, {"j": a}, {}).progress == {"j": pytest.approx(0.6)}  # resumed
    with pytest.raises(ValueError, match="startup"):
        StartupExecutor(1.0, 1.5)


def test_churn_counts_suspensions_and_resizes_from_allocation_rows():
    rows = [(0, "a", 0, "worker", 2), (0, "a", 1, "ps", 1), (1, "a", 0, "worker", 1),
            (3, "a", 0, "worker", 1), (5, "a", 0, "worker", 1), (2, "b", 0, "worker", 1)]
    got = churn(rows)
    assert (got.suspensions, got.resizes, got.max_suspensions, got.jobs) == (2, 1, 2, 2)



@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), rate=st.floats(0.5, 1.0), startup=st.floats(0.0, 1.0))
def test_with_reality_behind_no_admitted_job_is_forgotten(tmp_path_factory, seed, rate, startup):
    """Whatever the lag: every admitted job completes or is dropped after its window ends
    (``dropped_behind``), on plans the loop checked against capacity every slot."""
    svc = _service(tmp_path_factory.mktemp("h"), StartupExecutor(rate, startup), True)
    _drive(svc, _random_plan(seed), 80)
    for job_id, rec in svc.loop.state.records.items():
        if rec.admitted:
            assert rec.completion is not None or (
                rec.reason == "dropped_behind" and svc.loop.state.t > rec.job.last_slot), job_id
