"""The robustness figures in BENCHMARKS are those of the committed cells
(``benchmarks/results/robustness_cells.csv``), as ``bench_robustness.py --summary`` prints
them, and the claims beside them hold in every cell."""

from __future__ import annotations

import sys
from pathlib import Path

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


def test_oasis_rp_finishes_every_job_it_admits_in_every_cell() -> None:
    rows = [r for r in br.read_cells(CELLS) if r["policy"] == "oasis-rp"]
    assert {r["jobs"] for r in rows} == {200, 1000}
    assert [r for r in rows if r["unfinished"]] == []


def test_every_reality_of_a_cell_is_a_row_of_the_benchmark() -> None:
    labels = {label for label, _ in br.REALITIES}
    assert {r["reality"] for r in br.read_cells(CELLS)} <= labels
