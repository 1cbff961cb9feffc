"""oasis-rp's bounded effort (``effort``): a counted rule that acts only by size.

The bank's arithmetic and the choice by clash are checked directly; on whole runs the rule
changes nothing while it never acts (its counters stay 0), keeps every promise and the
capacity rules when it acts on every re-pack and bump, and the same seed gives the same run.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from strategies import Instance, instances
from test_oasis_rp_levers import run_keeping_every_promise

from psched.model import Alloc
from psched.policies import make_policy
from psched.policies.rp_effort import BANK_SEARCHES, Effort, by_clash, repack_cost
from psched.policies.rp_search import Schedule
from psched.simulator import RunResult, simulate
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

RUNS = settings(max_examples=6, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
#: effort that acts on most re-packs and bumps: one job moved, a small bank
TIGHT = {"effort": 0.5, "effort_moves": 1, "effort_bank": 6.0}


def _decisions(res: RunResult) -> tuple[object, ...]:
    return (res.allocations, [(j, r.admitted, r.promised, r.completion)
                              for j, r in res.records.items()])


def test_the_bank_starts_full_is_credited_per_arrival_up_to_its_cap_and_counts_skips() -> None:
    e = Effort(per_arrival=2.0, moves=4, cap=20.0)
    assert e.bank == 20.0
    e.spend(15)
    e.credit()
    assert e.bank == 7.0
    assert e.allows(7) and not e.allows(repack_cost(4))
    e.spend(10)  # a lever may overdraw once
    assert e.short(1)
    for _ in range(20):
        e.credit()
    assert e.bank == 20.0
    assert e.stats() == {"effort_trimmed": 0, "effort_skipped": 2, "effort_searches": 25}
    assert Effort(per_arrival=1.0, moves=1).bank == BANK_SEARCHES


@pytest.mark.parametrize("bad", [{"per_arrival": 0.0, "moves": 1, "cap": 1.0},
                                 {"per_arrival": 1.0, "moves": 0, "cap": 1.0},
                                 {"per_arrival": 1.0, "moves": 1, "cap": -1.0}])
def test_the_bank_rejects_a_nonpositive_credit_or_move_limit(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Effort(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        make_policy("oasis-rp", effort=bad["per_arrival"], effort_moves=int(bad["moves"]),
                    effort_bank=bad["cap"])


def test_clash_keeps_the_jobs_with_most_worker_slots_in_the_window_ties_in_order() -> None:
    one = Alloc.of({0: 1}, {1: 1})
    three = Alloc.of({0: 3}, {1: 1})
    plans = {"a": {5: one, 6: one}, "b": {2: three, 9: three}, "c": Schedule({3: three}),
             "d": {4: one, 40: three}}
    # slots 2..6: a 2, b 3, c 3, d 1 worker-slots
    assert by_clash(["a", "b", "c", "d"], plans, 2, 6, 2) == ["b", "c"]
    assert by_clash(["c", "a", "b", "d"], plans, 2, 6, 3) == ["c", "a", "b"]
    e = Effort(per_arrival=1.0, moves=3)
    assert e.trim(["a", "b", "c"], plans, 2, 6) == ["a", "b", "c"]  # no more than 3: as is
    assert e.trim(["d", "a", "b", "c"], plans, 2, 6) == ["a", "b", "c"]
    assert e.stats()["effort_trimmed"] == 1


@RUNS
@given(instance=instances(max_jobs=8, max_horizon=14))
def test_effort_that_never_acts_changes_no_decision(instance: Instance) -> None:
    cluster, specs, horizon = instance
    runs = [simulate(specs, cluster, make_policy("oasis-rp", **opts), horizon, seed=3)
            for opts in ({}, {"effort": 1.0})]
    assert runs[1].report["effort_trimmed"] == runs[1].report["effort_skipped"] == 0
    assert _decisions(runs[0]) == _decisions(runs[1])


@RUNS
@given(instance=instances(max_jobs=8, max_horizon=14))
def test_tight_effort_keeps_every_promise_and_the_capacity_rules(instance: Instance) -> None:
    run_keeping_every_promise(TIGHT, instance)


def test_tight_effort_acts_is_counted_and_gives_the_same_run_for_the_same_seed() -> None:
    specs, _ = oasis_paper_jobs(60, seed=1, slots=120)
    cluster = oasis_paper_cluster(seed=1)
    tight = {**TIGHT, "certificate": False}
    runs = [simulate(specs, cluster, make_policy("oasis-rp", **tight), 120, seed=0)
            for _ in range(2)]
    assert _decisions(runs[0]) == _decisions(runs[1])
    rep = runs[0].report
    assert rep["effort_trimmed"] > 0  # more than one candidate: cut to one
    assert rep["effort_skipped"] > 0  # the bank ran dry
    assert rep["levers"]["effort"] == TIGHT["effort"]
    assert rep["effort_searches"] > 0
