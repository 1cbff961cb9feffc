"""The report's figures, as PNG bytes (matplotlib, Agg): every one has a title, axes with
units and its legend outside the data.

* :func:`gantt` -- the executed schedule, servers x slots (each job its own colour, its id
  on its boxes where it fits, PS hatched), or, past ``max_rects`` containers, each server's
  load per time bucket (said in the note);
* :func:`utilisation` -- share of each pool's capacity in use per resource over time;
* :func:`prices` -- mean price per pool and resource over time (OASiS family);
* :func:`comparison` -- utility (with the dual bound), completion times and rejections;
* :func:`jct_cdf` -- the completion-time CDF per policy.

Each returns a :class:`matplotlib.figure.Figure` made outside pyplot, so no backend is
chosen or changed (a notebook shows it with ``display(fig)``; :func:`png` turns it into
bytes).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from psched.core.model import RESOURCES
from psched.results.report_data import ROLES, RunFiles, Usage

__all__ = ["comparison", "distinct_colours", "gantt", "jct_cdf", "png", "prices", "run_title",
           "utilisation"]

_DPI = 100
#: a Gantt chart writes job ids on the jobs' boxes where they fit, up to this many jobs
LABELLED_JOBS = 400
_LABEL_PT = 6.5  #: font size of those ids


def _figure(**kw: Any) -> Any:
    """A figure outside pyplot: no backend is chosen or changed (a notebook keeps its own)."""
    from matplotlib.figure import Figure

    return Figure(**kw)


def png(fig: Any) -> bytes:
    """The figure as PNG bytes; the figure is closed."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, bbox_inches="tight")
    return buf.getvalue()


def distinct_colours(n: int) -> np.ndarray:
    """``n`` RGBA colours, no two alike: the live page's 18 (tab10, then Dark2: no pale
    hues) when they suffice, else ``n`` hues spread by the golden ratio, each at one of
    three saturation and value levels in turn (distinct as numbers for any ``n``; told apart
    by eye up to a few dozen, hence the ids on the Gantt chart's boxes)."""
    import matplotlib
    from matplotlib.colors import hsv_to_rgb

    palette = np.vstack([matplotlib.colormaps["tab10"](np.arange(10)),
                         matplotlib.colormaps["Dark2"](np.arange(8))])
    if n <= len(palette):
        return palette[:n]
    k = np.arange(n)
    hsv = np.column_stack([(k * 0.6180339887498949) % 1.0,
                           np.array([0.85, 0.55, 0.95])[k % 3],
                           np.array([0.80, 0.95, 0.60])[k % 3]])
    return np.column_stack([hsv_to_rgb(hsv), np.ones(n)])


def _slot_label(run: RunFiles) -> str:
    return f"slot (1 slot = {run.slot_seconds:g} s)"


def _server_order(run: RunFiles) -> np.ndarray:
    """Cluster indices, worker servers first: the Gantt chart's rows from the top."""
    pools = np.array(run.server_pools)
    return np.concatenate([np.flatnonzero(pools == p) for p in ROLES])


def _rects(run: RunFiles, policy: str, row_of: np.ndarray) -> Any:
    """Per allocation row: x, y bottom, height and job number (containers stacked)."""
    pf = run.policies[policy]
    a = pf.allocations
    job_index = {j: i for i, j in enumerate(pf.jobs["job_id"])}
    server_index = {s: i for i, s in enumerate(run.server_ids)}
    ji = a["job_id"].map(job_index).to_numpy(dtype=int)
    si = a["server"].map(server_index).to_numpy(dtype=int)
    role = (a["role"] == "ps").to_numpy(dtype=int)
    cols = [[f"{r}_{res}" for res in RESOURCES] for r in ROLES]
    dem = np.stack([pf.jobs[c].to_numpy(dtype=float) for c in cols], axis=1)[ji, role]
    cap = run.capacity[si]
    share = np.where(cap > 0, dem / np.where(cap > 0, cap, 1.0), 0.0).max(axis=1)
    height = np.clip(a["count"].to_numpy(dtype=float) * share, 0.0, 1.0)
    frame = a.assign(_h=height, _s=si)
    offset = frame.groupby(["slot", "_s"])["_h"].cumsum().to_numpy() - height
    y = row_of[si] + 0.05 + 0.9 * np.clip(offset, 0.0, 1.0)
    return a["slot"].to_numpy(dtype=float), y, 0.9 * height, ji, role


