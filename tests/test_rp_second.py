"""oasis-rp's bank on the second order of re-packs (``repack_second_bank``,
:mod:`psched.policies.rp_second`): counted, journaled, exact where it never acts, and where it
acts the second order it skips is exactly ``repack_second="off"``'s path.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import Instance, instances
from test_oasis_rp_levers import run_keeping_every_promise

from psched.policies import make_policy
from psched.policies.rp_second import SECOND_CAP, SecondBank
from psched.simulator import RunResult, simulate
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

RUNS = settings(max_examples=6, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
#: a bank that never lets a second order run
SHUT = {"repack_second_bank": 1e-9, "repack_second_cap": 0.0}
#: a bank that lets a few second orders run, then acts
TIGHT = {"repack_second_bank": 0.02, "repack_second_cap": 2.0}


def _decisions(res: RunResult) -> tuple[object, ...]:
    return (res.allocations, [(j, r.admitted, r.promised, r.completion, r.reason)
                              for j, r in res.records.items()])


def _run(opts: dict[str, object], seed: int, n_jobs: int = 60) -> RunResult:
    specs, _ = oasis_paper_jobs(n_jobs, seed=seed, slots=120)
    cluster = oasis_paper_cluster(seed=seed)
    pol = make_policy("oasis-rp", certificate=False, **opts)
    return simulate(specs, cluster, pol, 120, seed=0)


def test_the_second_bank_debits_only_second_orders_undone() -> None:
    bank = SecondBank(per_arrival=0.5, cap=2.0)
    assert bank.bank == 2.0 and SecondBank(per_arrival=1.0).bank == SECOND_CAP
    assert bank.runs()
    bank.done(kept=True)  # a kept re-pack costs nothing
    assert bank.bank == 2.0
    bank.done(kept=False)
    bank.done(kept=False)
    assert bank.bank == 0.0 and not bank.runs()
    bank.credit()
    assert not bank.runs()
    bank.credit()
    assert bank.runs()
    for _ in range(10):
        bank.credit()
    assert bank.bank == 2.0
    assert bank.stats() == {"second_tried": 3, "second_kept": 1, "second_skipped": 2}
    with pytest.raises(ValueError):
        make_policy("oasis-rp", repack_second_bank=0.0)
    with pytest.raises(ValueError):
        make_policy("oasis-rp", repack_second_bank=1.0, repack_second_cap=-1.0)


@settings(max_examples=50, deadline=None)
@given(ops=st.lists(st.sampled_from(["credit", "kept", "undone"]), max_size=40),
       per=st.sampled_from([0.25, 0.5, 1.0]), cap=st.sampled_from([0.0, 1.0, 3.0]))
def test_the_second_bank_lets_an_order_run_iff_it_holds_one_attempt(
        ops: list[str], per: float, cap: float) -> None:
    bank = SecondBank(per_arrival=per, cap=cap)
    ref, ran, skipped = cap, 0, 0
    for op in ops:
        if op == "credit":
            bank.credit()
            ref = min(cap, ref + per)
            continue
        if bank.runs():
            assert ref >= 1.0
            ran += 1
            bank.done(kept=op == "kept")
            ref -= 0.0 if op == "kept" else 1.0
        else:
            assert ref < 1.0
            skipped += 1
        assert bank.bank == pytest.approx(ref) and bank.bank <= cap
    got = bank.stats()
    assert got["second_tried"] == ran and got["second_skipped"] == skipped


def test_the_bank_is_off_by_default_and_reported_when_on() -> None:
    assert "second_tried" not in _run({}, seed=1, n_jobs=20).report
    rep = _run(TIGHT, seed=1, n_jobs=20).report
    assert rep["levers"]["repack_second_bank"] == TIGHT["repack_second_bank"]
    assert {"second_tried", "second_kept", "second_skipped"} <= set(rep)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_bank_that_never_acts_changes_no_decision(seed: int) -> None:
    runs = [_run({}, seed), _run({"repack_second_bank": 1.0}, seed)]
    assert runs[1].report["second_skipped"] == 0
    assert runs[1].report["second_tried"] > 0  # the second order ran under the bank
    assert _decisions(runs[0]) == _decisions(runs[1])


@pytest.mark.parametrize("seed", [0, 1])
def test_a_shut_bank_is_exactly_the_second_order_off(seed: int) -> None:
    shut, off = _run(SHUT, seed), _run({"repack_second": "off"}, seed)
    assert shut.report["second_tried"] == 0 and shut.report["second_skipped"] > 0
    assert _decisions(shut) == _decisions(off)


def test_a_tight_bank_acts_is_counted_and_gives_the_same_run_for_the_same_seed() -> None:
    runs = [_run(TIGHT, seed=1) for _ in range(2)]
    assert _decisions(runs[0]) == _decisions(runs[1])
    rep = runs[0].report
    assert rep["second_skipped"] > 0 and rep["second_tried"] > 0


@RUNS
@given(instance=instances(max_jobs=8, max_horizon=14))
def test_a_tight_second_bank_keeps_every_promise_and_the_capacity_rules(
        instance: Instance) -> None:
    run_keeping_every_promise(SHUT, instance)


def test_the_bank_is_journaled_and_taken_back_on_resume() -> None:
    specs, _ = oasis_paper_jobs(60, seed=1, slots=120)
    cluster = oasis_paper_cluster(seed=1)
    pol = make_policy("oasis-rp", certificate=False, **TIGHT)
    simulate(specs, cluster, pol, 120, seed=0)
    state = pol.boundary_state()
    assert state["repack_second_bank"]["counts"]["second_skipped"] > 0
    again = make_policy("oasis-rp", certificate=False, **TIGHT)
    simulate(specs[:1], cluster, again, 120, seed=0)  # started: a book to resume into
    again.resume(120, state)
    assert again.boundary_state()["repack_second_bank"] == state["repack_second_bank"]
