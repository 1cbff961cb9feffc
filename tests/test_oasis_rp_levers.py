"""oasis-rp's queue (a job not admitted is held and searched again at each boundary) and
own-usage pricing, and the loop's hook for held jobs the queue uses.

The hook is tested with a plain re-planning policy (no OASiS) so that its semantics -- held,
admitted later, rejected when the window closes or the run ends, ``decided`` in ``jobs.csv``
-- are pinned independently of any pricing; oasis-rp's options are then run through the
property suite (rules, promises re-derived from the allocation rows), the certificate against
the exact optimum, and the own-usage search against brute force.
"""

from __future__ import annotations

import csv
import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.integrate import quad
from strategies import Instance, instances
from test_oasis_certificate import (
    assert_rp_certificate_bounds_the_optimum,
    tiny_instance,
)
from test_oasis_rp import _server, _spec, check_promises
from test_policy_properties import check_schedule

from psched.core.arrivals import TraceArrivals
from psched.core.executor import SlotReport
from psched.core.loop import SchedulerLoop
from psched.core.model import Cluster, Decision, Job, JobSpec, Pool, SlotPlan, resolve_job
from psched.core.policy import View
from psched.core.promises import broken_promises_in
from psched.core.records import HELD, RunResult
from psched.core.simulator import simulate
from psched.core.utility import Utility
from psched.oasis.ledger import JobInputs
from psched.oasis.prices import log_prices, params_from_jobs
from psched.oasis.schedule import slot_costs
from psched.policies import make_policy
from psched.policies.fifo import FifoPolicy
from psched.policies.oasis_rp.book import PlanLedger
from psched.policies.oasis_rp.latest import search_latest
from psched.policies.oasis_rp.own import search_own
from psched.results.output import write_run

OPTIONS = [
    {"price_source": "hindsight"},
    {},  # the default
    {"promise_rtol": 0.0},
    {"repack_gap": 1.0},
]
SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _ids(v: dict[str, object]) -> str:
    return ",".join(f"{k}={v[k]}" for k in sorted(v)) or "default"


# ---------------------------------------------------------------- the loop's hook

class _HoldUntil(FifoPolicy):
    """FIFO that holds every arrival and admits the held jobs from slot ``at`` on, at most
    ``per_slot`` per boundary; a job named ``no*`` is rejected for good when first seen."""

    name = "hold-until"

    def __init__(self, at: int, per_slot: int = 99) -> None:
        super().__init__()
        self.at, self.per_slot = at, per_slot
        self.seen: list[tuple[int, tuple[str, ...]]] = []

    def on_arrival(self, job: Job, view: View) -> Decision:
        return Decision(admitted=False, reason="waiting", hold=True)

    def admit_held(self, jobs: Sequence[Job], view: View) -> Mapping[str, Decision]:
        self.seen.append((view.t, tuple(j.job_id for j in jobs)))
        out: dict[str, Decision] = {}
        for j in jobs:
            if j.job_id.startswith("no"):
                out[j.job_id] = Decision(admitted=False, reason="never")
        if view.t >= self.at:
            for j in [j for j in jobs if j.job_id not in out][: self.per_slot]:
                out[j.job_id] = Decision(admitted=True)
        return out


def _flat_jobs(ids: Sequence[str], arrival: int = 0) -> list[JobSpec]:
    return [_spec(j, arrival, 2, 1, Utility(kind="constant", value=5.0)) for j in ids]


def _small_cluster() -> Cluster:
    return Cluster(servers=(_server("w0", Pool.WORKER, 4), _server("p0", Pool.PS, 0)))


