"""The Python API for notebooks: :func:`compare` runs policies like ``psched simulate`` and
returns :class:`Results`, whose tables are pandas DataFrames.

Examples
--------
>>> import psched
>>> res = psched.compare("traces/demo_sim.csv", policies="fifo,oasis")  # doctest: +SKIP
>>> res.summary[["total_utility", "jct_mean_h"]]                         # doctest: +SKIP
>>> res.plot_schedule("oasis")                                           # doctest: +SKIP
>>> res.save("out/demo")                                                 # doctest: +SKIP

:func:`compare` is :func:`psched.runs.runner.run_simulation` -- the function behind the CLI -- so
its numbers are the CLI's (``tests/test_api.py`` holds them equal).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from psched.core.model import Cluster, JobSpec
from psched.core.records import RunResult
from psched.core.simulator import simulate as _simulate

__all__ = ["Results", "compare", "simulate"]


@dataclass(frozen=True, kw_only=True)
class Results:
    """What :func:`compare` returns: the ``summary.json`` dict, the runs, and views of them."""

    summary_dict: dict[str, Any]  #: exactly what ``summary.json`` would hold
    runs: dict[str, RunResult]  #: per policy, the simulator's result
    cluster: Cluster  #: the cluster every policy ran on

    @property
    def params(self) -> dict[str, Any]:
        """The run's parameters (``summary.json``'s ``params``)."""
        return dict(self.summary_dict["params"])

    @property
    def warnings(self) -> list[str]:
        """Results that are easy to misread (:func:`psched.results.summary.pitfalls`)."""
        return list(self.summary_dict.get("warnings", []))

    @cached_property
    def summary(self) -> pd.DataFrame:
        """One row per policy (index), one column per scalar figure of ``summary.json``;
        utilisation as ``util_<pool>_<resource>``, rejection reasons as ``rejected_<reason>``."""
        rows = {}
        for name, entry in self.summary_dict["policies"].items():
            row: dict[str, Any] = {}
            for key, value in entry.items():
                if key == "utilization":
                    for pool, per in value.items():
                        row.update({f"util_{pool}_{r}": v for r, v in per.items()})
                elif key == "rejected_reasons":
                    row.update({f"rejected_{r}": n for r, n in value.items()})
                elif not isinstance(value, (dict, list)):
                    row[key] = value
            rows[name] = row
        frame = pd.DataFrame.from_dict(rows, orient="index")
        frame.index.name = "policy"
        return frame

    @cached_property
    def jobs(self) -> pd.DataFrame:
        """Every policy's ``jobs.csv`` stacked, with a ``policy`` column first."""
        from psched.results.report_data import jobs_frame

        return pd.concat([jobs_frame(r).assign(policy=n) for n, r in self.runs.items()],
                         ignore_index=True).pipe(_policy_first)

    @cached_property
    def allocations(self) -> pd.DataFrame:
        """Every policy's ``allocations.csv`` stacked, with a ``policy`` column first."""
        from psched.results.report_data import allocations_frame

        return pd.concat([allocations_frame(r).assign(policy=n) for n, r in self.runs.items()],
                         ignore_index=True).pipe(_policy_first)

    @cached_property
    def _run_files(self) -> Any:
        from psched.results.report_data import run_in_memory

        return run_in_memory(self.summary_dict, self.cluster, self.runs)

    def _files(self) -> Any:
        return self._run_files

    def plot_comparison(self) -> Any:
        """Utility (with the dual bound), completion times and rejections per policy."""
        from psched.results.report_plots import comparison

        return comparison(self._files())

    def plot_jct_cdf(self) -> Any:
        """The completion-time CDF per policy (hours)."""
        from psched.results.report_plots import jct_cdf

        return jct_cdf(self._files())

    def plot_schedule(self, policy: str, max_rects: int = 40000) -> Any:
        """The executed schedule of ``policy`` as a Gantt chart (servers x slots)."""
        from psched.results.report_data import usage_of
        from psched.results.report_plots import gantt

        run = self._files()
        return gantt(run, policy, usage_of(run, policy), max_rects=max_rects)[0]

    def plot_utilisation(self, policy: str) -> Any:
        """Share of each pool's capacity in use, per resource, over time."""
        from psched.results.report_data import usage_of
        from psched.results.report_plots import utilisation

        run = self._files()
        return utilisation(run, policy, usage_of(run, policy))

    def plot_prices(self, policy: str) -> Any:
        """Mean price of each pool over time (a policy that reports price bounds, e.g.
        OASiS); ``ValueError`` for a policy without prices."""
        from psched.results.report_data import mean_prices, usage_of
        from psched.results.report_plots import prices

        run = self._files()
        usage = usage_of(run, policy)
        mean = mean_prices(run, policy, usage)
        if mean is None:
            raise ValueError(f"policy {policy!r} reports no prices")
        return prices(run, policy, usage, mean)

    def save(self, folder: str | os.PathLike[str], *, overwrite: bool = False,
             plots: bool = True) -> Path:
        """Write the ``psched simulate --out`` files (and ``report.html``) into ``folder``,
        under the same rules (:func:`psched.results.output.check_out`); return the folder."""
        from psched.results.output import write_run

        write_run(folder, self.params, self.cluster, self.runs, plots=plots,
                  overwrite=overwrite, summary=self.summary_dict)
        return Path(folder)


