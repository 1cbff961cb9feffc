"""Fig. 4 of the OASiS paper: lateness of time-critical jobs under OASiS, FIFO and DRF.

Scenario ``oasis-paper`` with ``mix=fig4`` (100 time-sensitive + 100 time-critical jobs),
T = 100. Lateness is ``d - gamma3`` (``oasis.md`` section 7; the paper's ``t - a - gamma3`` is one
less). Jobs that never complete have no lateness; their count is reported separately.

    python benchmarks/fig4_lateness.py [--jobs 200] [--slots 100] [--seeds 3]

Writes ``benchmarks/results/fig4.csv`` and ``benchmarks/results/fig4.png``.
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
POLICIES = ("oasis", "fifo", "drf")
CRITICAL_DECAY = 4.0  #: gamma2 >= 4 marks a time-critical job (oasis.md section 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--slots", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for seed in range(args.seeds):
        specs, _ = oasis_paper_jobs(args.jobs, seed=seed, slots=args.slots,
                                    options={"mix": "fig4"})
        cluster = oasis_paper_cluster(seed=seed)
        for name in POLICIES:
            opts = {"certificate": False} if name == "oasis" else {}
            res = simulate(specs, cluster, make_policy(name, **opts), args.slots, seed=seed)
            for rec in res.records.values():
                u = rec.job.spec.utility
                if u.decay < CRITICAL_DECAY:
                    continue
                late = None if rec.duration is None else rec.duration - u.target
                rows.append({"seed": seed, "policy": name, "job": rec.job.job_id,
                             "admitted": rec.admitted, "lateness": late,
                             "utility": rec.utility})
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "fig4.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("| policy | critical jobs | completed | lateness p10 | median | p90 | mean | "
          "utility of critical jobs (mean per seed) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    data = {}
    for p in POLICIES:
        mine = [r for r in rows if r["policy"] == p]
        late = np.array([r["lateness"] for r in mine if r["lateness"] is not None], dtype=float)
        data[p] = late
        util = sum(r["utility"] for r in mine) / args.seeds
        q = np.percentile(late, [10, 50, 90]) if late.size else [np.nan] * 3
        print(f"| {p} | {len(mine)} | {late.size} | {q[0]:.0f} | {q[1]:.0f} | {q[2]:.0f} | "
              f"{late.mean() if late.size else float('nan'):.1f} | {util:.0f} |")
    fig, ax = plt.subplots(figsize=(6, 4))
    for p in POLICIES:
        v = np.sort(data[p])
        if v.size:
            ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=p)
    ax.axvline(0, color="k", lw=0.5)
    ax.set_xlabel("lateness d - gamma3 (slots), completed time-critical jobs")
    ax.set_ylabel("CDF")
    ax.set_title(f"Fig. 4: mix=fig4, {args.jobs} jobs, T = {args.slots}, {args.seeds} seeds")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "fig4.png", dpi=120)
    print(f"\nwrote {RESULTS / 'fig4.csv'} and {RESULTS / 'fig4.png'}")


if __name__ == "__main__":
    main()