def test_held_jobs_are_admitted_at_a_later_boundary_and_recorded_then() -> None:
    pol = _HoldUntil(at=3, per_slot=1)
    loop = SchedulerLoop(cluster=_small_cluster(), policy=pol, horizon=10,
                         arrivals=TraceArrivals(_flat_jobs(["a", "b", "no1"])))
    decided = []
    loop.on_decision.append(decided.append)
    for _ in range(2):
        loop.step()
    recs = loop.state.records
    assert [recs[j].reason for j in ("a", "b")] == [HELD, HELD]
    assert not recs["a"].admitted and recs["a"].decided is None
    assert recs["no1"].reason == "never" and recs["no1"].decided == 0
    res = loop.run()
    a, b = res.records["a"], res.records["b"]
    assert (a.admitted, a.decided, a.reason) == (True, 3, "")
    assert (b.admitted, b.decided) == (True, 4)  # one per boundary
    assert a.completion is not None and a.first_slot == 3
    # the arrival decisions (held), then the deferred ones, each once
    assert [(d.job_id, d.slot, d.admitted, d.reason) for d in decided] == [
        ("a", 0, False, HELD), ("b", 0, False, HELD), ("no1", 0, False, HELD),
        ("no1", 0, False, "never"), ("a", 3, True, ""), ("b", 4, True, "")]
    assert pol.seen[0] == (0, ("a", "b", "no1"))  # in arrival order, from the arrival slot
    assert res.records["no1"].decided == 0


def test_a_held_job_is_rejected_with_its_reason_when_its_window_closes() -> None:
    spec = _spec("d", 0, 2, 1, Utility(kind="deadline", value=5.0, target=3.0))
    pol = _HoldUntil(at=99)
    res = SchedulerLoop(cluster=_small_cluster(), policy=pol, horizon=10,
                        arrivals=TraceArrivals([spec])).run()
    rec = res.records["d"]
    last = rec.job.last_slot
    assert last < 9
    assert (rec.admitted, rec.reason, rec.decided) == (False, "waiting", last + 1)
    assert [t for t, _ in pol.seen] == list(range(last + 1))  # only while the window is open


def test_jobs_still_held_at_the_end_of_the_run_are_rejected_then() -> None:
    res = SchedulerLoop(cluster=_small_cluster(), policy=_HoldUntil(at=99), horizon=6,
                        arrivals=TraceArrivals(_flat_jobs(["a"]))).run()
    rec = res.records["a"]
    assert (rec.admitted, rec.reason, rec.decided) == (False, "waiting", 6)


def test_hold_is_a_plain_rejection_for_a_policy_without_the_hook() -> None:
    class _HoldOnly(FifoPolicy):
        name = "hold-only"

        def on_arrival(self, job: Job, view: View) -> Decision:
            return Decision(admitted=False, reason="full", hold=True)

    res = simulate(_flat_jobs(["a"]), _small_cluster(), _HoldOnly(), 6)
    assert (res.records["a"].reason, res.records["a"].decided) == ("full", 0)


def test_the_hook_may_not_decide_a_job_that_is_not_held() -> None:
    class _Bad(_HoldUntil):
        def admit_held(self, jobs: Sequence[Job], view: View) -> Mapping[str, Decision]:
            return {"ghost": Decision(admitted=True)}

    loop = SchedulerLoop(cluster=_small_cluster(), policy=_Bad(at=0), horizon=4,
                         arrivals=TraceArrivals(_flat_jobs(["a"])))
    with pytest.raises(ValueError, match="ghost"):
        loop.step()


def test_decided_is_written_to_jobs_csv(tmp_path: Path) -> None:
    cluster = _small_cluster()
    res = simulate(_flat_jobs(["a", "b"]), cluster, _HoldUntil(at=2, per_slot=1), 8)
    write_run(tmp_path / "out", {}, cluster, {"hold-until": res}, plots=False, report=False)
    with (tmp_path / "out" / "hold-until" / "jobs.csv").open() as fh:
        rows = {r["job_id"]: r for r in csv.DictReader(fh)}
    assert (rows["a"]["decided"], rows["b"]["decided"]) == ("2", "3")
    assert rows["a"]["admitted"] == "1"


# ---------------------------------------------------------------- oasis-rp, the queue

