"""The policy table (BENCHMARKS.md section 10): its cells, cap rule, ratio column, re-run rule,
and the table printed in BENCHMARKS.md being the one its committed cache renders."""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import policy_table as pt  # noqa: E402
from bench_dorm_window import parse_variant  # noqa: E402


def _cell(scenario: str, instance: str, policy: str, utility: float, *, completed: int = 1,
          status: str = "ok", wall_s: float = 1.0) -> pt.Cell:
    return pt.Cell(scenario=scenario, instance=instance, policy=policy, utility=utility,
                   completed=completed, jobs=10, wall_s=wall_s, status=status)


def _cells(*cells: pt.Cell) -> dict[tuple[str, str, str], pt.Cell]:
    return {(c.scenario, c.instance, c.policy): c for c in cells}


def test_a_capped_seed_shows_the_cap_never_a_number() -> None:
    cells = _cells(_cell("oasis-100", "0", "dorm", 5.0),
                   _cell("oasis-100", "1", "dorm", math.nan, status="cap", wall_s=301.4))
    text, value = pt.trace_summary(cells, "oasis-100", "dorm", [0, 1])
    assert text == "> 301 s (cap)" and math.isnan(value)


@pytest.mark.parametrize("seeds", [[0, 1, 2], [0, 1, 2, 3, 4]])
def test_missing_seeds_are_named_in_the_cell(seeds: list[int]) -> None:
    cells = _cells(_cell("oasis-100", "0", "fifo", 100.0, completed=4),
                   _cell("oasis-100", "1", "fifo", 300.0, completed=6))
    text, value = pt.trace_summary(cells, "oasis-100", "fifo", seeds)
    assert text == f"200 ± 100 (5) [2/{len(seeds)} seeds]" and value == 200.0


def test_ratio_uses_only_proven_optima_and_is_infinite_when_the_policy_earns_nothing() -> None:
    keys = ["a", "b", "c"]
    cells = _cells(_cell("fig5", "a", pt.OPT, 10.0, status="optimal"),
                   _cell("fig5", "a", "rrh", 5.0),
                   _cell("fig5", "b", pt.OPT, 10.0, status="time_limit"),
                   _cell("fig5", "b", "rrh", 1.0),
                   _cell("fig5", "c", pt.OPT, 4.0, status="optimal"),
                   _cell("fig5", "c", "rrh", 0.0))
    text, value = pt.ratio_summary(cells, "rrh", keys)
    assert text.endswith("/ ∞ [2/3]")  # b's OPT is not proven: left out, and said so
    assert value == -math.inf  # median of [2, inf]


@pytest.mark.parametrize(("values", "median", "p90"), [
    ([2.0, 3.0, math.inf], 3.0, math.inf),
    ([2.0, math.inf], math.inf, math.inf),
    ([1.0, 2.0, 3.0, 4.0, math.inf, math.inf], 3.5, math.inf),
    ([1.0, 2.0, 4.0], 2.0, 3.6),
])
def test_a_ratio_quantile_is_infinite_only_where_an_infinite_ratio_reaches_it(
        values: list[float], median: float, p90: float) -> None:
    got = [pt.quantile(np.array(values), q) for q in (50, 90)]
    assert got == pytest.approx([median, p90])
    assert not any(math.isnan(x) for x in got)


def test_the_best_value_of_each_column_is_bold_and_only_it() -> None:
    cells = _cells(_cell("ef-195job", "0", "srtf", 5249.0, completed=194),
                   _cell("ef-195job", "0", "rrh", 4449.0, completed=77))
    table = pt.render(cells, ["rrh", "srtf"], ["ef-195job"], seeds=5, fig5_per_cell=1)
    assert "| rrh | 4,449 (77) |" in table and "| srtf | **5,249 (194)** |" in table


