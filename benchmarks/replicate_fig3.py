"""Fig. 3 of the OASiS paper: total utility of OASiS, FIFO and DRF at 100-400 jobs, T = 300.

Scenario ``oasis-paper`` (``oasis.md`` section 7, untuned), seeds 0..4; mean and standard
deviation over seeds, beside the values read off the paper's Fig. 3 (``oasis.md`` section 6).
Also reports OASiS's admitted share, its dual bound and certified ratio.

    python benchmarks/replicate_fig3.py [--jobs 100,200,300,400] [--seeds 5] [--slots 300]

Writes ``benchmarks/results/fig3.csv`` and ``benchmarks/results/fig3.png``.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from psched.core.simulator import simulate
from psched.policies import make_policy
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

RESULTS = Path(__file__).parent / "results"
#: Fig. 3 of the paper, units of 1e4 (oasis.md section 6).
PAPER = {"oasis": {100: 0.29, 200: 0.515, 300: 0.67, 400: 0.755},
         "fifo": {100: 0.09, 200: 0.11, 300: 0.04, 400: 0.09},
         "drf": {100: 0.23, 200: 0.14, 300: 0.09, 400: 0.10}}
POLICIES = ("oasis", "fifo", "drf")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="100,200,300,400")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--slots", type=int, default=300)
    args = ap.parse_args()
    sizes = [int(x) for x in args.jobs.split(",")]
    rows = []
    for n in sizes:
        for seed in range(args.seeds):
            specs, _ = oasis_paper_jobs(n, seed=seed, slots=args.slots)
            cluster = oasis_paper_cluster(seed=seed)
            for name in POLICIES:
                res = simulate(specs, cluster, make_policy(name), args.slots, seed=seed)
                util = sum(r.utility for r in res.records.values())
                done = sum(r.completion is not None for r in res.records.values())
                rows.append({"jobs": n, "seed": seed, "policy": name, "utility": util,
                             "completed": done,
                             "dual_bound": res.report.get("dual_bound", ""),
                             "certified_ratio": res.report.get("certified_ratio", "")})
                print(f"{n} jobs seed {seed} {name}: utility {util:.0f}, completed {done}",
                      flush=True)
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "fig3.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("\n| jobs | " + " | ".join(f"{p} (ours, 1e4)" for p in POLICIES) + " | "
          + " | ".join(f"{p} (paper)" for p in POLICIES) + " | OASiS dual bound (1e4) |")
    print("|---:|" + "---:|" * (2 * len(POLICIES) + 1))
    stats: dict[str, list[tuple[float, float]]] = {p: [] for p in POLICIES}
    for n in sizes:
        cells = []
        for p in POLICIES:
            v = np.array([r["utility"] for r in rows if r["jobs"] == n and r["policy"] == p])
            stats[p].append((v.mean() / 1e4, v.std() / 1e4))
            cells.append(f"{v.mean() / 1e4:.3f} ± {v.std() / 1e4:.3f}")
        dual = np.array([r["dual_bound"] for r in rows if r["jobs"] == n
                         and r["policy"] == "oasis"], dtype=float)
        paper = [f"{PAPER[p].get(n, float('nan')):.3f}" for p in POLICIES]
        print(f"| {n} | " + " | ".join(cells) + " | " + " | ".join(paper)
              + f" | {dual.mean() / 1e4:.3g} |")
    fig, ax = plt.subplots(figsize=(6, 4))
    for p, color in zip(POLICIES, ("C0", "C1", "C2"), strict=True):
        m = np.array([s[0] for s in stats[p]])
        sd = np.array([s[1] for s in stats[p]])
        ax.errorbar(sizes, m, yerr=sd, marker="o", color=color, capsize=3, label=f"{p} (ours)")
        ax.plot(sizes, [PAPER[p].get(n, np.nan) for n in sizes], ls="--", marker="x",
                color=color, alpha=0.6, label=f"{p} (paper)")
    ax.set_xlabel("number of jobs")
    ax.set_ylabel("total utility (x 1e4)")
    ax.set_title(f"Fig. 3: oasis-paper, T = {args.slots}, {args.seeds} seeds (mean ± sd)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "fig3.png", dpi=120)
    print(f"\nwrote {RESULTS / 'fig3.csv'} and {RESULTS / 'fig3.png'}")


if __name__ == "__main__":
    main()