class _Ahead:
    """A simulated executor on which one job does ``factor`` times its planned work in one
    slot (reality ahead of the plan: the job finishes early and frees its booked slots)."""

    def __init__(self, job_id: str, slot: int, factor: float) -> None:
        self.job_id, self.slot, self.factor = job_id, slot, factor

    def apply(self, t: int, plan: SlotPlan, jobs: Mapping[str, Job]) -> SlotReport:
        return SlotReport(slot=t, progress={
            j: float(a.n_workers) * (self.factor if (j, t) == (self.job_id, self.slot) else 1)
            for j, a in plan.items() if a.n_workers})

    def release(self, job_id: str) -> None:
        return None

    def close(self) -> None:
        return None


def _held_pair() -> tuple[Cluster, list[JobSpec]]:
    """A dense job books every GPU for slots 0-1, promised slot 1 (its deadline: no slack to
    re-pack); an urgent job (deadline: slot 1) arrives in slot 0 with it and finds no room."""
    busy = _spec("busy", 0, 4, 2, Utility(kind="deadline", value=100.0, target=2.0))
    urgent = _spec("urgent", 0, 4, 1, Utility(kind="deadline", value=50.0, target=2.0))
    return _small_cluster(), [busy, urgent]


@pytest.mark.parametrize("price_source", ["online", "hindsight"])
def test_a_held_job_is_admitted_by_the_queue_when_room_frees(price_source: str) -> None:
    """The busy job finishes in slot 0 (twice the planned progress): its slot 1 frees, and
    the urgent job, held since it found no room on arrival, is admitted by the queue at the
    boundary of slot 1 and completes in it. Its policy promises slot 1; the promise stated is
    slot 2, the slot after its first: on an executor that is not the model, nothing of its
    workload was measured (busy's one slot finished it, which tells no speed)."""
    cluster, specs = _held_pair()
    loop = SchedulerLoop(cluster=cluster, horizon=6, arrivals=TraceArrivals(specs),
                         policy=make_policy("oasis-rp", price_source=price_source),
                         executor=_Ahead("busy", 0, 2.0), known_jobs=specs)
    res = loop.run()
    urgent = res.records["urgent"]
    assert res.records["busy"].completion == 0
    assert (urgent.admitted, urgent.decided, urgent.promised) == (True, 1, 2)
    assert urgent.completion == 1 and urgent.utility == 50.0
    assert res.report["queue_admitted"] == 1 and res.report["queue_searches"] >= 1


def test_a_held_job_that_never_finds_room_is_rejected_when_its_window_closes() -> None:
    """Without the early finish the urgent job finds no room at any boundary of its window
    (the busy job's): held, searched again at each boundary, rejected the slot after its
    window's last with its reason."""
    cluster, specs = _held_pair()
    res = simulate(specs, cluster, make_policy("oasis-rp"), 6)
    urgent = res.records["urgent"]
    assert (urgent.admitted, urgent.reason, urgent.decided) == (
        False, "payoff<=0", urgent.job.last_slot + 1)
    assert res.report["queue_admitted"] == 0 and res.report["queue_searches"] >= 1
    # the executor's progress is not the allocation rows' (it ran ahead), so the promises are
    # checked on the loop's measured completions here
    assert all(r.completion is not None and r.completion <= r.promised
               for r in res.records.values() if r.admitted)


@pytest.mark.parametrize("options", OPTIONS, ids=_ids)
@SETTINGS
@given(instance=instances())
def test_every_promise_is_kept_and_every_rule_holds_with_each_lever(
        options: dict[str, object], instance: Instance) -> None:
    run_keeping_every_promise(options, instance)


def run_keeping_every_promise(options: dict[str, object], instance: Instance) -> RunResult:
    """``oasis-rp`` with ``options`` on ``instance`` (seed 3), checked: capacity and PS rules,
    no broken promise, nobody left held, and every promised job admitted, promised between
    its admission and its promise (on admission, or later at its commit point) and completed
    by it (:func:`check_promises`)."""
    cluster, specs, horizon = instance
    result = simulate(specs, cluster, make_policy("oasis-rp", **options), horizon, seed=3)
    check_schedule(result, cluster, horizon)
    check_promises(result)
    for rec in result.records.values():
        assert rec.reason != HELD  # nobody is left held after the run
    return result



