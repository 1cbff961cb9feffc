"""Scale on a real trace: OASiS, FIFO and DRF on ElasticFlow cluster04 (15,802 jobs), end to end.

Each (jobs, policy) cell runs in a fresh Python process pinned to one core: load and map the
trace (the first N jobs by arrival), size the default cluster, run the whole simulation (loop,
policy, independent checker). The child reports wall time of each phase and its peak resident
memory (``ru_maxrss``). Ratios are against FIFO at the same size, measured in the same run.

    python benchmarks/bench_traces.py [--jobs 1000,4000,16000] [--policies oasis,fifo,drf]
        [--trace ../shared/traces/elasticflow/augmented/cluster04.csv] [--timeout 900]
    python benchmarks/bench_traces.py --profile oasis --jobs 2000   # cProfile, top functions

Policy ``oasis-nocert`` is OASiS with ``certificate=False``: the same decisions, without the
dual certificate (19) computed in ``report()`` at the end of the run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

DEFAULT_TRACE = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "traces",
                             "elasticflow", "augmented", "cluster04.csv")


#: Policy variants by label: OASiS without its end-of-run dual certificate (decisions only).
VARIANTS: dict[str, tuple[str, dict]] = {"oasis-nocert": ("oasis", {"certificate": False})}


def one(trace: str, n_jobs: int, policy: str, slot_seconds: float, check: bool) -> dict:
    """Run one cell in this process; return its figures."""
    from psched.clusters import default_cluster_for_trace
    from psched.horizon import trace_horizon
    from psched.policies.base import make_policy
    from psched.simulator import simulate
    from psched.traces import load_any

    t0 = time.perf_counter()
    specs = load_any(trace, slot_seconds=slot_seconds)[:n_jobs]
    cluster = default_cluster_for_trace(specs, slot_seconds=slot_seconds)
    horizon = trace_horizon(specs, slot_seconds)
    t1 = time.perf_counter()
    name, opts = VARIANTS.get(policy, (policy, {}))
    result = simulate(specs, cluster, make_policy(name, **opts), horizon, check=check)
    t2 = time.perf_counter()
    from psched.metrics import summarize

    s = summarize(result)
    return {"jobs": len(specs), "policy": policy, "load_s": t1 - t0, "sim_s": t2 - t1,
            "wall_s": t2 - t0, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            / 1024, "horizon": horizon, "workers": len(cluster.indices(cluster.servers[0].pool)),
            "admitted": s["admitted"], "completed": s["completed"],
            "utility": s["total_utility"]}


def cell(args: argparse.Namespace, n: int, policy: str) -> dict | None:
    cmd = [sys.executable, __file__, "--one", "--trace", args.trace, "--jobs", str(n),
           "--policies", policy, "--slot-seconds", str(args.slot_seconds)]
    if args.no_check:
        cmd.append("--no-check")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                             check=True)
    except subprocess.TimeoutExpired:
        return None
    except subprocess.CalledProcessError as err:
        print(err.stderr[-2000:], file=sys.stderr)
        raise
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=DEFAULT_TRACE)
    ap.add_argument("--jobs", default="1000,4000,16000")
    ap.add_argument("--policies", default="fifo,drf,oasis")
    ap.add_argument("--slot-seconds", type=float, default=3600.0)
    ap.add_argument("--timeout", type=float, default=900.0, help="per cell, seconds")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--profile", metavar="POLICY", help="cProfile one cell in this process")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    sizes = [int(x) for x in args.jobs.split(",")]
    if args.one:
        print(json.dumps(one(args.trace, sizes[0], args.policies, args.slot_seconds,
                             not args.no_check)))
        return
    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.runcall(one, args.trace, sizes[0], args.profile, args.slot_seconds,
                     not args.no_check)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
        pstats.Stats(prof).sort_stats("tottime").print_stats(20)
        return
    print("| jobs | policy | T slots | worker servers | load+map s | simulate s | wall s | "
          "vs FIFO | peak MB | admitted | completed | utility |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        fifo = None
        for policy in args.policies.split(","):
            r = cell(args, n, policy)
            if r is None:
                print(f"| {n} | {policy} | | | | | > {args.timeout:.0f} (timed out) | | | | | |",
                      flush=True)
                continue
            if policy == "fifo":
                fifo = r["wall_s"]
            ratio = f"{r['wall_s'] / fifo:.1f}" if fifo else "-"
            print(f"| {r['jobs']} | {policy} | {r['horizon']} | {r['workers']} | "
                  f"{r['load_s']:.1f} | {r['sim_s']:.1f} | {r['wall_s']:.1f} | {ratio} | "
                  f"{r['peak_mb']:.0f} | {r['admitted']} | {r['completed']} | "
                  f"{r['utility']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
