"""The loop's rules when reality departs from the plans (``psched.core.keeping``): no
admitted job is ever dropped, a promise that can no longer be kept is re-stated before its
slot, and with reality as the model nothing changes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_oasis_rp import _server, _spec

from psched.core.executor import SimulatedExecutor, SlotReport
from psched.core.model import Cluster, Job, Pool, SlotPlan, Utility
from psched.core.reality import Reality
from psched.core.simulator import simulate
from psched.policies import make_policy
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

POLICIES = ["oasis", "oasis-rp", "fifo", "srtf"]
ARRIVAL_SLOTS = 40  # oasis_paper_jobs(slots=60) arrives in [0, 40)
HORIZON = 3 * ARRIVAL_SLOTS


def _run(policy: str, n: int, seed: int, reality: Reality):
    specs, _ = oasis_paper_jobs(n, seed=seed, slots=60)
    return simulate(specs, oasis_paper_cluster(seed=seed), make_policy(policy), HORIZON,
                    seed=seed, executor=None if reality.exact else reality.executor())


realities = st.builds(Reality, rate=st.floats(0.8, 1.2), sigma_job=st.floats(0.0, 0.2),
                      sigma_slot=st.floats(0.0, 0.1), startup=st.floats(0.0, 0.5),
                      seed=st.integers(0, 1000))


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reality=realities, n=st.integers(8, 24), seed=st.integers(0, 500))
def test_no_admitted_job_is_dropped_and_every_restatement_moves_a_promise_later(
        policy, reality, n, seed):
    res = _run(policy, n, seed, reality)
    for rec in res.records.values():
        if not rec.admitted:
            continue
        assert not rec.reason, f"{rec.job.job_id} dropped: {rec.reason}"
        assert all(old < new for _at, old, new in rec.restated)
        if rec.restated:
            assert rec.promised == rec.restated[-1][2]
        if rec.completion is not None and rec.completion > rec.job.last_slot:
            assert rec.background > 0  # work past its window is counted apart


@pytest.mark.parametrize("policy", ["oasis", "oasis-rp"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rate=st.floats(0.8, 1.2), sigma_job=st.sampled_from([0.0]) | st.floats(0.0, 0.2),
       startup=st.floats(0.0, 0.5),
       n=st.integers(8, 30), seed=st.integers(0, 500))
# once missed: a promise naming an unseen job's first slot; one a plan gave fewer workers than
# its schedule committed in the slot it named; a promise made in slot 0, before anything ran,
# naming the job's first slot
@example(rate=1.0, sigma_job=0.125, startup=0.0, n=23, seed=211)
@example(rate=1.1590822782401597, sigma_job=0.0, startup=0.07953263448026204, n=29, seed=230)
@example(rate=0.8627861177946717, sigma_job=0.0, startup=0.0, n=16, seed=345)
@example(rate=0.8842449944946938, sigma_job=0.0, startup=0.0, n=17, seed=20)
def test_every_promise_is_kept_or_restated_before_its_slot(policy, rate, sigma_job, startup,
                                                           n, seed):
    """Reality with a rate for every job, a lasting factor per job and a start-up cost, no
    per-slot noise: every promise is kept, or re-stated no later than the slot it replaced
    and then kept, from the first slot on. A job's own speed is unseen until its first slot
    ends, so no promise names that slot while its workload is known to depart from its
    profile, or has not been measured yet on an executor that is not the model.
    Every admitted job completes within three times the arrival span. (With per-slot noise a
    promise holds at the slack's confidence, 97.7%, not always: a noisy slot can miss it with
    no earlier sign, which no finite slack rules out.)"""
    _assert_every_admitted_job_done_and_promise_kept(
        _run(policy, n, seed, Reality(rate=rate, sigma_job=sigma_job, startup=startup,
                                      seed=seed)))


def _assert_every_admitted_job_done_and_promise_kept(res) -> None:
    for rec in res.records.values():
        if not rec.admitted:
            continue
        assert rec.completion is not None, f"{rec.job.job_id} unfinished"
        assert rec.promised is None or rec.promise_kept, (
            rec.job.job_id, rec.promised_at, rec.first_promise, rec.restated, rec.completion)


NOISY = [Reality(rate=0.85, sigma_job=0.15, sigma_slot=0.1, startup=0.3, seed=7),
         Reality(rate=1.15, sigma_job=0.05, sigma_slot=0.1, seed=101),
         Reality(rate=0.95, sigma_job=0.2, sigma_slot=0.1, startup=0.5, seed=333),
         Reality(sigma_job=0.1, sigma_slot=0.1, startup=0.2, seed=42)]


@pytest.mark.parametrize("policy", ["oasis", "oasis-rp"])
@pytest.mark.parametrize("reality", NOISY, ids=lambda r: f"R{r.rate:g}-sj{r.sigma_job:g}-"
                                                        f"st{r.startup:g}-s{r.seed}")
def test_promises_hold_on_fixed_realities_with_per_slot_noise(policy, reality):
    """Per-slot noise (sigma_slot 0.1) on top of a rate, a factor per job and a start-up
    cost, seeded: every promise is kept or re-stated in time and every admitted job
    completes. (Noise is unbounded, so in general this holds at the slack's confidence, not
    always; these realities are fixed and seeded, so each run is the same every time.)"""
    res = _run(policy, 24, reality.seed % 500, reality)
    assert any(rec.promised is not None for rec in res.records.values())
    _assert_every_admitted_job_done_and_promise_kept(res)


class _Exactly:
    """An executor that runs every plan exactly as modelled but does not say it is the model
    (it has only what the loop calls): a real executor, as far as the loop can tell."""

    _model = SimulatedExecutor()

    def apply(self, t: int, plan: SlotPlan, jobs: Mapping[str, Job]) -> SlotReport:
        return self._model.apply(t, plan, jobs)

    def release(self, job_id: str) -> None:
        return None

    def close(self) -> None:
        return None


@pytest.mark.parametrize("workload", ["", "resnet"])
def test_no_promise_names_the_first_slot_of_a_job_whose_workload_was_never_measured(
        workload: str) -> None:
    """oasis (it promises every job it admits, on arrival). A job that fits in one slot
    (the second of two of its workload, arriving together; the other takes two): on the model
    it is promised the slot it runs in; on an executor that is not the model, before any of
    its workload was measured, the slot after, though that executor runs exactly as
    profiled; once its workload was measured exact there, its first slot again (the third
    job, arriving after)."""
    cluster = Cluster(servers=(_server("w0", Pool.WORKER, 4), _server("p0", Pool.PS, 0)))
    flat = Utility(kind="sigmoid", value=10.0, decay=0.0, target=3.0)
    specs = [dataclasses.replace(_spec(j, arrival, workers, slots, flat), workload=workload)
             for j, arrival, workers, slots in (("long", 0, 2, 2), ("short", 0, 2, 1),
                                                ("later", 2, 2, 1))]
    got = {}
    for name, ex in (("model", None), ("real", _Exactly())):
        res = simulate(specs, cluster, make_policy("oasis"), 8, seed=0, executor=ex)
        got[name] = res.records
    for j in ("long", "short", "later"):
        model, real = got["model"][j], got["real"][j]
        assert (model.completion, model.first_slot) == (real.completion, real.first_slot)
        assert (model.promised is None) == (real.promised is None)
        assert model.promised is None or (model.promise_kept and real.promise_kept)
    model, real = got["model"]["short"], got["real"]["short"]
    assert model.promised == model.first_slot == model.completion
    assert real.promised == real.first_slot + 1
    later = got["model"]["later"]
    assert later.promised == later.first_slot == got["real"]["later"].promised


def _fingerprint(res) -> str:
    rows = [res.allocations, [(j, r.admitted, r.promised, r.completion, r.reason)
                              for j, r in res.records.items()]]
    return hashlib.sha256(json.dumps(rows, default=str).encode()).hexdigest()


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", [1, 7])
def test_reality_as_the_model_learns_speed_one_and_changes_no_decision(policy, seed):
    exact = _run(policy, 20, seed, Reality())
    model = _run(policy, 20, seed, Reality(rate=1.0, seed=seed))
    assert _fingerprint(exact) == _fingerprint(model)
    for rec in exact.records.values():
        assert (rec.speed, rec.speed_sd, rec.restated) == (1.0, 0.0, [])
        assert rec.promised is None or rec.promise_kept


def test_a_committing_policy_reserves_idle_capacity_for_a_job_measured_slow():
    """oasis at 0.8 of its profile: jobs get the worker-slots they miss reserved on idle
    capacity (decisions with reason ``reserved_idle``), and every admitted job completes."""
    specs, _ = oasis_paper_jobs(20, seed=3, slots=60)
    decisions = []
    from psched.core.arrivals import TraceArrivals
    from psched.core.loop import SchedulerLoop
    from psched.core.reality import RealityExecutor

    loop = SchedulerLoop(cluster=oasis_paper_cluster(seed=3), policy=make_policy("oasis"),
                         horizon=HORIZON, arrivals=TraceArrivals(specs),
                         executor=RealityExecutor(Reality(rate=0.8)), known_jobs=specs)
    loop.on_decision.append(decisions.append)
    res = loop.run()
    behind = [a for a in decisions if a.behind]
    assert behind and any(a.reason == "reserved_idle" for a in behind)
    assert all(r.completion is not None for r in res.records.values() if r.admitted)
