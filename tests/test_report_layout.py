"""The report's figures, laid out as they are drawn (matplotlib's Agg renderer): in the
side-by-side charts no legend covers an axis label, a tick label or another legend; every
policy's CDF line has its own colour (all policies at once); a Gantt chart of many jobs gives
each job its own colour and writes ids that do not overlap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from psched.cli.main import main
from psched.policies import available_policies
from psched.results import report_plots
from psched.results.report_data import load_run, usage_of

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "traces" / "demo_sim.csv"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("layout") / "out"
    assert main(["simulate", "--trace", str(DEMO), "--jobs", "60", "--slots", "60",
                 "--policies", "all", "--no-plots", "--out", str(out)]) == 0
    return load_run(out)


def _boxes(fig: Any) -> tuple[Any, list[Any], list[Any]]:
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    labels = []
    for ax in fig.axes:
        labels.append(ax.xaxis.label.get_window_extent(renderer))
        labels += [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text()]
    legends = [ax.get_legend().get_window_extent(renderer) for ax in fig.axes
               if ax.get_legend() is not None]
    return renderer, labels, legends


def test_every_policy_is_in_the_run_and_has_its_own_cdf_colour(run: Any) -> None:
    assert sorted(run.policies) == sorted(available_policies())
    fig = report_plots.jct_cdf(run)
    colours = [tuple(np.round(line.get_color(), 4)) if not isinstance(line.get_color(), str)
               else line.get_color() for line in fig.axes[0].get_lines()]
    assert len(colours) == len(run.policies) == len(set(colours))


@pytest.mark.parametrize("n", [1, 10, 11, 18, 19, 60, 500])
def test_distinct_colours_are_distinct(n: int) -> None:
    colours = report_plots.distinct_colours(n)
    assert colours.shape == (n, 4)
    assert len({tuple(np.round(c, 6)) for c in colours}) == n


def test_no_legend_covers_a_label_in_the_side_by_side_charts(run: Any) -> None:
    fig = report_plots.comparison(run)
    _, labels, legends = _boxes(fig)
    assert len(legends) == 3
    for legend in legends:
        assert not any(legend.overlaps(label) for label in labels)
    for i, a in enumerate(legends):
        assert not any(a.overlaps(b) for b in legends[i + 1:])


def test_a_gantt_chart_of_60_jobs_gives_each_its_colour_and_readable_ids(run: Any) -> None:
    policy = "srtf"
    fig, note = report_plots.gantt(run, policy, usage_of(run, policy))
    ax = fig.axes[0]
    jobs = run.policies[policy].allocations["job_id"].nunique()
    assert jobs >= 50
    faces = ax.collections[0].get_facecolors()
    assert len({tuple(np.round(c, 6)) for c in faces}) == jobs  # one colour per job
    renderer, _, _ = _boxes(fig)
    ids = [t for t in ax.texts if t.get_text()]
    assert ids and "ids written" in note
    boxes = [t.get_window_extent(renderer) for t in ids]
    for i, a in enumerate(boxes):
        assert not any(a.overlaps(b) for b in boxes[i + 1:]), ids[i].get_text()
