"""Reality in the simulator (:mod:`psched.core.reality`): progress under a rate, a per-job
factor, per-slot noise and a start-up cost, drawn per (seed, job, slot) and so independent
of the order of a plan; exact reality is the model."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psched.core.errors import InputError
from psched.core.executor import SimulatedExecutor
from psched.core.model import Alloc
from psched.core.reality import Reality, RealityExecutor

ALLOCS = (Alloc.of({0: 2}, {1: 1}), Alloc.of({0: 1}, {1: 1}), Alloc.of({0: 1, 2: 3}, {1: 2}))

realities = st.builds(
    Reality, rate=st.floats(0.5, 1.5), sigma_job=st.floats(0.0, 0.5),
    sigma_slot=st.floats(0.0, 0.5), startup=st.floats(0.0, 1.0), seed=st.integers(0, 2**32))
#: per slot, a plan over jobs j0..j5: each job absent or running one of ALLOCS
plans = st.lists(st.dictionaries(st.sampled_from([f"j{i}" for i in range(6)]),
                                 st.sampled_from(ALLOCS), max_size=6), min_size=1, max_size=8)


def _run(ex: SimulatedExecutor, slots: list[dict[str, Alloc]]) -> list[dict[str, float]]:
    return [dict(ex.apply(t, plan, {}).progress) for t, plan in enumerate(slots)]


@settings(max_examples=40, deadline=None)
@given(reality=realities, slots=plans, order_seed=st.integers(0, 1000))
def test_progress_depends_on_seed_job_and_slot_not_on_plan_order(reality, slots, order_seed):
    rng = random.Random(order_seed)
    shuffled = []
    for plan in slots:
        items = list(plan.items())
        rng.shuffle(items)
        shuffled.append(dict(items))
    assert _run(RealityExecutor(reality), slots) == _run(RealityExecutor(reality), shuffled)


@settings(max_examples=30, deadline=None)
@given(reality=realities, slots=plans)
def test_a_jobs_progress_does_not_depend_on_the_other_jobs(reality, slots):
    """j0's progress is the same whether or not other jobs ran beside it."""
    alone = [{j: a for j, a in plan.items() if j == "j0"} for plan in slots]
    full, solo = _run(RealityExecutor(reality), slots), _run(RealityExecutor(reality), alone)
    assert [p.get("j0") for p in full] == [p.get("j0") for p in solo]


@settings(max_examples=40, deadline=None)
@given(slots=plans)
def test_exact_reality_is_the_model(slots):
    assert Reality().exact and type(Reality().executor()) is SimulatedExecutor
    assert _run(RealityExecutor(Reality(seed=5)), slots) == _run(SimulatedExecutor(), slots)


@pytest.mark.parametrize(("sigma", "rate"), [(0.1, 1.0), (0.3, 0.8)])
def test_the_log_of_the_job_factor_has_the_given_sigma_and_median_one(sigma, rate):
    """4,000 jobs: the log-speeds' spread is sigma (standard error ~ sigma / 90) and their
    mean log(rate) (standard error ~ sigma / 63)."""
    ex = RealityExecutor(Reality(rate=rate, sigma_job=sigma, seed=11))
    logs = np.log([ex.true_speed(f"job{i}") for i in range(4000)]) - math.log(rate)
    assert logs.std() == pytest.approx(sigma, rel=0.05)
    assert abs(logs.mean()) < 4 * sigma / math.sqrt(4000)


