"""Fig. 6 of the OASiS paper: total utility when U is mis-estimated (factor 0.2 to 10).

Scenario ``oasis-paper``, T = 300; ``estimate_factor`` scales the hindsight U with L fixed
(``oasis.md`` section 6), so U/L scales by the factor. Mean and standard deviation over seeds.

    python benchmarks/fig6_estimate.py [--jobs 100,400] [--seeds 3]
        [--factors 0.2,0.5,1,2,5,10]

Writes ``benchmarks/results/fig6.csv`` and ``benchmarks/results/fig6.png``.
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="100,400")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--slots", type=int, default=300)
    ap.add_argument("--factors", default="0.2,0.5,1,2,5,10")
    args = ap.parse_args()
    sizes = [int(x) for x in args.jobs.split(",")]
    factors = [float(x) for x in args.factors.split(",")]
    rows = []
    for n in sizes:
        for seed in range(args.seeds):
            specs, _ = oasis_paper_jobs(n, seed=seed, slots=args.slots)
            cluster = oasis_paper_cluster(seed=seed)
            for f in factors:
                pol = make_policy("oasis", estimate_factor=f, certificate=False)
                res = simulate(specs, cluster, pol, args.slots, seed=seed)
                util = sum(r.utility for r in res.records.values())
                adm = sum(r.admitted for r in res.records.values())
                rows.append({"jobs": n, "seed": seed, "factor": f, "utility": util,
                             "admitted": adm})
                print(f"{n} jobs seed {seed} factor {f}: utility {util:.0f}, admitted {adm}",
                      flush=True)
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "fig6.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("\n| jobs | " + " | ".join(f"x{f:g}" for f in factors) + " |")
    print("|---:|" + "---:|" * len(factors))
    fig, ax = plt.subplots(figsize=(6, 4))
    for n in sizes:
        m, sd = [], []
        for f in factors:
            v = np.array([r["utility"] for r in rows if r["jobs"] == n and r["factor"] == f])
            m.append(v.mean())
            sd.append(v.std())
        base = m[factors.index(1.0)] if 1.0 in factors else np.nan
        print(f"| {n} | " + " | ".join(f"{a:.0f} ± {s:.0f} ({a / base:.0%})"
                                       for a, s in zip(m, sd, strict=True)) + " |")
        ax.errorbar(factors, np.array(m) / 1e4, yerr=np.array(sd) / 1e4, marker="o",
                    capsize=3, label=f"{n} jobs")
    ax.set_xscale("log")
    ax.set_xlabel("estimate factor (U scaled, L fixed)")
    ax.set_ylabel("total utility (x 1e4)")
    ax.set_title(f"Fig. 6: oasis-paper, T = {args.slots}, {args.seeds} seeds")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "fig6.png", dpi=120)
    print(f"\nwrote {RESULTS / 'fig6.csv'} and {RESULTS / 'fig6.png'}")


if __name__ == "__main__":
    main()
