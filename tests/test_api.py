"""``psched.compare``: the CLI's numbers as DataFrames, plots and the same ``--out`` files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

import psched
from psched.cli.main import main
from psched.results.output import JOBS_COLUMNS
from psched.traces import load_any

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "traces" / "demo_sim.csv"
POLICIES = "fifo,srtf,oasis"
OPTIONS = {"jobs": 15, "slots": 50, "seed": 2}


@pytest.fixture(scope="module")
def results() -> psched.Results:
    return psched.compare(DEMO, policies=POLICIES, **OPTIONS)


@pytest.fixture(scope="module")
def cli_summary(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("api") / "out"
    assert main(["simulate", "--trace", str(DEMO), "--policies", POLICIES, "--jobs", "15",
                 "--slots", "50", "--seed", "2", "--no-plots", "--out", str(out)]) == 0
    return json.loads((out / "summary.json").read_text())


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


@pytest.mark.parametrize("policy", POLICIES.split(","))
def test_compare_equals_the_cli_summary(results: psched.Results, cli_summary: dict,
                                        policy: str) -> None:
    api = json.loads(json.dumps(results.summary_dict["policies"][policy], default=str))
    cli = cli_summary["policies"][policy]
    skip = {"wall_s", "decision_ms_p50", "decision_ms_p99"}  # measured, not computed
    assert set(api) == set(cli)
    for key in set(cli) - skip:
        assert api[key] == cli[key], key
    assert results.summary_dict["params"]["horizon"] == cli_summary["params"]["horizon"]


def test_summary_jobs_and_allocations_are_dataframes(results: psched.Results) -> None:
    s = results.summary
    assert isinstance(s, pd.DataFrame) and list(s.index) == POLICIES.split(",")
    assert s.loc["oasis", "total_utility"] == results.summary_dict["policies"]["oasis"][
        "total_utility"]
    assert {"jct_mean_h", "makespan_h", "util_worker_gpu"} <= set(s.columns)
    jobs = results.jobs
    assert list(jobs.columns) == ["policy", *JOBS_COLUMNS]
    assert len(jobs) == 15 * 3
    for name, run in results.runs.items():
        mine = jobs[jobs.policy == name]
        assert mine["utility"].sum() == pytest.approx(
            results.summary_dict["policies"][name]["total_utility"])
        assert len(results.allocations.query("policy == @name")) == len(run.allocations)
    assert list(results.allocations.columns) == ["policy", "slot", "job_id", "server", "role",
                                                 "count"]


def test_compare_takes_job_specs_in_memory_with_the_same_numbers(
        results: psched.Results) -> None:
    specs = load_any(str(DEMO), "auto", slot_seconds=3600.0, seed=2)
    again = psched.compare(specs, policies=POLICIES, **OPTIONS)
    for name in POLICIES.split(","):
        a, b = again.summary_dict["policies"][name], results.summary_dict["policies"][name]
        assert a["total_utility"] == b["total_utility"] and a["admitted"] == b["admitted"]


def test_compare_takes_a_cluster_object(results: psched.Results) -> None:
    again = psched.compare(DEMO, cluster=results.cluster, policies="fifo", **OPTIONS)
    assert again.summary_dict["policies"]["fifo"]["total_utility"] == \
        results.summary_dict["policies"]["fifo"]["total_utility"]


def test_simulate_with_a_path_points_to_compare() -> None:
    with pytest.raises(TypeError, match=r"psched\.compare"):
        psched.simulate(str(DEMO), policies="fifo")
    with pytest.raises(TypeError, match=r"psched\.compare"):
        psched.simulate(DEMO)


def test_compare_rejects_an_unknown_option() -> None:
    with pytest.raises(TypeError):
        psched.compare(DEMO, policies="fifo", no_such_option=1)


def _check_legible(fig: object) -> None:
    """Every axes with data has a title (or the figure one), both axis labels, and its
    legend, if any, outside the axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        assert ax.get_title() or fig._suptitle is not None
        shared = ax.get_shared_x_axes().get_siblings(ax)  # a shared x axis: labelled once
        assert any(a.get_xlabel() for a in shared) and ax.get_ylabel(), ax
        legend = ax.get_legend()
        if legend is not None:
            lb = legend.get_window_extent(renderer)
            ab = ax.get_window_extent(renderer)
            overlap = max(0.0, min(lb.x1, ab.x1) - max(lb.x0, ab.x0)) * \
                max(0.0, min(lb.y1, ab.y1) - max(lb.y0, ab.y0))
            assert overlap == 0.0, f"legend covers the data of {ax.get_title()!r}"


@pytest.mark.parametrize("plot", ["plot_comparison", "plot_jct_cdf", "schedule:fifo",
                                  "schedule:oasis", "utilisation:srtf", "prices:oasis"])
def test_plots_have_titles_axes_and_legends_outside_the_data(results: psched.Results,
                                                            plot: str) -> None:
    if ":" in plot:
        kind, policy = plot.split(":")
        fig = getattr(results, f"plot_{kind}")(policy)
    else:
        fig = getattr(results, plot)()
    _check_legible(fig)
    text = " ".join([fig._suptitle.get_text() if fig._suptitle else "",
                     *(ax.get_title() for ax in fig.axes)])
    assert text.strip()


def test_prices_of_a_policy_without_prices_is_a_clear_error(results: psched.Results) -> None:
    with pytest.raises(ValueError, match="no prices"):
        results.plot_prices("fifo")


def test_save_writes_the_cli_files_under_the_same_rules(results: psched.Results,
                                                        tmp_path: Path) -> None:
    out = results.save(tmp_path / "out")
    assert {p.name for p in out.iterdir()} >= {"summary.json", "cluster.json", "report.html",
                                              "fifo", "oasis", "srtf"}
    with pytest.raises(psched.core.errors.InputError, match="--overwrite"):
        results.save(out)
    results.save(out, overwrite=True, plots=False)  # replaced: the plots of the first are gone
    assert (out / "report.html").is_file() and not (out / "plots").exists()


def test_plots_leave_the_matplotlib_backend_alone(results: psched.Results) -> None:
    """A notebook's inline backend must survive: figures are made outside pyplot."""
    import matplotlib

    before = matplotlib.get_backend()
    results.plot_comparison()
    results.plot_schedule("oasis")
    assert matplotlib.get_backend() == before
