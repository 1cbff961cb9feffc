"""The offline optimum: exact against brute force, above every online policy, below its bounds."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psched.core.model import (
    RESOURCES,
    Alloc,
    Cluster,
    Decision,
    Job,
    JobSpec,
    Pool,
    Resources,
    Server,
    ceil_eps,
    resolve_job,
)
from psched.core.simulator import simulate
from psched.core.utility import Utility
from psched.offline.formulation import Formulation, build_model, model_caps, ps_slack, window_tail
from psched.offline.milp import Options, Problem, Solution, scipy_solver
from psched.offline.optimum import (
    lp_bound,
    offline_optimum,
    pooled_bound,
    schedule_vector,
    solve_offline,
)
from psched.policies import available_policies, make_policy
from psched.traces.synth import fig5_instance

# -- tiny instances and an independent brute force ------------------------------------------


def tiny_instance(seed: int) -> tuple[list[Job], Cluster, int]:
    """2-3 jobs, 1-2 worker servers, 1 PS server, 4 slots, N <= 2: small enough to enumerate."""
    rng = np.random.default_rng(seed)
    horizon = 4
    n_w = int(rng.integers(1, 3))
    servers = [Server(server_id=f"w{h}", pool=Pool.WORKER, capacity=Resources(
        gpu=float(rng.integers(2, 4)), cpu=float(rng.integers(3, 7)), bandwidth_gbps=10.0))
        for h in range(n_w)]
    servers.append(Server(server_id="p0", pool=Pool.PS, capacity=Resources(
        cpu=float(rng.integers(2, 6)), bandwidth_gbps=10.0)))
    cluster = Cluster(servers=tuple(servers))
    jobs = []
    n_jobs = 3 if n_w == 1 else 2
    for i in range(n_jobs):
        kind = str(rng.choice(["sigmoid", "linear", "deadline", "constant"]))
        util = Utility(kind=kind, value=float(rng.uniform(1, 100)),
                       decay=float(rng.uniform(0.5, 5)), target=float(rng.integers(2, 5)))
        spec = JobSpec(
            job_id=f"j{i}", arrival=int(rng.integers(0, 2)), epochs=1,
            max_workers=int(rng.integers(1, 3)), minibatches=1, tau_s=1.0, grad_mb=1.0,
            worker_demand=Resources(gpu=float(rng.integers(1, 3)), cpu=float(rng.integers(1, 4)),
                                    bandwidth_gbps=float(rng.uniform(0.5, 2))),
            ps_demand=Resources(cpu=float(rng.integers(1, 3)), bandwidth_gbps=2.0),
            utility=util)
        window = horizon - spec.arrival - int(rng.integers(0, 2))
        jobs.append(Job(spec=spec, work=int(rng.integers(2, 5)), window=window))
    return jobs, cluster, horizon


def trap_instance(seed: int) -> tuple[list[Job], Cluster, int]:
    """Shaped like ``shared/repro/highs_presolve.py`` (the model HiGHS 1.12's presolve got
    wrong): N = 2, W in 2..4, PS ratio below 1/2 (a fractional PS slack), two worker servers
    holding one or two workers each, one PS server, T = 3. scipy 1.17.1 with presolve returns a
    wrong "optimum" on 11 of seeds 0..299 (0, 25, 37, 83, 93, 105, 127, 135, 136, 212, 283)."""
    rng = np.random.default_rng(seed)
    horizon = 3
    servers = [Server(server_id=f"w{h}", pool=Pool.WORKER, capacity=Resources(
        gpu=float(rng.integers(1, 3)), cpu=4.0, bandwidth_gbps=10.0)) for h in range(2)]
    servers.append(Server(server_id="p0", pool=Pool.PS, capacity=Resources(
        cpu=float(rng.integers(1, 3)), bandwidth_gbps=10.0)))
    jobs = []
    for i in range(int(rng.integers(1, 3))):
        util = Utility(kind=str(rng.choice(["sigmoid", "linear", "deadline"])),
                       value=float(rng.uniform(10, 100)), decay=float(rng.uniform(0.5, 5)),
                       target=float(rng.integers(1, 4)))
        spec = JobSpec(job_id=f"c{i}", arrival=int(rng.integers(0, 2)) * i, epochs=1,
                       max_workers=2, minibatches=1, tau_s=1.0, grad_mb=1.0,
                       worker_demand=Resources(gpu=1.0, cpu=float(rng.integers(1, 3)),
                                               bandwidth_gbps=float(rng.uniform(0.1, 0.9))),
                       ps_demand=Resources(cpu=1.0, bandwidth_gbps=2.0), utility=util)
        jobs.append(Job(spec=spec, work=int(rng.integers(2, 5)), window=horizon - spec.arrival))
    return jobs, Cluster(servers=tuple(servers)), horizon


#: trap seeds on which the old path (scipy 1.17.1, presolve on) was wrong, and a few others
TRAP_SEEDS = (0, 25, 37, 83, 93, 105, 127, 1, 2, 3)


def _placements(n: int, n_srv: int) -> list[tuple[int, ...]]:
    return [p for p in itertools.product(range(n + 1), repeat=n_srv) if sum(p) == n]


def job_schedules(job: Job, cluster: Cluster, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """Every schedule that completes (usage slots x servers x R, flattened) and its utility.

    Schedules that never complete, or run after completing, are dominated by one without
    those workers (never more utility, never less room) and are left out; "not run" is row 0.
    """
    wi, ki = cluster.indices(Pool.WORKER), cluster.indices(Pool.PS)
    w, s = job.spec.worker_demand.as_array(), job.spec.ps_demand.as_array()
    n_srv, n_r = len(cluster.servers), len(RESOURCES)
    options: list[tuple[int, np.ndarray]] = [(0, np.zeros((n_srv, n_r)))]
    for n in range(1, job.max_workers + 1):
        for yw in _placements(n, wi.size):
            for n_ps in range(job.ps_needed(n), n + 1):
                for zp in _placements(n_ps, ki.size):
                    u = np.zeros((n_srv, n_r))
                    u[wi] += np.outer(yw, w)
                    u[ki] += np.outer(zp, s)
                    options.append((n, u))
    slots = list(range(job.arrival, job.last_slot + 1))
    usages, utils = [np.zeros((horizon, n_srv, n_r)).ravel()], [0.0]
    for combo in itertools.product(range(len(options)), repeat=len(slots)):
        done, total = None, 0
        for t, o in zip(slots, combo, strict=True):
            if done is not None and options[o][0] > 0:
                break
            total += options[o][0]
            if done is None and total >= job.work:
                done = t
        else:
            if done is None:
                continue
            u = np.zeros((horizon, n_srv, n_r))
            for t, o in zip(slots, combo, strict=True):
                u[t] = options[o][1]
            usages.append(u.ravel())
            utils.append(job.utility_at(done - job.arrival + 1))
    return np.array(usages), np.array(utils)


def brute_optimum(jobs: list[Job], cluster: Cluster, horizon: int) -> float:
    """Best total utility over every combination of per-job schedules that fits."""
    cap = np.broadcast_to(cluster.capacity, (horizon, *cluster.capacity.shape)).ravel()
    use, val = np.zeros((1, cap.size)), np.zeros(1)
    for job in jobs:
        u, f = job_schedules(job, cluster, horizon)
        tot = (use[:, None, :] + u[None, :, :]).reshape(-1, cap.size)
        v = (val[:, None] + f[None, :]).ravel()
        ok = np.all(tot <= cap + 1e-9, axis=1)
        use, val = tot[ok], v[ok]
    return float(val.max())


def test_tiny_instances_are_contended() -> None:
    """Guard against a vacuous comparison: jobs must compete for the servers."""
    contended = 0
    for seed in range(24):
        jobs, cluster, horizon = tiny_instance(seed)
        joint = brute_optimum(jobs, cluster, horizon)
        alone = sum(brute_optimum([j], cluster, horizon) for j in jobs)
        contended += alone > joint + 1e-9
    assert contended >= 8


@pytest.mark.parametrize("seed", range(24))
def test_milp_optimum_equals_brute_force(seed: int) -> None:
    jobs, cluster, horizon = tiny_instance(seed)
    res = solve_offline(jobs, cluster, horizon)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(brute_optimum(jobs, cluster, horizon), abs=1e-6)
    assert res.bound >= res.objective - 1e-6


@pytest.mark.parametrize("seed", TRAP_SEEDS)
def test_milp_optimum_equals_brute_force_on_presolve_traps(seed: int) -> None:
    jobs, cluster, horizon = trap_instance(seed)
    best = brute_optimum(jobs, cluster, horizon)
    for presolve in (True, False):
        res = solve_offline(jobs, cluster, horizon, presolve=presolve)
        assert res.status == "optimal" and not res.retried
        assert res.objective == pytest.approx(best, abs=1e-6)
    lp = lp_bound(jobs, cluster, horizon, known=best)
    assert lp.status == "lp" and lp.bound >= best - 1e-6


@pytest.mark.parametrize("seed", TRAP_SEEDS[:7])
def test_guard_makes_the_old_solver_exact_on_presolve_traps(seed: int) -> None:
    """The old path (scipy's HiGHS 1.12), told the brute-force value is feasible, is re-solved
    without presolve where it erred and then agrees with brute force."""
    jobs, cluster, horizon = trap_instance(seed)
    best = brute_optimum(jobs, cluster, horizon)
    res = solve_offline(jobs, cluster, horizon, solver=scipy_solver, known=best)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(best, abs=1e-6)


@pytest.mark.parametrize("form", [Formulation(cumulative_work=True), Formulation(symmetry=True),
                                  Formulation(cumulative_work=True, symmetry=True),
                                  Formulation(aggregate=False), Formulation(alive_vars=True),
                                  Formulation(alive_vars=True, cumulative_work=True)],
                         ids=["cumulative", "symmetry", "both", "per-server", "alive",
                              "alive-cumulative"])
@pytest.mark.parametrize("seed", [0, 3, 5, 8, 25, 43])
def test_strengthened_formulations_keep_the_optimum(form: Formulation, seed: int) -> None:
    jobs, cluster, horizon = (tiny_instance if seed % 2 else trap_instance)(seed)
    best = brute_optimum(jobs, cluster, horizon)
    res = solve_offline(jobs, cluster, horizon, formulation=form)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(best, abs=1e-6)
    assert lp_bound(jobs, cluster, horizon, formulation=form).bound >= best - 1e-6


class _WrongOptimum:
    """A stub solver that claims the empty schedule is optimal, whatever presolve."""

    def __call__(self, problem: Problem, options: Options) -> Solution:
        x = np.zeros(problem.n_cols)
        return Solution(status="optimal", x=x, objective=0.0, dual_bound=0.0, gap=0.0,
                        solve_s=0.0, cpu_s=0.0, presolve=options.presolve, backend="stub")


def test_offline_optimum_below_a_policy_is_reported_suspect() -> None:
    specs, cluster, horizon = small_fig5(0)
    jobs = [j for j in (resolve_job(s, cluster.slot_seconds, horizon) for s in specs)
            if j.window > 0]
    got = simulate(specs, cluster, make_policy("srtf"), horizon)
    util = sum(r.utility for r in got.records.values())
    assert util > 0
    res = solve_offline(jobs, cluster, horizon, known=util - window_tail(jobs, horizon),
                        solver=_WrongOptimum())
    assert res.status == "suspect" and res.retried
    lp = lp_bound(jobs, cluster, horizon, known=util, solver=_WrongOptimum())
    assert lp.status == "suspect"
    fine = solve_offline(jobs, cluster, horizon, known=util - window_tail(jobs, horizon),
                         incumbent=got.allocations)
    assert fine.status == "optimal" and not fine.retried


@given(ratio=st.floats(0.01, 1.0), n=st.integers(1, 100))
@settings(max_examples=200, deadline=None)
def test_ps_slack_linearises_the_ps_ceiling_exactly(ratio: float, n: int) -> None:
    delta = ps_slack(ratio, n)
    for k in range(n + 1):
        least = min(z for z in range(k + 2) if z >= ratio * k - delta)
        assert least == ceil_eps(ratio * k)


# -- Fig. 5 instances: the optimum against policies and bounds ---------------------------------


class Replay:
    """A policy that plays a fixed schedule (the offline optimum's)."""

    name = "replay"
    commits_on_arrival = False

    def __init__(self, schedule: dict[str, dict[int, Alloc]]) -> None:
        self.schedule = schedule

    def start(self, ctx: Any) -> None:
        pass

    def on_arrival(self, job: Job, view: Any) -> Decision:
        return Decision(admitted=job.job_id in self.schedule)

    def plan(self, view: Any) -> dict[str, Alloc]:
        return {j: self.schedule[j][view.t] for j in view.active if view.t in self.schedule[j]}

    def report(self) -> dict[str, Any]:
        return {}


def small_fig5(seed: int) -> tuple[list[JobSpec], Cluster, int]:
    n = (3, 4)[seed % 2]
    specs, cluster = fig5_instance(n, seed=seed, n_jobs=6, slots=6)
    return specs, cluster, 6


@pytest.mark.parametrize("seed", range(4))
def test_optimum_schedule_replays_to_its_utility(seed: int) -> None:
    specs, cluster, horizon = small_fig5(seed)
    opt = offline_optimum(specs, cluster, horizon)
    res = simulate(specs, cluster, Replay(opt.schedule), horizon)
    got = sum(r.utility for r in res.records.values())
    assert got == pytest.approx(opt.objective, abs=1e-9)
    assert {j: r.completion for j, r in res.records.items() if r.completion is not None} \
        == opt.completion


@pytest.mark.parametrize("seed", range(3))
def test_every_policy_schedule_is_a_point_of_the_model_worth_its_utility(seed: int) -> None:
    """:func:`schedule_vector` (the warm start): feasible, valued at the in-window utility."""
    specs, cluster, horizon = small_fig5(seed)
    jobs = [j for j in (resolve_job(s, cluster.slot_seconds, horizon) for s in specs)
            if j.window > 0]
    for form in (Formulation(), Formulation(cumulative_work=True),
                 Formulation(aggregate=False), Formulation(alive_vars=True)):
        cap_w, cap_p, _, _ = model_caps(jobs, cluster, form)
        model = build_model(jobs, cap_w, cap_p, horizon, "job", form)
        for name in available_policies():
            res = simulate(specs, cluster, make_policy(name), horizon)
            x = schedule_vector(model, jobs, cluster, res.allocations)
            assert model.problem.feasible(x), name
            got = sum(r.utility for r in res.records.values())
            assert -float(model.problem.c @ x) <= got + 1e-9
            assert -float(model.problem.c @ x) >= got - window_tail(jobs, horizon) - 1e-9


@pytest.mark.parametrize("seed", range(3))
def test_optimum_dominates_every_online_policy(seed: int) -> None:
    specs, cluster, horizon = small_fig5(seed)
    opt_job = offline_optimum(specs, cluster, horizon)
    opt_all = offline_optimum(specs, cluster, horizon, window="horizon")
    jobs = [resolve_job(s, cluster.slot_seconds, horizon) for s in specs]
    assert opt_job.objective <= opt_all.objective + 1e-6
    assert opt_all.objective <= opt_job.objective + window_tail(jobs, horizon) + 1e-6
    for name in available_policies():
        res = simulate(specs, cluster, make_policy(name), horizon)
        got = sum(r.utility for r in res.records.values())
        assert got <= opt_all.objective + 1e-6, name


@pytest.mark.parametrize("seed", range(10))
def test_bounds_dominate_the_optimum(seed: int) -> None:
    specs, cluster, horizon = small_fig5(seed)
    jobs = [j for j in (resolve_job(s, cluster.slot_seconds, horizon) for s in specs)
            if j.window > 0]
    opt = solve_offline(jobs, cluster, horizon)
    opt_all = solve_offline(jobs, cluster, horizon, window="horizon")
    lp = lp_bound(jobs, cluster, horizon, known=opt.objective)
    pooled = lp_bound(jobs, cluster, horizon, pooled=True, known=opt.objective)
    assert opt.status == "optimal" and lp.status == pooled.status == "lp"
    assert lp.bound >= opt.objective - 1e-6
    assert pooled.bound >= lp.bound - 1e-6
    oasis = simulate(specs, cluster, make_policy("oasis"), horizon)
    cert = oasis.report["dual_bound"]
    assert cert >= opt_all.objective - 1e-6
    assert cert >= opt.objective - 1e-6
    assert oasis.report["dual_bound_final_prices"] >= opt_all.objective - 1e-6
    sharp = cert - oasis.report["dual_tail_utility"] + window_tail(jobs, horizon)
    assert sharp >= opt_all.objective - 1e-6


@pytest.mark.parametrize("n", [3, 12])
def test_fig5_instance_is_solved_to_proven_optimality(n: int) -> None:
    specs, cluster = fig5_instance(n, seed=7)
    opt = offline_optimum(specs, cluster, 10, time_limit=300)
    assert opt.status == "optimal" and opt.gap <= 1e-6
    cert = simulate(specs, cluster, make_policy("oasis"), 10).report["dual_bound"]
    assert cert >= opt.objective - 1e-6


def test_time_limit_returns_best_schedule_and_bound() -> None:
    specs, cluster = fig5_instance(12, seed=3, n_jobs=20, slots=20)
    res = offline_optimum(specs, cluster, 20, time_limit=0.2)
    assert res.status in ("optimal", "time_limit")
    assert res.bound >= res.objective - 1e-6
    assert math.isfinite(res.bound)
    assert res.objective == pytest.approx(sum(res.utility.values()))
    if res.status == "optimal":
        assert res.gap <= 1e-6


def test_unknown_window_is_refused() -> None:
    jobs, cluster, horizon = tiny_instance(0)
    with pytest.raises(ValueError, match="window"):
        solve_offline(jobs, cluster, horizon, window="forever")


def test_pooled_bound_dominates_every_policy_and_names_the_best() -> None:
    specs, cluster, horizon = small_fig5(1)
    utilities = {}
    for name in available_policies():
        res = simulate(specs, cluster, make_policy(name), horizon)
        utilities[name] = sum(r.utility for r in res.records.values())
    out = pooled_bound(specs, cluster, horizon, utilities=utilities)
    assert out["status"] == "lp"
    assert out["bound"] >= max(utilities.values()) - 1e-6
    assert out["best_policy"] == max(utilities, key=lambda k: utilities[k])
    opt = offline_optimum(specs, cluster, horizon, window="horizon")
    assert out["bound"] >= opt.objective - 1e-6
