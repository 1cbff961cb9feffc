"""Offline optimum (MILP) and the empirical competitive ratio of OASiS, Fig. 5 setting.

Two parts:

``study``  -- ``--instances`` Fig. 5 instances per server count (3, 6, 9, 12) and priority
range ([1,100], [25,100], [50,100], [75,100]): every policy, OASiS's certificate, OPT (MILP,
each must be proven optimal), the LP bound, OASiS with U scaled by the estimate factors.
Writes ``results/ratio_fig5.csv``, ``results/ratio_fig5.json`` (summary) and
``results/ratio_fig5_*.png``.

``growth`` -- MILP solve time against jobs (T = 10, 12 servers), slots (10 jobs, 6 servers)
and at 20 jobs x T = 20 (6 and 12 servers; target: each <= 60 s); the LP relaxation of the
same model is the baseline measured in the same run. Writes ``results/ratio_growth.csv``.

    python benchmarks/bench_offline.py study --instances 7
    python benchmarks/bench_offline.py growth --instances 4
    python benchmarks/bench_offline.py figures        # redraw the study's figures from its CSV
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import numpy as np

from psched.model import resolve_job
from psched.offline import lp_bound, solve_offline
from psched.ratio import RatioRow, instance_seed, ratio_study, read_csv, summarise, write_csv
from psched.ratio_plots import save_all
from psched.traces.synth import fig5_instance

RESULTS = Path(__file__).parent / "results"
PRIORITIES = ((1.0, 100.0), (25.0, 100.0), (50.0, 100.0), (75.0, 100.0))
FACTORS = (0.2, 0.5, 2.0, 5.0, 10.0)


def study(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    rows = ratio_study(args.instances, priorities=PRIORITIES, seed=args.seed,
                       estimate_factors=FACTORS, time_limit=args.time_limit,
                       progress=lambda r: print(f"n={r.servers} prio={r.priority} "
                                                f"OPT/OASiS={r.ratio:.3f} "
                                                f"MILP {r.opt_s:.2f}s {r.opt_status}",
                                                flush=True))
    summary = summarise(rows)
    write_csv(rows, RESULTS / "ratio_fig5.csv")
    with open(RESULTS / "ratio_fig5.json", "w") as fh:
        json.dump({"instances_per_cell": args.instances, "seed": args.seed,
                   "wall_s": time.perf_counter() - t0, "summary": summary}, fh, indent=2,
                  default=float)
    figures(rows)
    a = summary["all"]
    print(f"{a['instances']} instances, {a['proven_optimal']} proven optimal; OPT/OASiS "
          f"median {a['ratio']['median']:.3f} p90 {a['ratio']['p90']:.3f} "
          f"max {a['ratio']['max']:.3f}; MILP s median {a['opt_s']['median']:.2f} "
          f"p90 {a['opt_s']['p90']:.2f} max {a['opt_s']['max']:.2f}")


def figures(rows: list[RatioRow]) -> None:
    for path in save_all(rows, RESULTS):
        path.rename(RESULTS / path.name.replace("ratio_", "ratio_fig5_"))


def growth(args: argparse.Namespace) -> None:
    # (servers, jobs, slots): jobs at T = 10 on 12 servers; slots with 10 jobs on 6 servers
    # (10 jobs cannot fill 12 servers for 20 slots); 20 jobs x T = 20 on 6 and 12 servers
    cells = ([(12, j, 10) for j in (5, 10, 15, 20)] + [(6, 10, t) for t in (10, 15, 20)]
             + [(6, 20, 20), (12, 20, 20)])
    out = []
    for n, jobs, slots in cells:
        for i in range(args.instances):
            s = instance_seed(args.seed, n, (1.0, 100.0), 1000 * jobs + slots * 10 + i)
            specs, cluster = fig5_instance(n, seed=s, n_jobs=jobs, slots=slots)
            js = [j for j in (resolve_job(x, cluster.slot_seconds, slots) for x in specs)
                  if j.window > 0]
            lp = lp_bound(js, cluster, slots)
            opt = solve_offline(js, cluster, slots, time_limit=args.time_limit)
            out.append({"servers": n, "jobs": jobs, "slots": slots, "seed": s, "n_vars": opt.n_vars,
                        "n_cons": opt.n_cons, "milp_s": opt.solve_s, "lp_s": lp.solve_s,
                        "status": opt.status, "gap": opt.gap, "opt": opt.objective,
                        "lp": lp.bound})
            print(f"n={n} jobs={jobs} T={slots}: MILP {opt.solve_s:.2f}s ({opt.status}, "
                  f"{opt.n_vars} vars), LP {lp.solve_s:.3f}s", flush=True)
    with open(RESULTS / "ratio_growth.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(out[0]))
        w.writeheader()
        w.writerows(out)
    print("| servers | jobs | T | vars | MILP s median | MILP s max | LP s median | MILP/LP | "
          "proven |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, jobs, slots in cells:
        rs = [r for r in out if (r["servers"], r["jobs"], r["slots"]) == (n, jobs, slots)]
        m = np.array([r["milp_s"] for r in rs])
        lp_t = np.array([r["lp_s"] for r in rs])
        print(f"| {n} | {jobs} | {slots} | {int(np.median([r['n_vars'] for r in rs]))} | "
              f"{np.median(m):.2f} | {m.max():.2f} | {np.median(lp_t):.3f} | "
              f"{np.median(m) / np.median(lp_t):.0f}x | "
              f"{sum(r['status'] == 'optimal' for r in rs)}/{len(rs)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=("study", "growth", "figures"))
    ap.add_argument("--instances", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=300.0)
    args = ap.parse_args()
    RESULTS.mkdir(exist_ok=True)
    if args.part == "figures":  # redraw from results/ratio_fig5.csv
        figures(read_csv(RESULTS / "ratio_fig5.csv"))
    else:
        (study if args.part == "study" else growth)(args)


if __name__ == "__main__":
    main()