def test_force_re_measures_the_policies_but_not_a_cached_optimum(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[list[str]] = []

    def fake(n: int, prio: tuple[float, float], seed: int, names: Sequence[str],
             time_limit: float) -> Iterator[pt.Cell]:
        asked.append(list(names))
        key = pt.fig5_key(n, prio, seed)
        yield from (_cell("fig5", key, p, 1.0) for p in names)

    monkeypatch.setattr(pt, "fig5_cells", fake)
    keys = [pt.fig5_key(n, p, s) for n, p, s in pt.fig5_keys(1)]
    cells = _cells(*(_cell("fig5", k, p, 2.0, status="optimal" if p == pt.OPT else "ok")
                     for k in keys for p in ("rrh", pt.OPT)))
    writer = pt.CellWriter(tmp_path / "cells.csv")
    for force_opt, want in ((False, ["rrh"]), (True, ["rrh", pt.OPT])):
        asked.clear()
        args = argparse.Namespace(force=True, force_opt=force_opt, fig5_instances=1,
                                  time_limit=1.0, cap_s=1.0, seeds=1)
        pt.measure(args, ["rrh"], ["fig5"], dict(cells), writer)
        assert asked == [want] * len(keys)


def test_benchmarks_section_10_prints_the_table_of_the_committed_cache() -> None:
    text = (ROOT / "BENCHMARKS.md").read_text()
    section = text[text.index("\n## 10. "):text.index("\n## 11. ")]
    lines = section.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| policy | oasis-100"))
    printed = []
    for ln in lines[start:]:
        if not ln.startswith("|"):
            break
        printed.append(ln)
    cells = pt.read_cells(pt.RESULTS / "policy_table_cells.csv")
    known = pt.available_policies()
    shown = [p for p in known if any(k[2] == p for k in cells)]
    table = pt.render(cells, shown, list(pt.SCENARIOS), seeds=5, fig5_per_cell=7)
    assert printed == table.splitlines()
    waste = pt.render_waste(cells, shown, list(pt.SCENARIOS), seeds=5, fig5_per_cell=7)
    assert waste in section
    assert (pt.RESULTS / "policy_table.md").read_text().strip() == table + "\n\n" + waste


def test_waste_is_shown_only_where_every_run_of_the_column_measured_it() -> None:
    def cell(seed: int, unfinished: int, wasted: float) -> pt.Cell:
        return pt.Cell(scenario="oasis-100", instance=str(seed), policy="fifo", utility=1.0,
                       completed=1, jobs=10, wall_s=1.0, status="ok", unfinished=unfinished,
                       wasted_ws=wasted)
    both = _cells(cell(0, 5, 1755.0), cell(1, 0, 0.0))
    assert pt.waste_summary(both, "oasis-100", "fifo", ["0", "1"]) == "2.5 / 878"
    assert pt.waste_summary(both, "oasis-100", "fifo", ["0", "1", "2"]) == ""  # seed 2 missing
    older = _cells(cell(0, 5, 1755.0), _cell("oasis-100", "1", "fifo", 1.0))  # not measured
    assert pt.waste_summary(older, "oasis-100", "fifo", ["0", "1"]) == ""


@pytest.mark.parametrize(("text", "want"), [
    ("dorm", ("dorm", {})),
    ("elastic-mip:mip_rel_gap=1e-4;time_limit_s=1", ("elastic-mip",
                                                      {"mip_rel_gap": 1e-4, "time_limit_s": 1})),
])
def test_window_bench_variants_parse(text: str, want: tuple[str, dict]) -> None:
    assert parse_variant(text) == want


@pytest.mark.parametrize("bad", ["dorm:max_jobs", "dorm:theta=half"])
def test_window_bench_refuses_a_malformed_option_in_one_line(bad: str) -> None:
    with pytest.raises(SystemExit, match=re.escape("bench_dorm_window: --policy")):
        parse_variant(bad)


@pytest.mark.parametrize("name", ["dorm", "elastic-mip"])
def test_the_readme_window_default_is_the_policys(name: str) -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "on at most `max_jobs` jobs per decision (256 by default for both," in readme
    assert pt.make_policy(name).max_jobs == 256


def test_compare_lists_exactly_the_cells_that_changed() -> None:
    old = _cells(_cell("ef-cluster04", "0", "optimus", math.nan, status="cap", wall_s=301.0),
                 _cell("ef-cluster04", "0", "srtf", 766643.0, completed=15802))
    new = {**old, **_cells(_cell("ef-cluster04", "0", "optimus", 665339.4, completed=15802))}
    out = pt.compare(old, new, ["optimus", "srtf"], ["ef-cluster04"], seeds=5, fig5_per_cell=1)
    assert out.splitlines()[2:] == ["| optimus | ef-cluster04 | > 301 s (cap) | 665,339 (15802) |"]


@pytest.mark.parametrize(("text", "want"), [("3", 3), ("5-9", [5, 6, 7, 8, 9]),
                                            ("0-2,7", [0, 1, 2, 7]), ("7-7", [7])])
def test_seeds_are_a_count_or_a_list_of_seeds_and_ranges(text: str, want: int | list[int]) -> None:
    assert pt.parse_seeds(text) == want


@pytest.mark.parametrize("bad", ["", "a", "5-", "-1", "9-5", "1,,2"])
def test_a_malformed_seed_list_is_refused(bad: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        pt.parse_seeds(bad)


@pytest.mark.parametrize(("table", "seeds", "want"), [
    ("eval", None, {"oasis-100": [5, 6, 7, 8, 9], "philly-80000": [0, 1, 2]}),
    ("main", None, {"oasis-100": [0, 1, 2, 3, 4]}),
    ("eval", 2, {"oasis-100": [0, 1], "philly-80000": [0, 1]}),
    ("eval", [7, 9], {"efsplit-195job": [7, 9], "philly-2000": [7, 9]}),
])
def test_each_scenario_is_measured_at_its_tables_seeds_unless_seeds_are_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str,
        seeds: int | list[int] | None, want: dict[str, list[int]]) -> None:
    asked: dict[str, list[int]] = {}

    def fake(scenario: str, seed: int, policies: Sequence[str],
             cap_s: float) -> Iterator[pt.Cell]:
        asked.setdefault(scenario, []).append(seed)
        yield from (_cell(scenario, str(seed), p, 1.0) for p in policies)

    monkeypatch.setattr(pt, "trace_cells", fake)
    args = argparse.Namespace(table=table, seeds=seeds, map_seeds=[0], force=False,
                              force_opt=False, cap_s=1.0)
    pt.measure(args, ["fifo"], list(want), {}, pt.CellWriter(tmp_path / "cells.csv"))
    assert asked == want


_EVAL_CSV = """scenario,instance,policy,utility,completed,jobs,wall_s,status,measured_at,commit
philly-2000,0,oasis,900.0,80,2000,9.0,ok,,
philly-2000,0,oasis-rp,1200.0,90,2000,30.0,ok,,
philly-2000,0,srtf,1000.0,99,2000,2.0,ok,,
philly-2000,0,rrh,800.0,95,2000,2.0,ok,,
philly-2000,1,oasis,1500.0,80,2000,9.0,ok,,
philly-2000,1,oasis-rp,900.0,90,2000,30.0,ok,,
philly-2000,1,srtf,1000.0,99,2000,2.0,ok,,
philly-2000,1,rrh,800.0,95,2000,2.0,ok,,
efsplit-195job,0,oasis-rp,2800.0,52,98,3.0,ok,,
efsplit-195job,0,srtf,2000.0,90,98,0.1,ok,,
efsplit-195job,0,rrh,nan,-1,98,900.3,cap,,
efsplit-195job,1,oasis-rp,nan,-1,98,900.1,cap,,
efsplit-195job,1,srtf,2000.0,90,98,0.1,ok,,
"""


def test_the_evaluation_table_sets_the_focus_against_the_best_rival_row_by_row(
        tmp_path: Path) -> None:
    (tmp_path / "cells.csv").write_text(_EVAL_CSV)
    cells = pt.read_cells(tmp_path / "cells.csv")
    rows = {"philly-2000": (0, 1), "efsplit-195job": (0, 1, 2)}
    text = pt.render_eval(cells, ["oasis", "oasis-rp", "rrh", "srtf"], rows, "oasis-rp")
    assert text.startswith("**oasis-rp is at or above the best rival on 2 of 4 measured rows** "
                           "(5 rows in all); below on: philly-2000 seed 1, efsplit-195job seed 1")
    assert "| efsplit-195job | 1 | 98 | > 900 s (cap) |  | srtf 2,000 [1 of 2 capped or" in text
    assert ("| philly-2000 | 0 | 2000 | 1,200 (90) | oasis-rp 1,200 | srtf 1,000 | 1.200 | "
            "✓ 1.200 |") in text
    assert ("| philly-2000 | 1 | 2000 | 900 (90) | oasis 1,500 | srtf 1,000 | 1.500 | "
            "✗ 0.900 |") in text  # the best of the family is not the focus here
    assert ("| efsplit-195job | 0 | 98 | 2,800 (52) | oasis-rp 2,800 | srtf 2,000 "
            "[1 of 2 capped or missing] | 1.400 | ✓ 1.400 |") in text
    assert ("| efsplit-195job | 0 |  | **2,800 (52)** | > 900 s (cap) | 2,000 (90) |"
            in text)  # the matrix: every policy's value, the row's best in bold


def test_the_committed_evaluation_table_is_the_one_its_cache_renders() -> None:
    cells = pt.read_cells(pt.RESULTS / "policy_table_cells.csv")
    shown = [p for p in pt.available_policies() if any(k[2] == p for k in cells)]
    table = pt.render_eval(cells, shown, pt.EVAL_ROWS, "oasis-rp")
    assert (pt.RESULTS / "policy_table_eval.md").read_text().strip() == table
