"""Every policy decides exactly what it decided when its outputs were recorded.

``tests/golden/`` holds one row per run of a policy on a fixed input (the rival heuristics on
the oasis-paper scenario, ElasticFlow cluster10, Philly-like traces queued tight and Fig. 5
instances whose containers are large against the servers; the options of DRF and the greedies;
Dorm and the elastic MIP within their solver's reach; OASiS and ``oasis-rp``) and the counts
each greedy fill chooses on random epochs. A run equal to its row has the same allocation rows,
job records, per-slot usage and report, bit for bit (:mod:`golden.cases`). A change meant to
change a policy's decisions regenerates its file with the command in the failure message and
says so in its commit; ``oasis_rp.csv`` is apart so that it can be regenerated alone.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from golden.cases import GREEDY_EPOCHS, RUNS, greedy_rows, run_row
from golden.make import FILES

GOLDEN = Path(__file__).resolve().parent / "golden"
_OPTION = {"runs.csv": "runs", "oasis_rp.csv": "oasis-rp", "greedy.csv": "greedy"}


def _recorded(name: str) -> list[dict[str, str]]:
    with open(GOLDEN / name, newline="") as fh:
        return list(csv.DictReader(fh))


def _again(name: str) -> str:
    return ("regenerate, if the change is meant to: "
            f"python tests/golden/make.py --only {_OPTION[name]}")


RUN_FILES = [name for name in FILES if name != "greedy.csv"]
RECORDED = {(row["label"], row["case"]): (name, row)
            for name in RUN_FILES for row in _recorded(name)}


def test_every_run_has_one_recorded_row() -> None:
    assert sorted(RECORDED) == sorted((label, case) for label, _, _, case in RUNS)
    assert {name for name, _ in RECORDED.values()} == set(RUN_FILES)


@pytest.mark.parametrize(("label", "policy", "options", "case"), RUNS,
                         ids=[f"{label}-{case}" for label, _, _, case in RUNS])
def test_a_run_decides_what_was_recorded(label: str, policy: str, options: dict[str, object],
                                         case: str) -> None:
    name, want = RECORDED[(label, case)]
    got = run_row(label, policy, options, case)
    diff = {k: (got[k], v) for k, v in want.items() if got[k] != v}
    assert not diff, f"{label} on {case}, (now, recorded): {diff}; {_again(name)}"


@pytest.mark.parametrize(("seed", "jobs", "share"), GREEDY_EPOCHS,
                         ids=[f"s{s}-n{n}-r{r}" for s, n, r in GREEDY_EPOCHS])
def test_each_greedy_fill_chooses_the_recorded_counts(seed: int, jobs: int,
                                                      share: float) -> None:
    want = [r for r in _recorded("greedy.csv")
            if (int(r["seed"]), int(r["jobs"]), float(r["running_share"])) == (seed, jobs, share)]
    assert greedy_rows(seed, jobs, share) == want, _again("greedy.csv")


def test_a_changed_decision_would_be_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The digests see one allocation moved by one slot."""
    import golden.cases as cases

    label, policy, options, case = RUNS[0]
    row = run_row(label, policy, options, case)
    real = cases.simulate

    def shifted(*args: object, **kw: object) -> object:
        r = real(*args, **kw)  # type: ignore[arg-type]
        t, job, server, role, count = r.allocations[0]
        r.allocations[0] = (t + 1, job, server, role, count)
        return r

    monkeypatch.setattr(cases, "simulate", shifted)
    moved = run_row(label, policy, options, case)
    assert moved["allocations"] != row["allocations"]
    assert {k for k in row if moved[k] != row[k]} == {"allocations"}
