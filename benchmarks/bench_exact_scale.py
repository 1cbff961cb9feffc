"""Dorm and the elastic MIP at trace scale, with and without the window rule (issue 18).

Each cell runs ``benchmarks/bench_traces.py``'s cell (load the synthetic Philly trace, first N
jobs, default cluster, whole simulation with the checker) in a fresh process and adds the
policy's own figures: how many decisions the window rule split, how many jobs the solver saw
and how many the fill planned, and the solver statistics.

    python benchmarks/bench_exact_scale.py --jobs 1000,10000 --policies dorm,elastic-mip,\
dorm-all,elastic-mip-all --cpu-limit 600
    nice -n 5 python benchmarks/bench_exact_scale.py --jobs 80000 --policies dorm \
        --cpu-limit 900 --timeout 1500        # one 80k cell at a time

``dorm-all`` / ``elastic-mip-all`` are the policies with ``max_jobs`` beyond any epoch: the
code before the window rule (tests/test_exact_reach.py holds them equal wherever no epoch is
split). Output: one Markdown row per cell; ``--json FILE`` appends the raw figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_traces

#: Policy labels of this benchmark: (registered name, options).
CELLS: dict[str, tuple[str, dict]] = {
    "dorm": ("dorm", {}), "elastic-mip": ("elastic-mip", {}),
    "dorm-all": ("dorm", {"max_jobs": 10**9}),
    "elastic-mip-all": ("elastic-mip", {"max_jobs": 10**9}),
}
_KEEP = ("reach", "solves", "not_optimal", "relaxed", "fallbacks", "greedy_better", "gap_mean",
         "suspect")


def child(trace: str, n: int, label: str) -> dict:
    """One cell in this process (``bench_traces.one``) plus the policy's report."""
    name, opts = CELLS[label]
    made: list[object] = []
    real = bench_traces._impl

    def capture(impl: str, nm: str, o: dict) -> tuple:
        out = real(impl, nm, o)
        made.append(out[1])
        return out

    bench_traces._impl = capture  # type: ignore[assignment]
    bench_traces.VARIANTS[label] = (name, opts)
    row = bench_traces.one(trace, n, label, 3600.0, True)
    rep = made[0].report()  # type: ignore[attr-defined]
    row["report"] = {k: v for k, v in rep.items() if any(s in k for s in _KEEP)}
    row["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def run_cell(args: argparse.Namespace, n: int, label: str) -> dict | None:
    cmd = [sys.executable, __file__, "--one", "--jobs", str(n), "--policies", label,
           "--trace", args.trace]
    def limit() -> None:
        if args.cpu_limit:
            resource.setrlimit(resource.RLIMIT_CPU, (args.cpu_limit, args.cpu_limit + 5))

    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                             check=True, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return None
    except subprocess.CalledProcessError as err:
        if err.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
            return None
        print(err.stderr[-2000:], file=sys.stderr)
        raise
    return json.loads(out.stdout.strip().splitlines()[-1])


def _row(r: dict) -> str:
    rep, fmt = r["report"], bench_traces._fmt
    pre = "dorm" if r["policy"].startswith("dorm") else "mip"
    split = (f"{rep.get(pre + '_reach_split', 0)}/{rep.get(pre + '_reach_decisions', 0)}, "
             f"{rep.get(pre + '_reach_jobs_beyond', 0)}")
    return (f"| {r['jobs']} | {r['policy']} | {r['sim_cpu_s']:.1f} | {r['sim_s']:.1f} | "
            f"{r['wall_s']:.1f} | {r['peak_mb']:.0f} | "
            f"{fmt(r['cpu_p50'], '.1f')} / {fmt(r['cpu_p99'], '.1f')} | "
            f"{r['max_active']} | {split} | {r['completed']} | {r['utility']:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="1000,10000")
    ap.add_argument("--policies", default="dorm,elastic-mip")
    ap.add_argument("--philly", type=int, default=80000, help="synthetic philly trace size")
    ap.add_argument("--trace", help="a trace file instead of the synthetic one")
    ap.add_argument("--cpu-limit", type=int, default=900, metavar="S")
    ap.add_argument("--timeout", type=float, default=1800.0, help="wall s per cell")
    ap.add_argument("--json", help="append each cell's raw figures to this file")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.trace:
        args.trace = bench_traces._philly_trace(args.philly)
    sizes = [int(x) for x in args.jobs.split(",")]
    if args.one:
        print(json.dumps(child(args.trace, sizes[0], args.policies)))
        return
    print(f"load average {os.getloadavg()[0]:.1f} at start")
    print("| jobs | policy | sim CPU s | sim wall s | cell wall s | peak MB | decision CPU ms "
          "p50 / p99 | max active | split decisions, jobs beyond (sum) | completed | utility |")
    print("|---:|---|---:|---:|---:|---:|---|---:|---|---:|---:|")
    for n in sizes:
        for label in args.policies.split(","):
            r = run_cell(args, n, label)
            if r is None:
                print(f"| {n} | {label} | > {args.cpu_limit} CPU s or {args.timeout:.0f} wall s "
                      "| | | | | | | | |", flush=True)
                continue
            print(_row(r), f"load {os.getloadavg()[0]:.1f}", flush=True)
            if args.json:
                with open(args.json, "a") as fh:
                    fh.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