def gantt(run: RunFiles, policy: str, usage: Usage, max_rects: int = 40000,
          ) -> tuple[Any, str]:
    """The executed schedule of ``policy``; returns the figure and a note on what it shows."""
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    order = _server_order(run)
    row_of = np.empty(len(order), dtype=int)
    row_of[order] = np.arange(len(order))
    n_rows = len(order)
    fig = _figure(figsize=(11, min(14.0, 2.2 + 0.22 * n_rows)))
    ax = fig.subplots()
    rows = len(run.policies[policy].allocations)
    if rows <= max_rects:
        x, y, h, job, role = _rects(run, policy, row_of)
        verts = np.stack([np.column_stack([x, y]), np.column_stack([x + 1, y]),
                          np.column_stack([x + 1, y + h]), np.column_stack([x, y + h])], axis=1)
        palette = distinct_colours(len(run.policies[policy].jobs))
        colours = palette[job]
        hatched = rows <= 3000  # hatching thousands of boxes is slow and unreadable
        for r, hatch, alpha in ((0, None, 1.0), (1, "////" if hatched else None, 0.45)):
            sel = role == r
            if sel.any():
                ax.add_collection(PolyCollection(verts[sel], facecolors=colours[sel],
                                                 edgecolors="none", hatch=hatch, alpha=alpha,
                                                 rasterized=True))
        labelled = _label_jobs(ax, fig, x, y, h, job, role, n_rows, run.horizon,
                               list(run.policies[policy].jobs["job_id"]), palette)
        note = (f"all {rows} container placements drawn; height = share of the server's "
                "capacity (dominant resource), colour = job (each job its own colour)"
                + (f"; {labelled} jobs' ids written on their boxes where they fit"
                   if labelled else ""))
        handles = [Patch(facecolor="tab:blue", label="worker containers (colour = job)"),
                   Patch(facecolor="tab:blue", alpha=0.45, hatch="////" if hatched else None,
                         label="parameter servers (pale" + (", hatched)" if hatched else ")"))]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    else:
        cap = run.capacity
        share = np.where(cap > 0, usage.usage / np.where(cap > 0, cap, 1.0), 0.0).max(axis=2)
        img = ax.imshow(share[:, order].T, aspect="auto", interpolation="nearest",
                        cmap="viridis", vmin=0.0, vmax=1.0, origin="upper",
                        extent=(0, share.shape[0] * usage.bucket_slots, n_rows, 0))
        fig.colorbar(img, ax=ax, label="load: share of capacity (dominant resource)")
        note = (f"{rows} container placements are too many to draw one by one (over "
                f"{max_rects}): aggregated into each server's load, mean over buckets of "
                f"{usage.bucket_slots} slot(s); jobs are not distinguished")
    n_workers = int(sum(p == "worker" for p in run.server_pools))
    ax.axhline(n_workers, color="black", linewidth=1.2)
    ax.set_xlim(0, run.horizon)
    ax.set_ylim(n_rows, 0)
    ids = np.array(run.server_ids)[order]
    if n_rows <= 40:
        ax.set_yticks(np.arange(n_rows) + 0.5, ids, fontsize=7)
    else:
        ax.set_yticks([n_workers / 2, n_workers + (n_rows - n_workers) / 2],
                      [f"{n_workers} worker servers", f"{n_rows - n_workers} PS servers"])
    ax.set_xlabel(_slot_label(run))
    ax.set_ylabel("server (workers above the line, PS below)")
    ax.set_title(f"{policy}: executed schedule")
    return fig, note


