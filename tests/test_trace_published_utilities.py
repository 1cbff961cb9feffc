"""Utilities a trace states (Chronus value steps, deadlines, best-effort) become the jobs'
utility functions: checked by hand on a 5-job sample, in ``jobs.csv`` and in the totals."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from psched.cli.main import main
from psched.core.limits import validate_spec
from psched.core.utility import Utility, format_steps, parse_steps, step_utility
from psched.traces import load_any
from psched.traces.native import load_trace, write_trace

ROOT = Path(__file__).resolve().parents[1]
FIVE = ROOT / "traces" / "samples" / "chronus_5job_steps.csv"

# By hand, from the sample with 3600-s slots (t0 = 0; arrival a = floor(submit / 3600); a time
# t pays when the job completes in t's slot or before: target = floor(t / 3600) - a + 1):
#   s1 a=0: 7200 -> 3, 10800 -> 4, 14400 -> 5; values 100, 80, 50.
#   s2 a=1: one time, 18000 -> 5: a deadline of 5 slots, value 100.
#   s3: best-effort: the constant 1 (Chronus's own best-effort value).
#   s4 a=2: 21600 -> 5, 25200 -> 6; values 60, 30.
#   s5 a=3: 18000 -> 3, 19800 -> 3 (same slot: the first, higher value stays), 25200 -> 5.
HAND_STEPS = {"s1": ((3.0, 100.0), (4.0, 80.0), (5.0, 50.0)), "s4": ((5.0, 60.0), (6.0, 30.0)),
              "s5": ((3.0, 90.0), (5.0, 40.0))}
HAND_KIND = {"s1": "step", "s2": "deadline", "s3": "constant", "s4": "step", "s5": "step"}


def hand_value(job: str, d: int) -> float:
    """The utility of ``job`` completing ``d`` slots after arrival, written out by hand."""
    table = {
        "s1": {1: 100, 2: 100, 3: 100, 4: 80, 5: 50},
        "s2": {1: 100, 2: 100, 3: 100, 4: 100, 5: 100},
        "s4": {1: 60, 2: 60, 3: 60, 4: 60, 5: 60, 6: 30},
        "s5": {1: 90, 2: 90, 3: 90, 4: 40, 5: 40},
    }
    if job == "s3":
        return 1.0
    return float(table[job].get(d, 0))


def test_chronus_value_steps_become_the_hand_derived_utilities() -> None:
    with pytest.warns(UserWarning, match=r"inception_v3 -> inception3 \(1 row\)"):
        specs = {s.job_id: s.utility for s in load_any(FIVE)}
    assert {j: u.kind for j, u in specs.items()} == HAND_KIND
    for job, steps in HAND_STEPS.items():
        assert specs[job].steps == steps
        assert specs[job].value == steps[0][1] and specs[job].target == steps[-1][0]
    assert (specs["s2"].value, specs["s2"].target) == (100.0, 5.0)
    assert specs["s3"] == Utility(kind="constant", value=1.0)
    for job, u in specs.items():
        d = np.arange(1, 9)
        want = [hand_value(job, int(x)) for x in d]
        assert [u(int(x)) for x in d] == want
        assert list(u.reference(d)) == want


@pytest.fixture(scope="module")
def five_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fifo and oasis on the 5-job sample, one 4-GPU worker server: the jobs contend."""
    tmp = tmp_path_factory.mktemp("five")
    cluster = tmp / "c4.toml"
    cluster.write_text(
        "slot_seconds = 3600\n"
        '[[servers]]\npool = "worker"\ngpu = 4\ncpu = 64\nmemory_gb = 488\n'
        "storage_gb = 1000\nbandwidth_gbps = 50\n"
        '[[servers]]\npool = "ps"\ncpu = 36\nmemory_gb = 60\nstorage_gb = 1000\n'
        "bandwidth_gbps = 50\n")
    out = tmp / "out"
    code = main(["simulate", "--trace", str(FIVE), "--cluster", str(cluster),
                 "--policies", "fifo,oasis", "--no-plots", "--out", str(out),
                 "--seed", "0"])
    assert code == 0
    return out


@pytest.mark.parametrize("policy", ["fifo", "oasis"])
def test_jobs_csv_shows_each_utility_function_and_the_total_is_their_sum(
        five_run: Path, policy: str) -> None:
    with (five_run / policy / "jobs.csv").open() as fh:
        rows = {r["job_id"]: r for r in csv.DictReader(fh)}
    total = 0.0
    for job, r in rows.items():
        assert r["utility_kind"] == HAND_KIND[job]
        assert r["utility_steps"] == format_steps(HAND_STEPS.get(job, ()))
        if job in HAND_STEPS:
            assert parse_steps(r["utility_steps"]) == HAND_STEPS[job]
        earned = hand_value(job, int(r["duration"])) if r["duration"] else 0.0
        assert float(r["utility"]) == earned
        total += earned
    summary = json.loads((five_run / "summary.json").read_text())
    assert summary["policies"][policy]["total_utility"] == pytest.approx(total, abs=1e-9)
    assert total <= 100 + 100 + 1 + 60 + 90  # every job at its first step


def test_a_step_utility_reads_back_equal_from_native_json_and_the_validator(
        tmp_path: Path) -> None:
    specs = load_any(FIVE, model_map=(("inception_v3", "inception3"),))
    path = tmp_path / "five_native.csv"
    write_trace(path, specs)
    assert "utility_steps" in path.read_text().splitlines()[0]
    assert load_trace(path) == sorted(specs, key=lambda s: s.arrival)
    for s in specs:
        assert validate_spec(s) == s
        back = json.loads(json.dumps(dataclasses.asdict(s.utility)))
        assert Utility(**back) == s.utility


@given(st.lists(st.tuples(st.integers(1, 50), st.floats(0.0, 1e6)), min_size=1, max_size=6),
       st.lists(st.integers(0, 80), min_size=1, max_size=30))
def test_step_utility_scalar_and_array_agree_and_never_increase(
        raw: list[tuple[int, float]], durations: list[int]) -> None:
    times = sorted({t for t, _ in raw})
    values = sorted({v for _, v in raw}, reverse=True)[: len(times)]
    pairs = list(zip(times[: len(values)], values, strict=True))
    u = step_utility(pairs)
    d = np.array(sorted(durations))
    arr = u.reference(d)
    assert [u(int(x)) for x in d] == list(np.atleast_1d(arr))
    assert bool(np.all(np.diff(np.atleast_1d(arr)) <= 0))


@pytest.mark.parametrize("bad", [
    {"kind": "step", "value": 5.0, "target": 3.0, "steps": ((3, 5), (2, 1))},  # times fall
    {"kind": "step", "value": 5.0, "target": 4.0, "steps": ((3, 5), (4, 6))},  # values rise
    {"kind": "step", "value": 5.0, "target": 4.0, "steps": ()},  # no step
    {"kind": "deadline", "value": 5.0, "target": 3.0, "steps": ((3, 5),)},  # steps elsewhere
])
def test_malformed_steps_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Utility(**bad)  # type: ignore[arg-type]
