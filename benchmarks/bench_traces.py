"""Scale on a real trace: OASiS, FIFO and DRF on ElasticFlow cluster04 (15,802 jobs), end to end.

Each (jobs, policy) cell runs in a fresh Python process pinned to one core: load and map the
trace (the first N jobs by arrival), size the default cluster, run the whole simulation (loop,
policy, independent checker). The child reports wall time of each phase and its peak resident
memory (``ru_maxrss``). Ratios are against FIFO at the same size, measured in the same run.

    python benchmarks/bench_traces.py [--jobs 1000,4000,16000] [--policies oasis,fifo,drf]
        [--trace ../shared/traces/elasticflow/augmented/cluster04.csv] [--timeout 900]
    python benchmarks/bench_traces.py --profile oasis --jobs 2000   # cProfile, top functions
    python benchmarks/bench_traces.py --philly 80000 --jobs 1000,10000,80000 --impl both \
        --policies fifo,srtf,drf,rrh,optimus,greedy-fill,greedy-gain --timeout 300

``--philly N`` synthesises the ``philly`` scenario (``psched trace synth --scenario philly
--jobs N --seed 0``, cached in the temp folder) and uses it as the trace. ``--impl before``
runs the rivals, placement and loop as they were before issue 18 (frozen in
``tests/legacy_policies``), ``both`` runs before then after for each policy. Each cell also
reports CPU time of the simulation, decision p50/p99 (ms per event), the most active jobs at
an event and the p99 decision time over events with at least ``--active`` active jobs.

Policy ``oasis-nocert`` is OASiS with ``certificate=False``: the same decisions, without the
dual certificate (19) computed in ``report()`` at the end of the run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time

DEFAULT_TRACE = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "traces",
                             "elasticflow", "augmented", "cluster04.csv")


#: Policy variants by label: OASiS without its end-of-run dual certificate (decisions only).
VARIANTS: dict[str, tuple[str, dict]] = {"oasis-nocert": ("oasis", {"certificate": False})}


def _impl(impl: str, name: str, opts: dict) -> tuple:
    """(simulate, policy) of the current code, or of the frozen pre-issue-18 copies."""
    if impl == "before":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "tests"))
        from legacy_policies import make_legacy
        from legacy_policies.simulator import simulate as old_simulate

        return old_simulate, make_legacy(name, **opts)
    from psched.policies.base import make_policy
    from psched.simulator import simulate

    return simulate, make_policy(name, **opts)


def _counting(policy: object, active: list[int], cpu_ms: list[float]) -> None:
    """Record, at every event the policy plans (aligned with ``decision_ms``), the active jobs
    and the decision's CPU time (its arrivals' ``on_arrival`` plus ``plan``, thread CPU ms:
    unlike the loop's wall-clock figure it does not count other processes' load)."""
    plan, arrive = policy.plan, policy.on_arrival  # type: ignore[attr-defined]
    pending = [0.0]

    def counted_arrival(job: object, view: object) -> object:
        c0 = time.thread_time()
        out = arrive(job, view)
        pending[0] += time.thread_time() - c0
        return out

    def counted(view: object) -> object:
        c0 = time.thread_time()
        out = plan(view)
        if view.event:  # type: ignore[attr-defined]
            active.append(len(view.active))  # type: ignore[attr-defined]
            cpu_ms.append((pending[0] + time.thread_time() - c0) * 1e3)
        pending[0] = 0.0
        return out

    policy.plan = counted  # type: ignore[attr-defined]
    policy.on_arrival = counted_arrival  # type: ignore[attr-defined]


def one(trace: str, n_jobs: int, policy: str, slot_seconds: float, check: bool,
        impl: str = "after", load: float = 0.8, busy: int = 1000,
        workers: int | None = None) -> dict:
    """Run one cell in this process; return its figures."""
    import numpy as np

    from psched.clusters import default_cluster_for_trace
    from psched.horizon import trace_horizon
    from psched.traces import load_any

    t0 = time.perf_counter()
    specs = load_any(trace, slot_seconds=slot_seconds)[:n_jobs]
    cluster = default_cluster_for_trace(specs, slot_seconds=slot_seconds, load=load)
    if workers is not None:  # the default servers, ``workers`` of each pool
        from psched.model import Cluster, Pool

        w = [s for s in cluster.servers if s.pool is Pool.WORKER][:1] * workers
        p = [s for s in cluster.servers if s.pool is Pool.PS][:1] * workers
        from dataclasses import replace

        cluster = Cluster(servers=tuple(
            [replace(s, server_id=f"w{i:03d}") for i, s in enumerate(w)]
            + [replace(s, server_id=f"p{i:03d}") for i, s in enumerate(p)]),
            slot_seconds=slot_seconds)
    horizon = trace_horizon(specs, slot_seconds)
    t1 = time.perf_counter()
    name, opts = VARIANTS.get(policy, (policy, {}))
    simulate, pol = _impl(impl, name, opts)
    active: list[int] = []
    cpu_ms: list[float] = []
    if not getattr(pol, "commits_on_arrival", False):
        _counting(pol, active, cpu_ms)
    c1 = time.process_time()
    result = simulate(specs, cluster, pol, horizon, check=check)
    c2 = time.process_time()
    t2 = time.perf_counter()
    from psched.metrics import summarize

    s = summarize(result)
    act = np.asarray(active) if active else np.zeros(0, dtype=int)
    cpu = np.asarray(cpu_ms)
    at_busy = cpu[act >= busy] if act.size else np.zeros(0)
    return {"jobs": len(specs), "policy": policy, "impl": impl, "load_s": t1 - t0,
            "sim_s": t2 - t1, "sim_cpu_s": c2 - c1,
            "wall_s": t2 - t0, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            / 1024, "horizon": horizon, "workers": len(cluster.indices(cluster.servers[0].pool)),
            "admitted": s["admitted"], "completed": s["completed"],
            "utility": s["total_utility"], "dec_p50": s["decision_ms_p50"],
            "dec_p99": s["decision_ms_p99"], "events": s["decision_events"],
            "max_active": int(act.max()) if act.size else None,
            "busy_events": int(at_busy.size),
            "busy_p99": float(np.percentile(at_busy, 99)) if at_busy.size else None,
            "cpu_p50": float(np.percentile(cpu, 50)) if cpu.size else None,
            "cpu_p99": float(np.percentile(cpu, 99)) if cpu.size else None}


def cell(args: argparse.Namespace, n: int, policy: str, impl: str = "after") -> dict | None:
    cmd = [sys.executable, __file__, "--one", "--trace", args.trace, "--jobs", str(n),
           "--policies", policy, "--slot-seconds", str(args.slot_seconds), "--impl", impl,
           "--load", str(args.load), "--active", str(args.active)]
    if args.workers:
        cmd += ["--workers", str(args.workers)]
    if args.no_check:
        cmd.append("--no-check")
    if args.cpu_limit:
        cmd += ["--cpu-limit", str(args.cpu_limit)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                             check=True)
    except subprocess.TimeoutExpired:
        return None
    except subprocess.CalledProcessError as err:
        if args.cpu_limit and err.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
            return None  # ran past its CPU-time cap
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
    ap.add_argument("--impl", choices=("after", "before", "both"), default="after")
    ap.add_argument("--load", type=float, default=0.8, help="load of the default cluster")
    ap.add_argument("--active", type=int, default=1000,
                    help="p99 decision time over events with at least this many active jobs")
    ap.add_argument("--cpu-limit", type=int, metavar="S",
                    help="cap each cell at S seconds of CPU time (RLIMIT_CPU); reported as "
                         "a timeout")
    ap.add_argument("--workers", type=int, help="this many default worker (and PS) servers")
    ap.add_argument("--philly", type=int, metavar="N",
                    help="use the synthetic philly trace of N jobs (seed 0) as --trace")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--profile", metavar="POLICY", help="cProfile one cell in this process")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity") and not os.environ.get("PSCHED_BENCH_NO_PIN"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    sizes = [int(x) for x in args.jobs.split(",")]
    if args.philly:
        args.trace = _philly_trace(args.philly)
    if args.one:
        if args.cpu_limit:
            resource.setrlimit(resource.RLIMIT_CPU, (args.cpu_limit, args.cpu_limit + 5))
        print(json.dumps(one(args.trace, sizes[0], args.policies, args.slot_seconds,
                             not args.no_check, args.impl, args.load, args.active,
                             args.workers)))
        return
    if args.impl != "after" or args.philly:
        _before_after(args, sizes)
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


def _philly_trace(n: int) -> str:
    """The ``philly`` scenario's trace of ``n`` jobs, seed 0, written once to the temp folder."""
    import tempfile

    path = os.path.join(tempfile.gettempdir(), f"psched_philly_{n}_s0.csv")
    if not os.path.exists(path):
        from psched.runner import synth_trace

        synth_trace(scenario="philly", jobs=n, seed=0, slots=1, slot_seconds=3600.0,
                    options={}, out=path)
    return path


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def _before_after(args: argparse.Namespace, sizes: list[int]) -> None:
    """One row per (jobs, policy, implementation): CPU and wall time, memory, decisions."""
    impls = ("before", "after") if args.impl == "both" else (args.impl,)
    print("| jobs | policy | impl | T | workers | sim CPU s | wall s | peak MB | decision wall ms "
          "p50 / p99 | decision CPU ms p50 / p99 | max active | CPU ms p99 at >= "
          f"{args.active} active (events) | completed | utility |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---|---|---:|---|---:|---:|")
    for n in sizes:
        for policy in args.policies.split(","):
            for impl in impls:
                r = cell(args, n, policy, impl)
                if r is None:
                    cap = (f"> {args.cpu_limit} CPU s (capped)" if args.cpu_limit
                           else f"> {args.timeout:.0f} wall s (timeout)")
                    print(f"| {n} | {policy} | {impl} | | | {cap} | | | | | | | |",
                          flush=True)
                    continue
                print(f"| {r['jobs']} | {policy} | {impl} | {r['horizon']} | {r['workers']} | "
                      f"{r['sim_cpu_s']:.1f} | {r['wall_s']:.1f} | {r['peak_mb']:.0f} | "
                      f"{_fmt(r['dec_p50'], '.2f')} / {_fmt(r['dec_p99'], '.2f')} | "
                      f"{_fmt(r['cpu_p50'], '.2f')} / {_fmt(r['cpu_p99'], '.2f')} | "
                      f"{_fmt(r['max_active'], 'd')} | {_fmt(r['busy_p99'], '.2f')} "
                      f"({r['busy_events']}) | {r['completed']} | {r['utility']:.1f} |",
                      flush=True)


if __name__ == "__main__":
    main()