def _label_jobs(ax: Any, fig: Any, x: np.ndarray, y: np.ndarray, h: np.ndarray,
                job: np.ndarray, role: np.ndarray, n_rows: int, horizon: int,
                names: list[str], colours: np.ndarray) -> int:
    """Write each job's id on a block of its worker boxes where the id fits inside: a run of
    consecutive slots on one server, with the servers above and below that hold the job at
    the run's middle slot (the longest run that fits and leaves the ids already written
    clear; none past :data:`LABELLED_JOBS` jobs).
    Black or white, whichever stands out on the job's colour. Returns how many ids were
    written. O(boxes log boxes)."""
    if len(names) > LABELLED_JOBS or not len(x):
        return 0
    box = ax.get_position()
    px_slot = box.width * fig.get_figwidth() * _DPI / max(1, horizon)
    px_row = box.height * fig.get_figheight() * _DPI / max(1, n_rows)
    char_px = _LABEL_PT * _DPI / 72 * 0.62  # a digit's width, about
    line_px = _LABEL_PT * _DPI / 72 * 1.1
    sel = np.flatnonzero(role == 0)
    row = np.floor(y).astype(int)
    at = {(int(job[k]), int(x[k]), int(row[k])): k for k in sel}  # (job, slot, row) -> box
    order = sel[np.lexsort((x[sel], row[sel], job[sel]))]
    runs: list[tuple[float, int, int]] = []  # (length in slots, first box, last box)
    start = 0
    for k in range(1, len(order) + 1):
        a, b = order[k - 1], order[k] if k < len(order) else -1
        if b < 0 or job[b] != job[a] or row[b] != row[a] or x[b] != x[a] + 1:
            runs.append((float(x[a] - x[order[start]] + 1), int(order[start]), int(a)))
            start = k
    done: set[int] = set()
    placed: list[tuple[float, float, float, float]] = []  # ids written: centre, half sizes
    for length, first, _ in sorted(runs, key=lambda r: -r[0]):
        j = int(job[first])
        name = names[j]
        if j in done or length * px_slot < char_px * (len(name) + 1):
            continue
        mid = int(x[first] + length // 2)
        lo = hi = int(row[first])
        while (j, mid, lo - 1) in at:
            lo -= 1
        while (j, mid, hi + 1) in at:
            hi += 1
        top, bottom = at.get((j, mid, lo), first), at.get((j, mid, hi), first)
        y0, y1 = float(y[top]), float(y[bottom] + h[bottom])
        if (y1 - y0) * px_row < line_px:
            continue
        cx, cy = (x[first] + length / 2) * px_slot, (y0 + y1) / 2 * px_row  # px
        half = (char_px * (len(name) + 1) / 2, line_px / 2)
        if any(abs(cx - px) < half[0] + pw and abs(cy - py) < half[1] + ph
               for px, py, pw, ph in placed):
            continue  # another id is there
        placed.append((cx, cy, *half))
        r, g, b_ = colours[j][:3]
        ax.text(x[first] + length / 2, (y0 + y1) / 2, name, ha="center", va="center",
                fontsize=_LABEL_PT, fontweight="bold", clip_on=True,
                color="black" if 0.299 * r + 0.587 * g + 0.114 * b_ > 0.6 else "white")
        done.add(j)
    return len(done)


def _pool_lines(ax: Any, x: np.ndarray, values: np.ndarray, resources: list[int]) -> None:
    for i in resources:
        ax.step(x, values[:, i], where="post", label=RESOURCES[i], linewidth=1.2)


def utilisation(run: RunFiles, policy: str, usage: Usage) -> Any:
    """Share of each pool's capacity in use, per resource, over time."""
    pools = np.array(run.server_pools)
    cap = run.capacity
    fig = _figure(figsize=(11, 5.0))
    axes = fig.subplots(2, 1, sharex=True)
    for ax, pool in zip(axes, ROLES, strict=True):
        idx = np.flatnonzero(pools == pool)
        total = cap[idx].sum(axis=0)
        have = [i for i in range(len(RESOURCES)) if total[i] > 0]
        share = usage.usage[:, idx].sum(axis=1) / np.where(total > 0, total, 1.0)
        _pool_lines(ax, usage.starts, share, have)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("share of capacity")
        ax.set_title(f"{pool} pool ({idx.size} servers)", fontsize=9)
        if have:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    axes[-1].set_xlabel(_slot_label(run) + (f", mean over {usage.bucket_slots} slots"
                                            if usage.bucket_slots > 1 else ""))
    axes[-1].set_xlim(0, run.horizon)
    fig.suptitle(f"{policy}: utilisation over time per pool and resource")
    return fig


def prices(run: RunFiles, policy: str, usage: Usage, mean: dict[str, np.ndarray]) -> Any:
    """Mean price over each pool's servers per resource over time (log scale)."""
    pools = np.array(run.server_pools)
    fig = _figure(figsize=(11, 5.0))
    axes = fig.subplots(2, 1, sharex=True)
    for ax, pool in zip(axes, ROLES, strict=True):
        total = run.capacity[pools == pool].sum(axis=0)
        p = mean.get(pool)
        have = [] if p is None else [i for i in range(len(RESOURCES))
                                     if total[i] > 0 and np.all(np.isfinite(p[:, i]))]
        if p is not None and have:
            _pool_lines(ax, usage.starts, p, have)
            ax.set_yscale("log")
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
        else:
            ax.text(0.5, 0.5, "no finite prices in this pool", transform=ax.transAxes,
                    ha="center")
        ax.set_ylabel("price per unit (log)")
        ax.set_title(f"{pool} pool: mean price over its servers", fontsize=9)
    axes[-1].set_xlabel(_slot_label(run))
    axes[-1].set_xlim(0, run.horizon)
    fig.suptitle(f"{policy}: resource prices over time, L (U/L)^(usage/capacity)")
    return fig


def comparison(run: RunFiles) -> Any:
    """Utility with the dual bound, completion times (hours) and rejections, per policy."""
    names = list(run.policies)
    s = [run.policies[n].summary for n in names]
    x = np.arange(len(names))
    fig = _figure(figsize=(13.0, 4.8))
    axes = fig.subplots(1, 3)
    ax = axes[0]
    ax.bar(x, [e["total_utility"] for e in s], color="tab:blue", label="utility earned")
    bound = [e.get("dual_bound") for e in s]
    if any(b is not None for b in bound):
        bx = [i for i, b in enumerate(bound) if b is not None]
        ax.scatter(bx, [bound[i] for i in bx], marker="_", s=600, color="tab:red",
                   linewidths=2.5, zorder=3, label="dual bound (≥ offline optimum)")
    ax.set_ylabel("total utility")
    ax.set_title("Utility earned")
    ax = axes[1]
    for k, (key, label) in enumerate((("jct_mean_h", "mean"), ("jct_p99_h", "p99"))):
        ax.bar(x + (k - 0.5) * 0.4, [e.get(key) or 0.0 for e in s], width=0.4, label=label)
    ax.set_ylabel("completion time (hours)")
    ax.set_title("Job completion time (completed jobs)")
    ax = axes[2]
    reasons = sorted({r for e in s for r in e.get("rejected_reasons", {})})
    bottom = np.zeros(len(names))
    for r in reasons:
        v = np.array([e.get("rejected_reasons", {}).get(r, 0) for e in s], dtype=float)
        ax.bar(x, v, bottom=bottom, label=r)
        bottom += v
    ax.bar(x, [e.get("unfinished", 0) for e in s], bottom=bottom, color="lightgrey",
           hatch="..", label="admitted, unfinished")
    ax.set_ylabel("jobs")
    ax.set_title("Rejected and unfinished jobs")
    for ax in axes:
        ax.set_xticks(x, names, rotation=45, ha="right", fontsize=8)
        ax.set_xlabel("policy")
    fig.suptitle(f"Policies side by side: {run_title(run)}")
    fig.tight_layout()
    _legends_below(fig, axes)
    return fig


def _legends_below(fig: Any, axes: Any) -> None:
    """Each axes' legend just below everything drawn under it (tick labels of any length,
    the axis label), so that it never covers them; ``png`` crops to include it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()  # type: ignore[no-untyped-call]
    for ax in axes:
        if not ax.get_legend_handles_labels()[0]:
            continue
        below = ax.get_tightbbox(renderer).transformed(ax.transAxes.inverted()).y0
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, below - 0.02), fontsize=8)


def run_title(run: RunFiles) -> str:
    """``<trace> on <cluster>``, short: what every figure of a run names."""
    import os

    p = run.summary["params"]
    source = p.get("trace") or (f"scenario {p['scenario']}" if p.get("scenario") else "jobs")
    return (f"{os.path.basename(str(source))} on {p.get('worker_servers', '?')} worker + "
            f"{p.get('ps_servers', '?')} PS servers")


def jct_cdf(run: RunFiles) -> Any:
    """Completion-time CDF (hours) per policy, over all jobs (unfinished ones never arrive
    at 1), each policy its own colour (:func:`distinct_colours`); the legend sits outside
    the axes."""
    fig = _figure(figsize=(8.0, 4.0))
    ax = fig.subplots()
    hours = run.slot_seconds / 3600.0
    colours = distinct_colours(len(run.policies))
    for (name, pf), colour in zip(run.policies.items(), colours, strict=True):
        d = np.sort(pf.jobs["duration"].dropna().to_numpy(dtype=float)) * hours
        if d.size:
            ax.step(d, np.arange(1, d.size + 1) / max(1, len(pf.jobs)), where="post",
                    label=name, color=colour)
    ax.set_xlabel("completion time (hours from arrival)")
    ax.set_ylabel("fraction of all jobs completed")
    ax.set_ylim(0, 1)
    ax.set_title(f"Completion-time CDF: {run_title(run)}", fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    else:
        ax.text(0.5, 0.5, "no job completed", transform=ax.transAxes, ha="center")
    return fig
