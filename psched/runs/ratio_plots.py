"""Figures of the competitive-ratio study (:mod:`psched.runs.ratio`), matplotlib, PNG.

Every figure has a title, axes with units and a legend; :func:`save_all` writes them all.
Shared by ``psched ratio --out`` and ``notebooks/competitive_ratio.ipynb``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from psched.runs.ratio import PAPER_RATIO, RatioRow

__all__ = [
    "plot_certificate",
    "plot_factors",
    "plot_policies",
    "plot_ratio",
    "plot_solve_times",
    "plot_theorem",
    "save_all",
]


def _plt() -> Any:
    import matplotlib.pyplot as plt

    return plt


def _paper_band(ax: Any) -> None:
    ax.axhspan(*PAPER_RATIO, color="tab:orange", alpha=0.15,
               label=f"paper Fig. 5: {PAPER_RATIO[0]}-{PAPER_RATIO[1]}")


def plot_theorem(rows: Sequence[RatioRow]) -> Any:
    """Theorem 4's 2 alpha against ln(U/L), beside the empirical and certified ratios."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    span = np.array([r.log_u_over_l for r in rows])
    xs = np.linspace(0.0, max(1.0, float(np.nanmax(span)) * 1.1), 200)
    ax.plot(xs, 2 * np.maximum(1.0, xs), color="k", label="theorem: 2α = 2 max(1, ln U/L)")
    got = np.array([r.utility.get("oasis", 0.0) for r in rows])
    with np.errstate(divide="ignore", invalid="ignore"):
        ax.scatter(span, np.array([r.certificate for r in rows]) / got, s=12,
                   color="tab:purple", label="certified: dual bound / OASiS")
    ax.scatter(span, [r.ratio for r in rows], s=12, color="tab:blue",
               label="empirical: OPT / OASiS")
    _paper_band(ax)
    ax.set_yscale("log")
    ax.set_ylim(0.8, 20 * float(np.max(2 * np.maximum(1.0, xs))))
    ax.set_xlabel("ln(U/L) of the run (dimensionless, max over pools and resources)")
    ax.set_ylabel("ratio (dimensionless, log scale)")
    ax.set_title("Competitive ratio: guarantee, certificate and reality")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def plot_ratio(rows: Sequence[RatioRow]) -> Any:
    """Distribution of OPT/OASiS per server count and priority range."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    servers = sorted({r.servers for r in rows})
    prios = sorted({r.priority for r in rows})
    width = 0.8 / len(prios)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for j, pr in enumerate(prios):
        data = [[r.ratio for r in rows if r.servers == n and r.priority == pr
                 and np.isfinite(r.ratio)] for n in servers]
        pos = np.arange(len(servers)) + (j - (len(prios) - 1) / 2) * width
        keep = [i for i, d in enumerate(data) if d]
        bp = ax.boxplot([data[i] for i in keep], positions=pos[keep], widths=width * 0.9,
                        patch_artist=True, showfliers=True)
        for box in bp["boxes"]:
            box.set_facecolor(colors[j % len(colors)])
            box.set_alpha(0.6)
        bp["boxes"][0].set_label(f"priority γ1 in [{pr[0]:g}, {pr[1]:g}]")
    _paper_band(ax)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(np.arange(len(servers)), [str(n) for n in servers])
    ax.set_xlabel("servers (count; ⌈n/2⌉ worker + ⌊n/2⌋ PS)")
    ax.set_ylabel("OPT / OASiS (total utility ratio)")
    ax.set_title("Empirical competitive ratio, Fig. 5 setting (10 jobs, T = 10)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_certificate(rows: Sequence[RatioRow]) -> Any:
    """How tight the upper bounds are (CDFs): dual certificate / OPT, / achieved, LP / OPT."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    opt = np.array([r.opt for r in rows])
    got = np.array([r.utility.get("oasis", 0.0) for r in rows])
    cert = np.array([r.certificate for r in rows])
    lp = np.array([r.lp for r in rows])
    with np.errstate(divide="ignore", invalid="ignore"):
        series = {"dual bound / OPT": cert / opt, "dual bound / OASiS achieved": cert / got,
                  "LP bound / OPT": lp / opt}
    for name, v in series.items():
        v = np.sort(v[np.isfinite(v)])
        ax.step(v, np.arange(1, v.size + 1) / max(v.size, 1), where="post", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("bound / utility (ratio, dimensionless, log scale)")
    ax.set_ylabel("fraction of instances (CDF)")
    ax.set_title("Tightness of the upper bounds on OPT")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_factors(rows: Sequence[RatioRow]) -> Any:
    """OASiS utility / OPT against the estimate factor on U (the paper's Fig. 6 axis)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    factors = sorted({f for r in rows for f in r.factors} | {1.0})

    def got(r: RatioRow, f: float) -> float:
        return r.utility["oasis"] if f == 1.0 else r.factors.get(f, np.nan)

    for n in sorted({r.servers for r in rows}):
        rs = [r for r in rows if r.servers == n and r.opt > 0]
        mean = [np.nanmean([got(r, f) / r.opt for r in rs]) for f in factors]
        ax.plot(factors, mean, marker="o", label=f"{n} servers")
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("estimate factor on U (U used / true U, log scale)")
    ax.set_ylabel("OASiS utility / OPT (mean ratio)")
    ax.set_title("Sensitivity to the price estimate")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_policies(rows: Sequence[RatioRow]) -> Any:
    """Mean utility / OPT of every policy per server count."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    servers = sorted({r.servers for r in rows})
    names = list(rows[0].utility)
    width = 0.8 / len(names)
    for j, p in enumerate(names):
        means = [np.mean([r.utility[p] / r.opt for r in rows if r.servers == n and r.opt > 0])
                 for n in servers]
        ax.bar(np.arange(len(servers)) + (j - (len(names) - 1) / 2) * width, means, width,
               label=p)
    ax.set_xticks(np.arange(len(servers)), [str(n) for n in servers])
    ax.set_xlabel("servers (count)")
    ax.set_ylabel("policy utility / OPT (mean ratio)")
    ax.set_ylim(0, 1.05)
    ax.set_title("Share of the offline optimum each policy reaches")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_solve_times(rows: Sequence[RatioRow]) -> Any:
    """Distribution of the MILP solve times."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for n in sorted({r.servers for r in rows}):
        ax.hist([r.opt_s for r in rows if r.servers == n], bins=20, alpha=0.5,
                label=f"{n} servers")
    ax.set_xlabel("MILP solve time (s)")
    ax.set_ylabel("instances (count)")
    ax.set_title("Offline optimum: time to proven optimality")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def save_all(rows: Sequence[RatioRow], folder: str | Path) -> list[Path]:
    """Write every figure as ``ratio_<name>.png`` in ``folder``; return the paths."""
    plt = _plt()
    folder = Path(folder)
    out = []
    figs = {"theorem": plot_theorem, "distribution": plot_ratio,
            "certificate": plot_certificate, "policies": plot_policies,
            "solve_times": plot_solve_times}
    if any(r.factors for r in rows):
        figs["factors"] = plot_factors
    for name, fn in figs.items():
        fig = fn(rows)
        path = folder / f"ratio_{name}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        out.append(path)
    return out
