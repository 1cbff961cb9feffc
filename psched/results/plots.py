"""The PNG figures of ``--out DIR/plots``: the policies side by side (utility with the dual
bound, completion times, rejections) and the completion-time CDF, each naming the trace and
cluster (drawn by :mod:`psched.results.report_plots`, as in ``report.html``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from psched.core.model import Cluster
from psched.core.records import RunResult

__all__ = ["plot_run"]


def plot_run(folder: Path, summary: Mapping[str, Any], results: Mapping[str, RunResult],
             cluster: Cluster | None = None) -> None:
    """Write ``utility.png`` (the policies side by side) and ``jct_cdf.png`` into ``folder``."""
    from psched.results.report_data import run_in_memory
    from psched.results.report_plots import comparison, jct_cdf, png

    if cluster is None:
        cluster = next(iter(results.values())).cluster
    run = run_in_memory(dict(summary), cluster, dict(results))
    (folder / "utility.png").write_bytes(png(comparison(run)))
    (folder / "jct_cdf.png").write_bytes(png(jct_cdf(run)))
