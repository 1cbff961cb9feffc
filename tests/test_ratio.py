"""The competitive-ratio study and ``psched ratio``: consistent rows, files, one-line errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from psched.cli.main import main
from psched.runs.ratio import compare_jobs, instance_seed, ratio_instance, ratio_study, summarise
from psched.traces.synth import fig5_instance

SMALL = {"jobs": 6, "slots": 6, "servers": (3,), "policies": ["oasis", "fifo"]}


@pytest.mark.parametrize("seed", range(3))
def test_every_row_is_ordered_policies_below_opt_below_bounds(seed: int) -> None:
    specs, cluster = fig5_instance(4, seed=seed, n_jobs=6, slots=6)
    row = ratio_instance(specs, cluster, 6, servers=4, priority=(1.0, 100.0), seed=seed,
                         estimate_factors=(0.5, 2.0))
    assert row.opt_status == "optimal"
    for name, u in row.utility.items():
        assert u <= row.opt + row.tail + 1e-6, name
    for f, u in row.factors.items():
        assert u <= row.opt + row.tail + 1e-6, f
    assert row.lp >= row.opt - 1e-6
    # two independent computations of the window tail agree: the certificate is horizon-aware
    assert row.certificate_sharp == pytest.approx(row.certificate, rel=1e-12, abs=1e-9)
    assert row.certificate_sharp >= row.opt - 1e-6
    assert row.ratio >= 1 - 1e-9
    assert row.alpha >= 1.0


def test_study_is_reproducible_from_its_seed() -> None:
    a = ratio_study(2, seed=5, **SMALL)  # type: ignore[arg-type]
    b = ratio_study(2, seed=5, **SMALL)  # type: ignore[arg-type]
    assert [r.to_row() | {"opt_s": 0, "lp_s": 0} for r in a] == \
        [r.to_row() | {"opt_s": 0, "lp_s": 0} for r in b]
    assert len({r.seed for r in a}) == 2


def test_instance_seeds_differ_across_cells() -> None:
    seeds = {instance_seed(0, n, p, i) for n in (3, 6) for p in ((1, 100), (25, 100))
             for i in range(3)}
    assert len(seeds) == 12


def test_summary_counts_and_quantiles() -> None:
    rows = ratio_study(3, seed=1, **SMALL)  # type: ignore[arg-type]
    s = summarise(rows)
    assert s["all"]["instances"] == 3
    q = s["all"]["ratio"]
    assert q["min"] <= q["median"] <= q["p90"] <= q["max"]
    assert s["all"]["bound_over_opt"]["min"] >= 1 - 1e-9
    assert set(s["all"]["policy_over_opt"]) == {"oasis", "fifo"}


def test_worked_instance_adds_up() -> None:
    specs, cluster = fig5_instance(3, seed=2, n_jobs=6, slots=6)
    row = ratio_instance(specs, cluster, 6, servers=3, priority=(1.0, 100.0), seed=2,
                         policies=["oasis"])
    jobs = compare_jobs(specs, cluster, 6)
    assert sum(j["opt_utility"] for j in jobs) == pytest.approx(row.opt)
    assert sum(j["oasis_utility"] for j in jobs) == pytest.approx(row.utility["oasis"])


def test_cli_writes_table_csv_summary_and_figures(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r"
    rc = main(["ratio", "--instances", "1", "--jobs", "6", "--slots", "6", "--servers", "3,4",
               "--policies", "oasis,drf", "--factors", "2", "--seed", "3", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "OPT/oasis" in text and "# all: 2 instances" in text
    with open(out / "ratio.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2 and {"utility_oasis", "utility_drf", "opt", "lp", "certificate",
                               "oasis_x2"} <= set(rows[0])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["summary"]["all"]["instances"] == 2
    assert {"ratio_theorem.png", "ratio_distribution.png", "ratio_factors.png"} <= \
        {p.name for p in out.iterdir()}


@pytest.mark.parametrize("argv, field", [
    (["--servers", "1,3"], "servers"),
    (["--servers", "3,x"], "servers"),
    (["--priorities", "50:10"], "priorities"),
    (["--priorities", "1-100"], "priorities"),
    (["--factors", "0"], "factors"),
    (["--policies", "nosuch"], "policies"),
])
def test_cli_bad_argument_is_one_line_exit_2(argv: list[str], field: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["ratio", "--instances", "1", *argv])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and field in err and "Traceback" not in err
