"""``psched trace inspect``: what a trace holds, as text and a PNG.

Jobs and skipped rows, the span, the arrival rate over time, and the distributions of GPUs
per job and of run time -- as the trace states them (before mapping) for public formats, and
of the mapped work for every format.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from psched.traces.detect import Paths, load_with_report

__all__ = ["TraceStats", "format_stats", "inspect_trace", "plot_stats"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class TraceStats:
    """Summary of one trace."""

    source: str  #: file(s) read
    fmt: str  #: format used
    rows: int  #: job rows read
    jobs: int  #: jobs after filters
    skipped: dict[str, int] = field(default_factory=dict)  #: reason -> rows
    slot_seconds: float  #: slot length of the mapping
    arrivals: np.ndarray  #: arrival slot of every job
    gpus: np.ndarray  #: GPUs of every job as the trace ran it (native: worker GPU x N)
    duration_s: np.ndarray  #: run time (native: fastest duration x slot), seconds
    work: np.ndarray  #: W, worker-slots
    max_workers: np.ndarray  #: N after mapping
    statuses: dict[str, int] = field(default_factory=dict)  #: trace status -> rows read
    utility_kinds: dict[str, int] = field(default_factory=dict)  #: utility kind -> jobs


def inspect_trace(path_or_paths: Paths, fmt: str = "auto", **options: Any) -> TraceStats:
    """Load ``path_or_paths`` (any format) and summarise it. O(n log n)."""
    from psched.traces.detect import detect_format, read_rows
    from psched.traces.mapping import MappingOptions, map_rows

    fmt = detect_format(path_or_paths) if fmt == "auto" else fmt
    slot = float(options.get("slot_seconds", 3600.0))
    statuses: dict[str, int] = {}
    if fmt == "native":
        specs, report, fmt = load_with_report(path_or_paths, fmt, **options)
        work = np.array([s.work(slot) for s in specs], dtype=float)
        nmax = np.array([s.max_workers for s in specs], dtype=float)
        gpus = np.array([s.worker_demand.gpu * s.max_workers for s in specs], dtype=float)
        dur = np.ceil(work / np.maximum(nmax, 1)) * slot
    else:
        opts = MappingOptions(**options)
        fmt, rows = read_rows(path_or_paths, fmt, model_map=dict(opts.model_map))
        specs, report = map_rows(rows, opts)
        statuses = dict(Counter(r.status for r in rows))
        work = np.array([s.work(slot) for s in specs], dtype=float)
        nmax = np.array([s.max_workers for s in specs], dtype=float)
        by_id = {r.job_id: r for r in rows}
        kept = [by_id[s.job_id] for s in specs]
        gpus = np.array([r.workers * (r.worker_demand.gpu if r.worker_demand else 1.0)
                         for r in kept], dtype=float)
        dur = np.array([r.duration_s for r in kept], dtype=float)
    source = path_or_paths if isinstance(path_or_paths, (str, os.PathLike)) else ", ".join(
        map(str, path_or_paths))
    return TraceStats(source=str(source), fmt=fmt, rows=report.rows, jobs=len(specs),
                      skipped=dict(report.skipped), slot_seconds=slot,
                      arrivals=np.array([s.arrival for s in specs], dtype=int), gpus=gpus,
                      duration_s=dur, work=work, max_workers=nmax, statuses=statuses,
                      utility_kinds=dict(Counter(s.utility.kind for s in specs)))


def _quantiles(x: np.ndarray) -> str:
    if x.size == 0:
        return "-"
    q = np.percentile(x, [0, 50, 90, 99, 100])
    return " / ".join(f"{v:.4g}" for v in q)


def format_stats(st: TraceStats, bins: int = 12) -> str:
    """The text report of :func:`inspect_trace`."""
    out = [f"{st.source} ({st.fmt}): {st.rows} rows, {st.jobs} jobs"]
    if st.statuses:
        out.append("statuses read: " + ", ".join(f"{k} {v}" for k, v in sorted(
            st.statuses.items())))
    if st.skipped:
        out.append("skipped: " + ", ".join(f"{k} {v}" for k, v in sorted(st.skipped.items())))
    if st.utility_kinds:
        out.append("utilities: " + ", ".join(f"{k} {v}" for k, v in sorted(
            st.utility_kinds.items())))
    if st.jobs == 0:
        return "\n".join(out)
    span = int(st.arrivals.max()) + 1
    out.append(f"span: {span} slots of {st.slot_seconds:g} s ({span * st.slot_seconds / 86400:.1f}"
               f" days); mean arrival rate {st.jobs / span:.3g} jobs/slot")
    edges = np.linspace(0, span, min(bins, span) + 1)
    counts, _ = np.histogram(st.arrivals, bins=edges)
    peak = max(1, int(counts.max()))
    out.append("arrivals over time (jobs per bin):")
    for lo, hi, c in zip(edges[:-1], edges[1:], counts, strict=True):
        out.append(f"  slots {lo:8.0f}-{hi:8.0f}  {c:7d}  {'#' * round(40 * c / peak)}")
    gpu_counts = Counter(st.gpus.tolist())
    out.append("GPUs per job (count): " + ", ".join(
        f"{g:g}: {n}" for g, n in sorted(gpu_counts.items())[:16])
        + (" ..." if len(gpu_counts) > 16 else ""))
    out.append(f"run time s (min / p50 / p90 / p99 / max): {_quantiles(st.duration_s)}")
    out.append(f"work W worker-slots (min / p50 / p90 / p99 / max): {_quantiles(st.work)}")
    out.append(f"max workers N (min / p50 / p90 / p99 / max): {_quantiles(st.max_workers)}")
    out.append(f"GPU-slots in all: {float(np.sum(st.work)):.6g}")
    return "\n".join(out)


def plot_stats(st: TraceStats, png: str | os.PathLike[str]) -> None:
    """Arrivals over time, GPUs per job and run-time distribution in one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(14, 3.8))
    if st.jobs:
        span = int(st.arrivals.max()) + 1
        ax[0].hist(st.arrivals, bins=min(100, span), color="tab:blue")
        g, n = np.unique(st.gpus, return_counts=True)
        ax[1].bar([f"{v:g}" for v in g], n, color="tab:orange")
        ax[1].set_yscale("log")
        d = np.sort(st.duration_s)
        ax[2].plot(np.maximum(d, 1.0), np.arange(1, d.size + 1) / d.size, color="tab:green")
        ax[2].set_xscale("log")
    ax[0].set(title="arrivals", xlabel=f"slot ({st.slot_seconds:g} s)", ylabel="jobs")
    ax[1].set(title="GPUs per job", xlabel="GPUs", ylabel="jobs")
    ax[2].set(title="run time CDF", xlabel="seconds", ylabel="fraction of jobs")
    fig.suptitle(f"{os.path.basename(st.source)} ({st.fmt}, {st.jobs} jobs)")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
