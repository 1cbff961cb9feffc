"""oasis-rp at trace scale: exact speed-ups of the set-up and the own-usage search, and the
slot bank (``effort_slots``), a counted bound that acts only by the slots levers search.

The fast paths are checked against the references they replace (the clearing density job
by job, the stable argsort of the unit table); whole runs with a slot bank that never acts
equal the runs without it; with a tight bank (its cap lowered) every promise and the capacity
rules hold, the bound is counted, and the same seed gives the same run.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from strategies import Instance, instances
from test_oasis_rp_levers import run_keeping_every_promise

from psched.core.loop import resolve_job
from psched.core.model import Alloc
from psched.core.records import RunResult
from psched.core.simulator import simulate
from psched.policies import make_policy
from psched.policies.oasis_rp import effort
from psched.policies.oasis_rp.admission import clearing_density, clearing_density_reference
from psched.policies.oasis_rp.effort import BANK_SLOTS, SlotBank, clash_rank
from psched.policies.oasis_rp.units import cheapest_units
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

RUNS = settings(max_examples=6, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
#: a slot bank that acts on most re-packs, with its cap lowered to TIGHT_CAP
TIGHT = {"effort_slots": 20.0}
TIGHT_CAP = 300.0


def _tight_cap() -> pytest.MonkeyPatch:
    """A context in which every slot bank's cap is :data:`TIGHT_CAP`."""
    mp = pytest.MonkeyPatch()
    mp.setattr(effort, "BANK_SLOTS", TIGHT_CAP)
    return mp


def _decisions(res: RunResult) -> tuple[object, ...]:
    return (res.allocations, [(j, r.admitted, r.promised, r.completion, r.reason)
                              for j, r in res.records.items()])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("slots", [40, 300, 3000])
def test_clearing_density_equals_the_job_by_job_reference(seed: int, slots: int) -> None:
    specs, _ = oasis_paper_jobs(120, seed=seed, slots=min(slots, 300))
    cluster = oasis_paper_cluster(seed=seed)
    jobs = [resolve_job(s, cluster.slot_seconds, slots, None) for s in specs]
    for horizon in (1, slots // 10, slots):
        assert clearing_density(jobs, cluster, horizon) == clearing_density_reference(
            jobs, cluster, horizon)
    assert clearing_density([], cluster, slots) == 0.0


@RUNS
@given(instance=instances(max_jobs=8, max_horizon=14))
def test_clearing_density_equals_the_reference_on_random_instances(instance: Instance) -> None:
    cluster, specs, horizon = instance
    jobs = [resolve_job(s, cluster.slot_seconds, horizon, None) for s in specs]
    for h in (1, 2, horizon):
        assert clearing_density(jobs, cluster, h) == clearing_density_reference(jobs, cluster, h)


_COSTS = st.one_of(st.sampled_from([0.0, 1.0, 2.0, np.inf]),
                   st.floats(0.0, 5.0, allow_nan=False))


@settings(max_examples=200, deadline=None)
@given(flat=arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(1, 40)),
                   elements=_COSTS),
       limit=st.integers(1, 50))
def test_cheapest_units_are_the_stable_argsort_prefix(flat: np.ndarray, limit: int) -> None:
    want = np.argsort(flat, axis=1, kind="stable")[:, :limit]
    assert np.array_equal(cheapest_units(flat, limit), want)


def test_the_slot_bank_affords_all_trims_by_clash_or_skips_and_is_counted() -> None:
    bank = SlotBank(per_arrival=10.0, cap=200.0)
    assert bank.bank == 200.0 and SlotBank(per_arrival=1.0).bank == BANK_SLOTS
    cost = {"a": 30.0, "b": 30.0, "c": 50.0}
    assert bank.afford(["a", "b", "c"], cost, 10.0, ["c", "a", "b"]) == ["a", "b", "c"]
    assert bank.stats() == {"effort_slot_trimmed": 0, "effort_slot_skipped": 0,
                            "effort_slot_spent": 0}
    bank.spend(140)  # 60 left: the fixed 10, then c (50) fits; a does not
    assert bank.afford(["a", "b", "c"], cost, 10.0, ["c", "a", "b"]) == ["c"]
    assert bank.afford(["a", "b", "c"], cost, 10.0, ["a", "b", "c"]) == ["a"]
    assert bank.afford(["c"], cost, 20.0, ["c"]) == []
    bank.spend(70)  # a lever may overdraw once
    bank.credit()
    assert bank.bank == 0.0
    for _ in range(20):
        bank.credit()
    assert bank.bank == 200.0
    assert bank.stats() == {"effort_slot_trimmed": 2, "effort_slot_skipped": 1,
                            "effort_slot_spent": 210}


def test_clash_rank_orders_by_worker_slots_in_the_window_ties_in_order() -> None:
    one, three = Alloc.of({0: 1}, {1: 1}), Alloc.of({0: 3}, {1: 1})
    plans = {"a": {5: one, 6: one}, "b": {2: three, 9: three}, "c": {3: three},
             "d": {4: one, 40: three}}
    assert clash_rank(["a", "b", "c", "d"], plans, 2, 6) == ["b", "c", "a", "d"]
    assert clash_rank(["d", "c", "b", "a"], plans, 2, 6) == ["c", "b", "a", "d"]


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_the_slot_bank_rejects_a_nonpositive_credit(bad: float) -> None:
    with pytest.raises(ValueError):
        make_policy("oasis-rp", effort_slots=bad)


def test_the_slot_bank_rejects_a_negative_cap() -> None:
    with pytest.raises(ValueError):
        SlotBank(per_arrival=1.0, cap=-1.0)


@RUNS
@given(instance=instances(max_jobs=8, max_horizon=14))
def test_a_slot_bank_that_never_acts_changes_no_decision(instance: Instance) -> None:
    cluster, specs, horizon = instance
    runs = [simulate(specs, cluster, make_policy("oasis-rp", **opts), horizon, seed=3)
            for opts in ({"effort_slots": None}, {"effort_slots": 400.0})]
    rep = runs[1].report
    assert rep["effort_slot_trimmed"] == rep["effort_slot_skipped"] == 0
    assert _decisions(runs[0]) == _decisions(runs[1])


@RUNS
@given(instance=instances(max_jobs=8, max_horizon=14))
def test_a_tight_slot_bank_keeps_every_promise_and_the_capacity_rules(
        instance: Instance) -> None:
    mp = _tight_cap()
    try:
        run_keeping_every_promise(TIGHT, instance)
    finally:
        mp.undo()


def test_a_tight_slot_bank_acts_is_counted_and_gives_the_same_run_for_the_same_seed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(effort, "BANK_SLOTS", TIGHT_CAP)
    specs, _ = oasis_paper_jobs(60, seed=1, slots=120)
    cluster = oasis_paper_cluster(seed=1)
    opts = {**TIGHT, "certificate": False}
    runs = [simulate(specs, cluster, make_policy("oasis-rp", **opts), 120, seed=0)
            for _ in range(2)]
    assert _decisions(runs[0]) == _decisions(runs[1])
    rep = runs[0].report
    assert rep["effort_slot_trimmed"] > 0 and rep["effort_slot_skipped"] > 0
    assert rep["effort_slot_spent"] > 0
    assert rep["levers"]["effort_slots"] == TIGHT["effort_slots"]
