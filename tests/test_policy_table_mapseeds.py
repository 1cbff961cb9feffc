"""The policy table's ElasticFlow mapping draws (``--map-seeds``, BENCHMARKS section 11,
"Other mapping draws"): the per-draw table, its bold best, the focus policy against its best
rival, the seeds measured, and the option's parsing."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import policy_table as pt  # noqa: E402


def _cell(scenario: str, instance: str, policy: str, utility: float,
          completed: int = 1) -> pt.Cell:
    return pt.Cell(scenario=scenario, instance=instance, policy=policy, utility=utility,
                   completed=completed, jobs=10, wall_s=1.0, status="ok")


def _cells(*cells: pt.Cell) -> dict[tuple[str, str, str], pt.Cell]:
    return {(c.scenario, c.instance, c.policy): c for c in cells}


def test_each_draw_is_a_column_with_its_best_in_bold_and_the_focus_against_its_best_rival(
        ) -> None:
    cells = _cells(_cell("ef-195job", "0", "oasis-rp", 6669.0, 100),
                   _cell("ef-195job", "0", "srtf", 5249.0, 194),
                   _cell("ef-195job", "1", "oasis-rp", 4000.0, 90),
                   _cell("ef-195job", "1", "rrh", 5188.0, 109),
                   _cell("ef-195job", "1", "srtf", 4296.0, 194))
    text = pt.render_map_seeds(cells, ["oasis-rp", "rrh", "srtf"], ["ef-195job"], [0, 1],
                               "oasis-rp")
    assert "| oasis-rp | **6,669 (100)** | 4,000 (90) |" in text
    assert "| rrh |  | **5,188 (109)** |" in text
    assert "| ef-195job | 0 | 6,669 (100) | srtf 5,249 | +27.1% |" in text
    assert "| ef-195job | 1 | 4,000 (90) | rrh 5,188 | -22.9% |" in text


@pytest.mark.parametrize(("text", "seeds"), [("0", [0]), ("0,1,2,3,4", [0, 1, 2, 3, 4]),
                                             ("3,1", [3, 1])])
def test_map_seeds_parse_as_a_list(text: str, seeds: list[int]) -> None:
    assert pt._seed_list(text) == seeds


@pytest.mark.parametrize("text", ["", "a", "1,,2", "-1", "0,-2"])
def test_bad_map_seeds_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        pt._seed_list(text)


def test_elasticflow_cells_are_measured_for_every_map_seed_and_paper_cells_for_every_seed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, int]] = []

    def fake(scenario: str, seed: int, policies: Sequence[str],
             cap_s: float) -> Iterator[pt.Cell]:
        asked.append((scenario, seed))
        yield from (_cell(scenario, str(seed), p, 1.0) for p in policies)

    monkeypatch.setattr(pt, "trace_cells", fake)
    args = argparse.Namespace(force=False, force_opt=False, seeds=2, map_seeds=[0, 3],
                              fig5_instances=1, cap_s=1.0, time_limit=1.0)
    writer = pt.CellWriter(tmp_path / "cells.csv")
    pt.measure(args, ["fifo"], ["ef-195job", "oasis-100"], {}, writer)
    assert asked == [("ef-195job", 0), ("ef-195job", 3), ("oasis-100", 0), ("oasis-100", 1)]