@pytest.mark.parametrize("options", OPTIONS[1:3], ids=_ids)
@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(instance=instances(max_jobs=6, max_horizon=12))
def test_promises_checked_from_the_output_files_with_each_lever(
        tmp_path_factory: pytest.TempPathFactory, options: dict[str, object],
        instance: Instance) -> None:
    cluster, specs, horizon = instance
    res = simulate(specs, cluster, make_policy("oasis-rp", **options), horizon)
    out = tmp_path_factory.mktemp("run") / "out"
    write_run(out, {}, cluster, {"oasis-rp": res}, plots=False, report=False)
    assert broken_promises_in(out / "oasis-rp") == []


@pytest.mark.parametrize("options", OPTIONS, ids=_ids)
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(inst=tiny_instance())
def test_certificate_bounds_the_exact_optimum_with_each_lever(
        options: dict[str, object], inst: tuple[list[Job], Cluster]) -> None:
    jobs, cluster = inst
    assert_rp_certificate_bounds_the_optimum(jobs, cluster, options)


@pytest.mark.parametrize("options", OPTIONS[:3], ids=_ids)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance=instances())
def test_same_seed_same_run_with_each_lever(options: dict[str, object],
                                            instance: Instance) -> None:
    cluster, specs, horizon = instance
    runs = [simulate(specs, cluster, make_policy("oasis-rp", **options), horizon, seed=2)
            for _ in range(2)]
    assert runs[0].allocations == runs[1].allocations
    assert [(r.admitted, r.promised, r.decided) for r in runs[0].records.values()] == [
        (r.admitted, r.promised, r.decided) for r in runs[1].records.values()]


@pytest.mark.parametrize("bad", [{"own_price": "after"}, {"defer_limit": 8}, {"defer": True},
                                 {"repack": False}, {"u_worker": 1.0}])
def test_a_removed_option_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(TypeError):
        make_policy("oasis-rp", **bad)


# ---------------------------------------------------------------- lever (f): exactness

def _own_unit_cost(price_usage: np.ndarray, cap: np.ndarray, log_u: np.ndarray, log_l: float,
                   demand: np.ndarray, norm: np.ndarray, k: int, log_scale: float) -> float:
    """The k-th container's own-usage price on one server, from the price curve itself: its
    numerical integral over the container's stretch."""
    total = 0.0
    for r in np.flatnonzero(demand > 0):
        def p(x: float, r: int = r) -> float:
            use = price_usage.copy()
            use[r] = x
            return float(np.exp(log_prices(use[None, :], cap[None, :], log_u, log_l)[0, r]
                                - log_scale))
        lo, hi = price_usage[r] + (k - 1) * demand[r], price_usage[r] + k * demand[r]
        total += norm[r] * quad(p, lo, hi, epsabs=0, epsrel=1e-11)[0] / demand[r]
    return total


def _cheapest_split(ledger: PlanLedger, inp: JobInputs, pool_no: int, i: int,
                    k: int) -> float:
    """The least own-usage cost of ``k`` containers of one pool in window slot ``i``, over
    every split across the pool's servers."""
    pool = (inp.workers, inp.ps)[pool_no]
    cap = ledger.capacity[pool_no]
    best = math.inf
    for split in itertools.product(range(k + 1), repeat=pool.servers.size):
        if sum(split) != k:
            continue
        cost = 0.0
        for h, m in enumerate(split):
            if m and np.any(m * pool.demand > pool.resid[i, h] + 1e-9):
                cost = math.inf
                break
            use = cap[h] - pool.resid[i, h]
            cost += sum(_own_unit_cost(use, cap[h], ledger.params.log_u[pool_no],
                                       ledger.params.log_l[pool_no], pool.demand, pool.norm,
                                       kk, ledger.log_scale)
                        for kk in range(1, m + 1))
        best = min(best, cost)
    return best


