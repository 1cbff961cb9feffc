"""The robustness figures in BENCHMARKS are those of the committed cells
(``benchmarks/results/robustness_cells.csv``), as ``bench_robustness.py --summary`` prints
them, and the claims beside them hold in every cell."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_robustness as br  # noqa: E402

CELLS = br.RESULTS / "robustness_cells.csv"


def test_benchmarks_prints_the_robustness_tables_of_the_committed_cells() -> None:
    text = (ROOT / "BENCHMARKS.md").read_text()
    section = text[text.index("### Robustness"):]
    for line in br.summary(br.read_cells(CELLS), 200):
        assert line in section, line


def test_no_cell_of_any_policy_drops_an_admitted_job() -> None:
    rows = br.read_cells(CELLS)
    assert {r["policy"] for r in rows} >= {"oasis", "oasis-rp", "fifo", "srtf"}
    assert [r for r in rows if r["dropped"]] == []


@pytest.mark.parametrize("policy", ["oasis", "oasis-rp"])
def test_a_promising_policy_finishes_every_job_it_admits_in_every_cell(policy: str) -> None:
    rows = [r for r in br.read_cells(CELLS) if r["policy"] == policy]
    assert {r["jobs"] for r in rows} == {200, 1000}
    assert {(r["jobs"], r["reality"]) for r in rows} == {
        (n, label) for n in (200, 1000) for label, _ in br.REALITIES}  # every row, both sizes
    assert [r for r in rows if r["unfinished"] and not r["oracle"]] == []  # (oracles aside)


def test_no_cell_of_a_promising_policy_misses_a_promise_as_benchmarks_says() -> None:
    rows = [r for r in br.read_cells(CELLS) if r["policy"] in ("oasis", "oasis-rp")]
    assert [r for r in rows if r["missed"] or r["kept"] != r["promised"]] == []
    kept = sum(r["kept"] for r in rows)
    text = " ".join((ROOT / "BENCHMARKS.md").read_text().split())
    assert f"No cell misses a promise: {kept:,} kept of {kept:,}" in text


def test_every_reality_of_a_cell_is_a_row_of_the_benchmark() -> None:
    labels = {label for label, _ in br.REALITIES}
    assert {r["reality"] for r in br.read_cells(CELLS)} <= labels


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(1.0, 1e4), st.floats(1.0, 1e4)), min_size=1, max_size=8))
def test_the_interval_over_seeds_lies_between_the_worst_and_best_seed(
        pairs: list[tuple[float, float]]) -> None:
    real, oracle = zip(*pairs, strict=True)
    ratios = [r / o for r, o in pairs]
    low, high = br.ratio_interval(real, oracle)
    assert min(ratios) * (1 - 1e-12) <= low <= high <= max(ratios) * (1 + 1e-12)
    assert br.ratio_interval(real, oracle) == (low, high)  # the same figures every time


def test_equal_ratios_on_every_seed_give_an_interval_of_one_point() -> None:
    assert br.ratio_interval([1.0, 2.0, 4.0], [2.0, 4.0, 8.0]) == (0.5, 0.5)


def test_benchmarks_states_the_start_up_rows_intervals_of_the_committed_cells() -> None:
    rows = [r for r in br.read_cells(CELLS) if r["jobs"] == 200 and r["policy"] == "oasis-rp"]
    said = []
    for label in ("R=1 sj=0.1 ss=0.1 st=0.5", "R=1 sj=0.2 ss=0.1 st=0.5"):
        real = {r["seed"]: r["utility"] for r in rows if r["reality"] == label
                and not r["oracle"]}
        orc = {r["seed"]: r["utility"] for r in rows if r["reality"] == label and r["oracle"]}
        low, high = br.ratio_interval([real[s] for s in sorted(real)],
                                      [orc[s] for s in sorted(real)])
        said.append(f"{low:.2f}–{high:.2f}")
    text = " ".join((ROOT / "BENCHMARKS.md").read_text().split())
    assert f"place the ratios within {said[0]} and {said[1]}" in text


def test_a_stem_keeps_other_seeds_beside_the_committed_cells(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    rows = [r for r in br.read_cells(CELLS) if r["jobs"] == 200]
    monkeypatch.setattr(br, "RESULTS", tmp_path)
    br._write_cells(tmp_path / "other_cells.csv", rows)
    br.main(["--jobs", "200", "--stem", "other", "--summary"])
    assert capsys.readouterr().out.splitlines() == br.summary(rows, 200)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other_cells.csv"]


@pytest.mark.parametrize("stem", ["../robustness", "a/b", ".hidden"])
def test_a_stem_that_is_not_a_file_name_is_refused(stem: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as end:
        br.main(["--stem", stem, "--summary"])
    assert end.value.code == 2
    assert "--stem: expected a file name stem" in capsys.readouterr().err
