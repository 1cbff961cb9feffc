"""The elastic MIP allocator: optimal for its objective, never below its greedy baselines, and
the policy's promises (no pre-emption, anti-starvation) hold in whole runs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import instances
from test_baselines import spec

from psched.core.model import Cluster, Pool, Resources, Server
from psched.core.simulator import simulate
from psched.policies import make_policy
from psched.policies.elastic_mip import solve_mip
from psched.policies.epoch import Epoch, brute_force, feasible, objective
from psched.policies.greedy import density_fill, fifo_fill, marginal_gain

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def epochs(draw: st.DrawFn, max_jobs: int = 4, intervals: int = 1) -> Epoch:
    """A small epoch: 1-4 jobs, counts from 1..6, two resources, some jobs already running."""
    J = draw(st.integers(1, max_jobs))
    mode = draw(st.sampled_from(["pow2", "all"]))
    sublinear = draw(st.booleans())
    allowed, speed, ps, rem, cur, wts, pen = [], [], [], [], [], [], []
    wd, sd = [], []
    for _ in range(J):
        cap = draw(st.integers(1, 6))
        ns = list(range(1, cap + 1)) if mode == "all" else sorted(
            {1 << k for k in range(3) if (1 << k) <= cap} | {cap})
        a = draw(st.sampled_from([0, *ns]))
        ratio = draw(st.sampled_from([0.0, 0.25, 0.5, 1.0]))
        arr = np.array(ns, dtype=np.int64)
        allowed.append(arr)
        speed.append(arr.astype(float) ** (0.7 if sublinear else 1.0))
        ps.append(np.array([int(np.ceil(ratio * n - 1e-9)) for n in ns], dtype=np.int64))
        rem.append(draw(st.sampled_from([0.5, 1.0, 2.0, 3.0, 7.0, 12.0])))
        cur.append(a)
        w = draw(st.sampled_from([1.0, 2.0]))
        wts.append(w)
        pen.append(0.0 if a == 0 else draw(st.sampled_from([0.0, 0.01, 0.2])) * w / rem[-1])
        wd.append([draw(st.sampled_from([0.0, 1.0, 2.0])), draw(st.sampled_from([1.0, 3.0]))])
        sd.append([0.0, draw(st.sampled_from([1.0, 2.0]))])
    wd_a, sd_a = np.array(wd), np.array(sd)
    cur_a = np.array(cur, dtype=np.int64)
    ps_now = np.array([p[np.searchsorted(a, c)] if c else 0
                       for p, a, c in zip(ps, allowed, cur_a, strict=True)])
    # capacity at least what the running jobs use now (they fit the cluster), plus some room
    cw = cur_a @ wd_a + np.array([draw(st.integers(0, 8)), draw(st.integers(0, 12))])
    cp = ps_now @ sd_a + np.array([0.0, draw(st.integers(0, 6))])
    return Epoch(ids=tuple(f"j{i}" for i in range(J)), allowed=tuple(allowed),
                 speed=tuple(speed), ps=tuple(ps), remaining=np.array(rem),
                 weight=np.array(wts), penalty=np.array(pen), current=cur_a,
                 worker_demand=wd_a, ps_demand=sd_a, worker_cap=cw.astype(float),
                 ps_cap=cp.astype(float), intervals=intervals,
                 interval_slots=draw(st.sampled_from([1, 2])),
                 anti_starvation=draw(st.booleans()))


def exact(epoch: Epoch) -> tuple[float, np.ndarray]:
    res = solve_mip(epoch, time_limit_s=30.0, mip_rel_gap=0.0)
    assert res.found and res.optimal
    assert feasible(epoch, res.plan)
    assert objective(epoch, res.plan) == pytest.approx(res.objective, abs=1e-6)
    return res.objective, res.plan


@SETTINGS
@given(epoch=epochs())
def test_one_step_mip_equals_brute_force_and_beats_both_greedy_baselines(epoch: Epoch) -> None:
    value, _ = exact(epoch)
    best, _ = brute_force(epoch)
    assert value == pytest.approx(best, abs=1e-6)
    for greedy in (fifo_fill, marginal_gain):
        counts = greedy(epoch)
        if epoch.anti_starvation and not feasible(epoch, counts):
            continue  # the greedy baselines do not know the anti-starvation rule
        assert feasible(epoch, counts)
        assert value >= objective(epoch, counts) - 1e-9


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(epoch=epochs(max_jobs=2, intervals=2))
def test_multi_interval_mip_equals_brute_force(epoch: Epoch) -> None:
    value, _ = exact(epoch)
    best, _ = brute_force(epoch)
    assert value == pytest.approx(best, abs=1e-6)
    # a plan that holds the one-step optimum over both intervals is never better
    one = Epoch(**{**epoch.__dict__, "intervals": 1})
    _, plan1 = exact(one)
    if feasible(epoch, plan1[:, 0]):
        assert value >= objective(epoch, plan1[:, 0]) - 1e-9


def test_progress_cap_keeps_a_nearly_done_running_job_feasible() -> None:
    """A running job with half a worker-slot left still has to hold a count: the MIP stays
    feasible (p <= W caps the credit, not the allocation) and gives the room to the other."""
    one = np.array([1, 2, 4], dtype=np.int64)
    epoch = Epoch(ids=("old", "new"), allowed=(np.array([4]), one), speed=(np.array([4.0]),
                  one.astype(float)), ps=(np.array([0]), np.zeros(3, dtype=np.int64)),
                  remaining=np.array([0.5, 10.0]), weight=np.ones(2), penalty=np.zeros(2),
                  current=np.array([4, 0]), worker_demand=np.array([[1.0], [1.0]]),
                  ps_demand=np.zeros((2, 1)), worker_cap=np.array([6.0]), ps_cap=np.zeros(1))
    value, plan = exact(epoch)
    assert plan[:, 0].tolist() == [4, 2]
    assert value == pytest.approx(1.0 + 0.2)


def test_marginal_gain_prefers_the_job_nearest_completion_and_fifo_fill_the_earliest() -> None:
    ns = np.array([1, 2, 3, 4], dtype=np.int64)
    epoch = Epoch(ids=("early", "late"), allowed=(ns, ns), speed=(ns * 1.0, ns * 1.0),
                  ps=(np.zeros(4, dtype=np.int64),) * 2, remaining=np.array([20.0, 3.0]),
                  weight=np.ones(2), penalty=np.zeros(2), current=np.zeros(2, dtype=np.int64),
                  worker_demand=np.ones((2, 1)), ps_demand=np.zeros((2, 1)),
                  worker_cap=np.array([5.0]), ps_cap=np.zeros(1))
    assert fifo_fill(epoch).tolist() == [4, 1]
    assert marginal_gain(epoch).tolist() == [2, 3]
    value, plan = exact(epoch)
    assert plan[:, 0].tolist() == [2, 3]
    assert value == pytest.approx(2 / 20 + 1.0)


def _never_preempted(result) -> None:  # type: ignore[no-untyped-def]
    slots: dict[str, set[int]] = {}
    for t, job_id, _, role, _ in result.allocations:
        if role == "worker":
            slots.setdefault(job_id, set()).add(t)
    for job_id, ts in slots.items():
        rec = result.records[job_id]
        end = rec.completion if rec.completion is not None else max(ts)
        assert ts == set(range(rec.first_slot, end + 1)), f"{job_id} was pre-empted"


@pytest.mark.parametrize("options", [{}, {"intervals": 2, "interval_slots": 2},
                                     {"anti_starvation": True, "counts": "all"},
                                     {"speedup": "sublinear", "weight": "utility"}])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance=instances())
def test_elastic_policies_never_preempt_a_running_job(options: dict, instance) -> None:  # type: ignore[no-untyped-def,type-arg]
    cluster, specs, horizon = instance
    for name in ("elastic-mip", "greedy-fill", "greedy-gain"):
        _never_preempted(simulate(specs, cluster, make_policy(name, **options), horizon))


def test_anti_starvation_starts_queued_jobs_in_arrival_order() -> None:
    """Without the rule the MIP starts the short later job first; with it, the early one."""
    cluster = Cluster(servers=(
        Server(server_id="w0", pool=Pool.WORKER,
               capacity=Resources(gpu=2, cpu=64, memory_gb=64, bandwidth_gbps=100)),
        Server(server_id="p0", pool=Pool.PS,
               capacity=Resources(cpu=8, memory_gb=64, bandwidth_gbps=100))))
    jobs = [spec("hold", 0, 1, 3, gpu=1), spec("long", 1, 2, 10, gpu=1),
            spec("short", 1, 1, 1, gpu=1)]
    free = simulate(jobs, cluster, make_policy("elastic-mip"), 40)
    fair = simulate(jobs, cluster, make_policy("elastic-mip", anti_starvation=True), 40)
    assert free.records["short"].first_slot < free.records["long"].first_slot
    assert fair.records["long"].first_slot <= fair.records["short"].first_slot


@SETTINGS
@given(epoch=epochs())
def test_density_heuristic_plans_are_feasible_and_never_beat_the_mip(epoch: Epoch) -> None:
    plan = density_fill(epoch)
    if epoch.anti_starvation and not feasible(epoch, plan):
        return  # the heuristic does not know the anti-starvation rule
    assert feasible(epoch, plan)
    assert exact(epoch)[0] >= objective(epoch, plan) - 1e-9


@SETTINGS
@given(epoch=epochs(), fold=st.booleans(), warm=st.booleans())
def test_folded_model_warm_start_and_lp_rounding_keep_the_optimum(epoch: Epoch, fold: bool,
                                                                  warm: bool) -> None:
    start = np.repeat(epoch.current[:, None], epoch.intervals, axis=1) if warm else None
    res = solve_mip(epoch, time_limit_s=30.0, mip_rel_gap=0.0, fold=fold, start=start)
    assert res.found and res.optimal and feasible(epoch, res.plan)
    assert res.objective == pytest.approx(brute_force(epoch)[0], abs=1e-6)
    assert res.bound >= res.objective - 1e-6


@SETTINGS
@given(epoch=epochs(), gap=st.sampled_from([0.02, 0.1, 0.5]))
def test_a_plan_within_the_gap_is_within_it_of_the_true_optimum(epoch: Epoch,
                                                                gap: float) -> None:
    res = solve_mip(epoch, time_limit_s=30.0, mip_rel_gap=gap,
                    start=np.repeat(epoch.current[:, None], epoch.intervals, axis=1))
    best = brute_force(epoch)[0]
    assert res.found and feasible(epoch, res.plan)
    assert res.bound >= best - 1e-6
    if res.optimal:
        assert res.objective >= best - gap * abs(res.objective) - 1e-6


@SETTINGS
@given(epoch=epochs(), fold=st.booleans())
def test_plan_vector_of_a_feasible_plan_is_a_point_worth_its_objective(epoch: Epoch,
                                                                       fold: bool) -> None:
    from psched.policies.elastic_mip import _columns, _folds, _problem, plan_vector

    k = _columns(epoch, _folds(epoch, fold))
    problem = _problem(epoch, k)
    for plan in (marginal_gain(epoch), density_fill(epoch), epoch.current):
        if not feasible(epoch, plan):
            continue
        v = plan_vector(epoch, np.repeat(np.asarray(plan)[:, None], epoch.intervals, axis=1),
                        folded=_folds(epoch, fold))
        assert problem.feasible(v)
        assert -float(problem.c @ v) == pytest.approx(objective(epoch, plan), abs=1e-9)
