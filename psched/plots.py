"""Figures of a run: total utility per policy and the completion-time CDF (matplotlib, PNG)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from psched.simulator import RunResult

__all__ = ["plot_run"]


def plot_run(folder: Path, summary: Mapping[str, Any], results: Mapping[str, RunResult]) -> None:
    """Write ``utility.png`` and ``jct_cdf.png`` into ``folder``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    utils = [summary["policies"][n]["total_utility"] for n in names]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(names)), 3.5))
    ax.bar(names, utils, color="tab:blue")
    for i, u in enumerate(utils):
        ax.annotate(f"{u:.0f}", (i, u), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("total utility")
    ax.set_title("Total utility per policy")
    fig.tight_layout()
    fig.savefig(folder / "utility.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5.0, 3.5))
    for name, res in results.items():
        d = np.sort([r.duration for r in res.records.values() if r.duration is not None])
        if d.size:
            ax.step(d, np.arange(1, d.size + 1) / len(res.records), where="post", label=name)
    ax.set_xlabel("completion time (slots from arrival)")
    ax.set_ylabel("fraction of all jobs completed")
    ax.set_title("Completion-time CDF")
    ax.set_ylim(0, 1)
    if ax.get_legend_handles_labels()[0]:  # no job completed: an empty plot, no legend
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no job completed", transform=ax.transAxes, ha="center")
    fig.tight_layout()
    fig.savefig(folder / "jct_cdf.png", dpi=120)
    plt.close(fig)