def _policy_first(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[["policy", *[c for c in frame.columns if c != "policy"]]]


def compare(trace_or_jobs: str | os.PathLike[str] | Sequence[JobSpec],
            cluster: str | os.PathLike[str] | Cluster | None = None,
            policies: str | Sequence[str] = "all", *, progress: bool = False,
            **options: Any) -> Results:
    """Run ``policies`` on the same jobs and cluster, as ``psched simulate`` does.

    Parameters
    ----------
    trace_or_jobs : path or sequence of JobSpec
        A trace file in any supported format, or job specs already in memory.
    cluster : path, Cluster or None
        A cluster file, a :class:`~psched.core.model.Cluster`, or None for the default (sized to
        the jobs at ``load``).
    policies : str or sequence of str
        ``"all"``, a comma-separated string or a list of registered policy names.
    progress : bool
        Show progress on stderr (default False).
    **options
        Any other field of :class:`psched.runs.runner.SimulateRequest`: ``jobs``, ``format``,
        ``slots``, ``slot_seconds``, ``seed``, ``load``, ``max_window``,
        ``price_estimate_factor``, ``history``, ``check``, ``reality`` (how jobs really run:
        a :class:`~psched.core.reality.Reality`, a dict of its fields or
        ``"rate=0.9,sigma_job=0.1"``; default the model).

    Returns
    -------
    Results

    Raises
    ------
    psched.core.errors.InputError
        Bad input (the message names the file, line and field).
    TypeError
        An option :class:`~psched.runs.runner.SimulateRequest` does not have.
    """
    from psched.runs.runner import SimulateRequest, run_simulation

    names = policies if isinstance(policies, str) else ",".join(policies)
    if isinstance(trace_or_jobs, (str, os.PathLike)):
        trace, specs = os.fspath(trace_or_jobs), None
    else:
        trace, specs = None, list(trace_or_jobs)
    cluster_file = os.fspath(cluster) if isinstance(cluster, (str, os.PathLike)) else None
    cluster_obj = cluster if isinstance(cluster, Cluster) else None
    for reserved in ("out", "trace", "scenario", "cluster", "policies", "progress"):
        if reserved in options:
            raise TypeError(f"compare() got an unexpected option {reserved!r}")
    req = SimulateRequest(trace=trace, cluster=cluster_file, policies=names, progress=progress,
                          plots=False, **options)
    summary, runs = run_simulation(req, jobs=specs, cluster=cluster_obj,
                                   command=f"psched.compare({trace or 'jobs'!s}, ...)")
    first = next(iter(runs.values()))
    return Results(summary_dict=summary, runs=runs, cluster=first.cluster)


@functools.wraps(_simulate)
def simulate(specs: Any, *args: Any, **kwargs: Any) -> RunResult:
    if isinstance(specs, (str, os.PathLike)):
        raise TypeError(
            f"psched.simulate(specs, cluster, policy, horizon) replays job specs already in "
            f"memory, not a file ({os.fspath(specs)!r}); for a trace file use "
            f"psched.compare({os.fspath(specs)!r}, policies=...), which runs policies as "
            "'psched simulate' does and returns DataFrames")
    return _simulate(specs, *args, **kwargs)