def test_the_slot_noise_has_the_given_sigma_and_draws_afresh_each_slot():
    ex = RealityExecutor(Reality(sigma_slot=0.2, seed=3))
    logs = np.log([ex.noise(f"j{i % 40}", i // 40) for i in range(4000)])
    assert logs.std() == pytest.approx(0.2, rel=0.05)
    assert ex.noise("j1", 5) != ex.noise("j1", 6) and ex.noise("j1", 5) == ex.noise("j1", 5)


def test_another_seed_draws_another_reality():
    a = RealityExecutor(Reality(sigma_job=0.2, seed=1))
    b = RealityExecutor(Reality(sigma_job=0.2, seed=2))
    assert [a.true_speed(f"j{i}") for i in range(5)] != [b.true_speed(f"j{i}") for i in range(5)]


@settings(max_examples=60, deadline=None)
@given(choices=st.lists(st.sampled_from([None, 0, 1, 2]), min_size=1, max_size=12),
       rate=st.floats(0.3, 2.0), startup=st.floats(0.0, 1.0),
       resize=st.one_of(st.none(), st.floats(0.0, 1.0)))
def test_startup_is_paid_exactly_on_a_start_a_resume_and_a_resize(choices, rate, startup,
                                                                    resize):
    """One job, each slot stopped (None) or running one of ALLOCS: a start or a resume after a
    gap loses ``startup`` of the slot, a changed allocation ``resize`` (default ``startup``),
    an unchanged continued one nothing."""
    reality = Reality(rate=rate, startup=startup, resize=resize)
    ex = RealityExecutor(reality)
    before = None
    for t, c in enumerate(choices):
        got = ex.apply(t, {} if c is None else {"j": ALLOCS[c]}, {}).progress
        if c is None:
            assert got == {}
        else:
            lost = (startup if before is None else 0.0 if before == c
                    else reality.resize_cost)
            assert got["j"] == pytest.approx(rate * ALLOCS[c].n_workers * (1 - lost))
        before = c


def test_a_released_job_pays_startup_again():
    ex, a = RealityExecutor(Reality(startup=0.5)), ALLOCS[0]
    assert ex.apply(0, {"j": a}, {}).progress["j"] == 1.0
    assert ex.apply(1, {"j": a}, {}).progress["j"] == 2.0
    ex.release("j")
    assert ex.apply(2, {"j": a}, {}).progress["j"] == 1.0


@pytest.mark.parametrize(("given_", "field"), [
    ({"rate": 0}, "rate"), ({"rate": float("nan")}, "rate"), ({"sigma_job": -0.1}, "sigma_job"),
    ({"sigma_slot": 3}, "sigma_slot"), ({"startup": 1.5}, "startup"), ({"seed": -1}, "seed"),
    ("rate=fast", "rate"), ("wobble=1", "reality"), ("rate", "reality"), ({"rate": None}, "rate"),
    ({"resize": 2}, "resize"), ({"seed": 1.5}, "seed"),
])
def test_a_bad_reality_is_refused_in_one_line_naming_the_field(given_, field):
    with pytest.raises(InputError) as err:
        Reality.parse(given_)
    assert err.value.field == field and "\n" not in str(err.value)


def test_reality_parses_from_text_a_mapping_or_none():
    want = Reality(rate=0.9, sigma_job=0.1, seed=4)
    assert Reality.parse("rate=0.9, sigma-job=0.1,seed=4") == want
    assert Reality.parse({"rate": 0.9, "sigma_job": 0.1, "seed": 4}) == want
    assert Reality.parse(None) == Reality() and Reality.parse(want) is want
    assert Reality.parse({"startup": "0.5", "resize": "none"}) == Reality(startup=0.5)


def _cli(argv: list[str]) -> int:
    from psched.cli.main import main

    try:
        return main(argv)
    except SystemExit as e:
        return int(e.code or 0)


SMALL = ["simulate", "--scenario", "oasis-paper", "--jobs", "12", "--slots", "30",
         "--policies", "fifo,oasis", "--no-check"]


@pytest.mark.parametrize(("flag", "value"), [("--rate", "0"), ("--sigma-job", "nan"),
                                             ("--sigma-slot", "2.5"), ("--startup", "-1"),
                                             ("--reality-seed", "-3"), ("--rate", "fast")])
def test_a_bad_reality_flag_is_one_line_and_exit_2(flag, value, capsys):
    assert _cli([*SMALL, flag, value]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and flag in err and "Traceback" not in err


def test_compare_runs_under_a_reality_and_records_it():
    """The default reality is the model bit for bit; a slower one records its fields and
    changes what completes."""
    import psched
    from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

    specs, _ = oasis_paper_jobs(12, seed=1, slots=30)
    cluster = oasis_paper_cluster(seed=1)
    opts = {"slots": 30, "seed": 1}
    plain = psched.compare(specs, cluster, "fifo,oasis", **opts)
    exact = psched.compare(specs, cluster, "fifo,oasis", reality={"seed": 9}, **opts)
    slow = psched.compare(specs, cluster, "fifo,oasis", reality="rate=0.5,startup=0.5", **opts)
    for name in ("fifo", "oasis"):
        a, b = plain.runs[name], exact.runs[name]
        assert a.allocations == b.allocations
        assert [(r.done, r.completion) for r in a.records.values()] == [
            (r.done, r.completion) for r in b.records.values()]
        assert sum(r.done for r in slow.runs[name].records.values()) < sum(
            r.done for r in a.records.values())
    assert slow.summary_dict["params"]["reality"]["rate"] == 0.5


def test_a_sweep_in_exact_reality_keeps_its_digest_and_another_reality_changes_it():
    import hashlib
    import json
    from dataclasses import asdict

    from psched.runs.sweep_spec import SweepSpec

    plain = SweepSpec(trace=("t.csv",))
    d = asdict(plain)
    del d["reality"], d["policy_options"]
    assert plain.digest() == hashlib.sha256(
        json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]
    slow = SweepSpec(trace=("t.csv",), reality={"rate": 0.9})  # type: ignore[arg-type]
    assert slow.reality == Reality(rate=0.9) and slow.digest() != plain.digest()


def test_behind_run_in_exact_reality_is_the_simulation_and_behind_it_does_less():
    from psched.core.behind import behind_run, churn
    from psched.core.simulator import simulate
    from psched.policies import make_policy
    from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

    specs, _ = oasis_paper_jobs(10, seed=3, slots=20)
    cluster = oasis_paper_cluster(seed=3)
    sim = simulate(specs, cluster, make_policy("fifo"), 20)
    same = behind_run(specs, cluster, make_policy("fifo"), 20, reality=Reality())
    slow = behind_run(specs, cluster, make_policy("fifo"), 20,
                      reality=Reality(rate=0.7, startup=0.5))
    assert same.allocations == sim.allocations
    assert [r.done for r in same.records.values()] == [r.done for r in sim.records.values()]
    assert sum(r.done for r in slow.records.values()) < sum(r.done for r in sim.records.values())
    assert churn(slow.allocations).jobs > 0
