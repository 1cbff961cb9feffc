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

``solvers`` -- the study's instances (same seeds), each MILP solved by every solver path in
one run, interleaved instance by instance: ``scipy`` (the model on scipy's HiGHS 1.12,
presolve on, no warm start, no guard), ``highspy`` (HiGHS 1.16, guarded, cold),
``warm`` (guarded, started from the best policy's schedule), and each change of
:class:`psched.offline.formulation.Formulation` alone against ``highspy`` (``per-server``: no
aggregation
of identical servers; ``cumulative``, ``symmetry``: the two strengthenings). CPU seconds
(``time.process_time``) and wall seconds; an answer below the best one found for the instance
by more than the relative gap (1e-7, doubled) is counted wrong. Writes ``results/solvers_fig5.csv``.

``bound`` -- the pooled LP bound of the oasis-paper scenario (default 400 jobs, T = 300) by
both solver paths, beside OASiS's dual bound and every policy's utility (same run).

    python benchmarks/bench_offline.py study --instances 7
    python benchmarks/bench_offline.py growth --instances 4 [--scipy]
    python benchmarks/bench_offline.py solvers --instances 7
    python benchmarks/bench_offline.py bound --jobs 400 --slots 300
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

from psched.core.model import resolve_job
from psched.core.simulator import simulate
from psched.offline.formulation import Formulation, window_tail
from psched.offline.milp import scipy_solver
from psched.offline.optimum import lp_bound, solve_offline
from psched.policies import available_policies, make_policy
from psched.runs.ratio import (
    RatioRow,
    instance_seed,
    ratio_study,
    read_csv,
    summarise,
    write_csv,
)
from psched.runs.ratio_plots import save_all
from psched.traces.synth import fig5_instance, oasis_paper_cluster, oasis_paper_jobs

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
    if args.cells == "big":
        cells = cells[-2:]
    out = []
    for n, jobs, slots in cells:
        for i in range(args.instances):
            s = instance_seed(args.seed, n, (1.0, 100.0), 1000 * jobs + slots * 10 + i)
            specs, cluster = fig5_instance(n, seed=s, n_jobs=jobs, slots=slots)
            js = [j for j in (resolve_job(x, cluster.slot_seconds, slots) for x in specs)
                  if j.window > 0]
            lp = lp_bound(js, cluster, slots)
            opt = solve_offline(js, cluster, slots, time_limit=args.time_limit)
            row = {"servers": n, "jobs": jobs, "slots": slots, "seed": s, "n_vars": opt.n_vars,
                   "n_cons": opt.n_cons, "milp_s": opt.solve_s, "milp_cpu_s": opt.cpu_s,
                   "lp_s": lp.solve_s, "status": opt.status, "gap": opt.gap,
                   "opt": opt.objective, "lp": lp.bound}
            if args.scipy:  # the same model on scipy's HiGHS, right after
                c0 = time.process_time()
                sp = solve_offline(js, cluster, slots, time_limit=args.time_limit,
                                   solver=scipy_solver)
                row.update(scipy_s=sp.solve_s, scipy_cpu_s=time.process_time() - c0,
                           scipy_status=sp.status, scipy_opt=sp.objective)
            out.append(row)
            print(f"n={n} jobs={jobs} T={slots}: MILP {opt.solve_s:.2f}s ({opt.status}, "
                  f"{opt.n_vars} vars), LP {lp.solve_s:.3f}s"
                  + (f", scipy {row['scipy_s']:.2f}s" if args.scipy else ""), flush=True)
    with open(RESULTS / "ratio_growth.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(out[0]))
        w.writeheader()
        w.writerows(out)
    print("| servers | jobs | T | vars | MILP s median | MILP s max | MILP CPU s max | "
          "LP s median | MILP/LP | proven | scipy s median | scipy s max | scipy CPU s max | "
          "scipy proven | scipy wrong |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, jobs, slots in cells:
        rs = [r for r in out if (r["servers"], r["jobs"], r["slots"]) == (n, jobs, slots)]
        m = np.array([r["milp_s"] for r in rs])
        mc = np.array([r["milp_cpu_s"] for r in rs])
        lp_t = np.array([r["lp_s"] for r in rs])
        base = ""
        if args.scipy:
            o = np.array([r["scipy_s"] for r in rs])
            oc = np.array([r["scipy_cpu_s"] for r in rs])
            wrong = sum(r["scipy_opt"] < r["opt"] - 1e-6 for r in rs)
            base = (f" {np.median(o):.2f} | {o.max():.2f} | {oc.max():.2f} | "
                    f"{sum(r['scipy_status'] == 'optimal' for r in rs)}/{len(rs)} | {wrong} |")
        print(f"| {n} | {jobs} | {slots} | {int(np.median([r['n_vars'] for r in rs]))} | "
              f"{np.median(m):.2f} | {m.max():.2f} | {mc.max():.2f} | {np.median(lp_t):.3f} | "
              f"{np.median(m) / np.median(lp_t):.0f}x | "
              f"{sum(r['status'] == 'optimal' for r in rs)}/{len(rs)} |" + base)


#: solver paths of the ``solvers`` part: solve_offline keyword arguments (``warm``: start from
#: the best policy's schedule; ``guard``: hold the answer against every policy's utility)
PATHS: dict[str, dict[str, object]] = {
    "scipy": {"solver": scipy_solver, "warm": False, "guard": False},
    "highspy": {"warm": False, "guard": True},
    "warm": {"warm": True, "guard": True},
    "cumulative": {"warm": False, "guard": True,
                   "formulation": Formulation(cumulative_work=True)},
    "symmetry": {"warm": False, "guard": True, "formulation": Formulation(symmetry=True)},
    "per-server": {"warm": False, "guard": True, "formulation": Formulation(aggregate=False)},
}


def _policies_on(specs: list, cluster: object, slots: int,  # type: ignore[type-arg]
                 names: list[str]) -> tuple[float, list]:  # type: ignore[type-arg]
    """Best utility over the policies and that policy's executed schedule."""
    best, sched = -1.0, []
    for name in names:
        res = simulate(specs, cluster, make_policy(name), slots)  # type: ignore[arg-type]
        got = sum(r.utility for r in res.records.values())
        if got > best:
            best, sched = got, res.allocations
    return best, sched


def solvers(args: argparse.Namespace) -> None:
    paths = args.paths.split(",")
    policies = available_policies() if args.policies == "all" else args.policies.split(",")
    out = []
    for prio in PRIORITIES:
        for n in (3, 6, 9, 12):
            for i in range(args.instances):
                s = instance_seed(args.seed, n, prio, i)
                specs, cluster = fig5_instance(n, seed=s, priority=prio)
                js = [j for j in (resolve_job(x, cluster.slot_seconds, 10) for x in specs)
                      if j.window > 0]
                best, sched = _policies_on(specs, cluster, 10, policies)
                known = best - window_tail(js, 10)
                row: dict[str, object] = {"servers": n, "priority": prio[0], "seed": s,
                                          "best_policy": best}
                for p in paths:
                    opts = dict(PATHS[p])
                    warm, guard = opts.pop("warm"), opts.pop("guard")
                    res = solve_offline(js, cluster, 10, time_limit=args.time_limit,
                                        known=known if guard else 0.0,
                                        incumbent=sched if warm else None,
                                        **opts)  # type: ignore[arg-type]
                    row.update({f"{p}_s": res.solve_s, f"{p}_cpu_s": res.cpu_s,
                                f"{p}_status": res.status, f"{p}_opt": res.objective,
                                f"{p}_retried": res.retried})
                out.append(row)
                print(" ".join(f"{p}={row[f'{p}_cpu_s']:.2f}s/{row[f'{p}_status']}"
                               for p in paths), f"n={n} prio={prio}", flush=True)
    with open(RESULTS / "solvers_fig5.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(out[0]))
        w.writeheader()
        w.writerows(out)
    top = np.array([max(float(r[f"{p}_opt"]) for p in paths) for r in out])  # type: ignore[arg-type]
    print("| path | proven | wrong | re-solved | suspect | CPU s median | p90 | max | "
          "wall s median | p90 | max |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for p in paths:
        cpu = np.array([r[f"{p}_cpu_s"] for r in out], dtype=float)
        wall = np.array([r[f"{p}_s"] for r in out], dtype=float)
        opt = np.array([r[f"{p}_opt"] for r in out], dtype=float)
        st = [r[f"{p}_status"] for r in out]
        wrong = int(np.sum(opt < top - np.maximum(1e-6, 2e-7 * np.abs(top))))  # gap 1e-7
        print(f"| {p} | {st.count('optimal')}/{len(out)} | {wrong} | "
              f"{sum(bool(r[f'{p}_retried']) for r in out)} | {st.count('suspect')} | "
              f"{np.median(cpu):.2f} | {np.percentile(cpu, 90):.2f} | {cpu.max():.2f} | "
              f"{np.median(wall):.2f} | {np.percentile(wall, 90):.2f} | {wall.max():.2f} |")


def bound(args: argparse.Namespace) -> None:
    cluster = oasis_paper_cluster(seed=args.seed)
    specs, _ = oasis_paper_jobs(args.jobs, seed=args.seed, slots=args.slots)
    utilities, dual = {}, None
    for name in (available_policies() if args.policies == "all" else args.policies.split(",")):
        t0 = time.perf_counter()
        res = simulate(specs, cluster, make_policy(name), args.slots)
        utilities[name] = sum(r.utility for r in res.records.values())
        if name == "oasis":
            dual = res.report["dual_bound"]
        print(f"{name}: {utilities[name]:.1f} ({time.perf_counter() - t0:.0f} s)", flush=True)
    js = [j for j in (resolve_job(s, cluster.slot_seconds, args.slots) for s in specs)
          if j.window > 0]
    tail = window_tail(js, args.slots)
    known = max(utilities.values()) - tail
    print("| path | vars | rows | bound (LP + tail) | status | wall s | CPU s |")
    print("|---|---:|---:|---:|---|---:|---:|")
    for label in ("highspy", "scipy"):
        c0, t0 = time.process_time(), time.perf_counter()
        lp = lp_bound(js, cluster, args.slots, pooled=True, known=known,
                      solver=scipy_solver if label == "scipy" else None)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        print(f"| {label} | {lp.n_vars} | {lp.n_cons} | {lp.bound + tail:.1f} | {lp.status} | "
              f"{wall:.1f} (solver {lp.solve_s:.1f}) | {cpu:.1f} |", flush=True)
    print(f"OASiS dual bound {dual:.1f}; window tail {tail:.2g}; utilities: "
          + ", ".join(f"{k} {v:.1f}" for k, v in sorted(utilities.items(),
                                                         key=lambda kv: -kv[1])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=("study", "growth", "solvers", "bound", "figures"))
    ap.add_argument("--instances", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=300.0)
    ap.add_argument("--scipy", action="store_true",
                    help="growth: also the same model on scipy's HiGHS")
    ap.add_argument("--paths", default=",".join(PATHS), help="solvers: paths to compare")
    ap.add_argument("--policies", default="all",
                    help="solvers: policies whose best schedule is the incumbent; bound: "
                    "policies simulated beside the bound (default all)")
    ap.add_argument("--cells", choices=("all", "big"), default="all",
                    help="growth: every cell, or only 20 jobs x T = 20")
    ap.add_argument("--jobs", type=int, default=400, help="bound: jobs")
    ap.add_argument("--slots", type=int, default=300, help="bound: horizon T")
    args = ap.parse_args()
    RESULTS.mkdir(exist_ok=True)
    if args.part == "figures":  # redraw from results/ratio_fig5.csv
        figures(read_csv(RESULTS / "ratio_fig5.csv"))
    else:
        {"study": study, "growth": growth, "solvers": solvers, "bound": bound}[args.part](args)


if __name__ == "__main__":
    main()