def _brute_own(ledger: PlanLedger, job: Job) -> float:
    """Best ``f(d) - own-usage cost`` over every schedule and every split of the workers and
    PS over the servers, by enumeration (0 if none is positive)."""
    inp = ledger.inputs(job)
    slot_cost = [[0.0] + [_cheapest_split(ledger, inp, 0, i, n)
                          + _cheapest_split(ledger, inp, 1, i, int(inp.ps_needed[n]))
                          for n in range(1, job.max_workers + 1)]
                 for i in range(inp.n_slots)]
    top = 0.0
    for counts in itertools.product(range(job.max_workers + 1), repeat=inp.n_slots):
        if sum(counts) != job.work:
            continue
        last = max(i for i, c in enumerate(counts) if c)
        cost = sum(slot_cost[i][c] for i, c in enumerate(counts))
        top = max(top, float(inp.util[last]) - cost)
    return top


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_own_usage_search_finds_the_brute_force_optimum(data: st.DataObject) -> None:
    """The exact search with own-usage prices agrees with enumeration of every schedule and
    split on tiny cases (random background usage on two worker servers and one PS server)."""
    cluster = Cluster(servers=(_server("w0", Pool.WORKER, 4), _server("w1", Pool.WORKER, 2),
                               _server("p0", Pool.PS, 0)))
    n = data.draw(st.integers(1, 3))
    f = data.draw(st.integers(1, 3))
    util = Utility(kind="sigmoid", value=data.draw(st.floats(1, 100)),
                   decay=data.draw(st.floats(0, 3)), target=float(f + 1))
    spec = _spec("j", 0, n, f, util)
    job = resolve_job(spec, 3600.0, 3)
    other = resolve_job(_spec("o", 0, 4, 1, Utility(kind="constant", value=3.0)), 3600.0, 3)
    params = params_from_jobs([job, other], cluster, 3)
    ledger = PlanLedger(cluster, 3, params)
    for t in range(3):
        for pool, arr in enumerate(ledger.usage):
            frac = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.25, 0.5]),
                                               min_size=arr.shape[1], max_size=arr.shape[1])))
            arr[t] = frac[:, None] * ledger.capacity[pool]
    ledger.refresh_runs()  # usage written directly: the run boundaries must be recomputed
    got = search_own(ledger, job, start=0, work=job.work, deadline=job.last_slot)
    want = _brute_own(ledger, job)
    assert math.isclose(max(got.payoff, 0.0), want, rel_tol=1e-7, abs_tol=1e-12)
    if got.schedule:
        assert ledger.fits(job, got.schedule)
        assert sum(a.n_workers for a in got.schedule.values()) == job.work


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_latest_search_completes_at_the_latest_feasible_slot(data: st.DataObject) -> None:
    """``search_latest`` (the re-pack's second order) completes at the latest slot any feasible
    schedule can, by enumeration of every count vector on tiny cases, and fits."""
    cluster = Cluster(servers=(_server("w0", Pool.WORKER, 4), _server("w1", Pool.WORKER, 2),
                               _server("p0", Pool.PS, 0)))
    n, f = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    job = resolve_job(_spec("j", 0, n, f, Utility(kind="constant", value=9.0)), 3600.0, 4)
    ledger = PlanLedger(cluster, 4, params_from_jobs([job], cluster, 4))
    for t in range(4):
        frac = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.5, 0.75, 1.0]),
                                           min_size=2, max_size=2)))
        ledger.usage[0][t] = frac[:, None] * ledger.capacity[0]
    ledger.refresh_runs()  # usage written directly: the run boundaries must be recomputed
    deadline = data.draw(st.integers(0, 3))
    got = search_latest(ledger, job, start=0, work=job.work, deadline=deadline)
    costs = slot_costs(ledger.inputs(job))
    last = min(deadline, job.last_slot)
    want = max((max(i for i, c in enumerate(v) if c)
                for v in itertools.product(range(n + 1), repeat=last + 1)
                if sum(v) == job.work and all(np.isfinite(costs[i, c]) for i, c in enumerate(v))),
               default=None)
    assert got.completion == want
    if got.schedule:
        assert ledger.fits(job, got.schedule)
        assert sum(a.n_workers for a in got.schedule.values()) == job.work
