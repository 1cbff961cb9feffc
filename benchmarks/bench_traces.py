"""Every policy at trace scale, one cached cell per child process.

Each (jobs, policy) cell runs in a fresh Python process (pinned, with the parent, to one
core unless ``PSCHED_BENCH_NO_PIN=1``): take the first N jobs by arrival, size the default
cluster, run the whole simulation (loop, policy, independent checker). Default trace:
ElasticFlow cluster04 (15,802 jobs); ``--philly`` for issue 18's Philly-scale one.

    python benchmarks/bench_traces.py [--jobs 1000,4000,16000] [--policies oasis,fifo,drf]
        [--trace traces/elasticflow/augmented/cluster04.csv] [--cap 900]
    python benchmarks/bench_traces.py --profile oasis --jobs 2000   # cProfile, top functions
    python benchmarks/bench_traces.py --philly 80000 --jobs 1000,10000,80000 --cap 300
    python benchmarks/bench_traces.py --philly 80000 --jobs 80000 --policies drf   # one piece
    python benchmarks/bench_traces.py --philly 80000 --jobs 1000,10000,80000 --table-only

``--philly N`` synthesises the ``philly`` scenario (``psched trace synth --scenario philly
--jobs N --seed 0``, cached in the temp folder) and uses it as the trace; the policies default
to every registered one. Each cell runs in a fresh child process under a wall cap (``--cap``
seconds; a capped cell prints ``> N s (cap)``) and is cached as one row of ``--cache`` (CSV:
commit, UTC time, load average before/after); a cached cell is not run again (``--force``
re-runs, a larger cap re-runs capped cells), so the 80k cells can be run one at a time on a
quiet machine and the table printed with ``--table-only``. Each cell reports wall and CPU
time of the simulation, the child's peak memory (``ru_maxrss``) and, in brackets, its peak
before the simulation started (interpreter, imports and the cell's jobs: the first N jobs are
mapped once, in a separate child, and handed to the cell as a pickle, so loading the whole
80k-job CSV does not count in a 1k cell), decision p50/p99 (ms per event, wall from the
loop and CPU from a wrapper round the policy), the most active jobs at an event and the CPU
p99 over events with at least ``--active`` active jobs.

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

DEFAULT_TRACE = os.path.join(os.path.dirname(__file__), "..", "traces",
                             "elasticflow", "augmented", "cluster04.csv")


#: Policy variants by label: OASiS without its end-of-run dual certificate (decisions only).
VARIANTS: dict[str, tuple[str, dict]] = {"oasis-nocert": ("oasis", {"certificate": False})}


def _counting_arrivals(policy: object, cpu_ms: list[float]) -> None:
    """For a policy that decides at each arrival (OASiS): each decision's thread CPU ms
    (aligned with ``decision_ms``; the active jobs are not part of its view)."""
    arrive = policy.on_arrival  # type: ignore[attr-defined]

    def counted_arrival(job: object, view: object) -> object:
        c0 = time.thread_time()
        out = arrive(job, view)
        cpu_ms.append((time.thread_time() - c0) * 1e3)
        return out

    policy.on_arrival = counted_arrival  # type: ignore[attr-defined]


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
        load: float = 0.8, busy: int = 1000,
        workers: int | None = None) -> dict:
    """Run one cell in this process; return its figures."""
    import numpy as np

    from psched.core.horizon import trace_horizon
    from psched.traces import load_any
    from psched.traces.clusters import default_cluster_for_trace

    t0 = time.perf_counter()
    if trace.endswith(".pkl"):  # the first N jobs, mapped by ``--prepare``
        import pickle

        with open(trace, "rb") as f:
            specs = pickle.load(f)[:n_jobs]
    else:
        specs = load_any(trace, slot_seconds=slot_seconds)[:n_jobs]
    cluster = default_cluster_for_trace(specs, slot_seconds=slot_seconds, load=load)
    if workers is not None:  # the default servers, ``workers`` of each pool
        from psched.core.model import Cluster, Pool

        w = [s for s in cluster.servers if s.pool is Pool.WORKER][:1] * workers
        p = [s for s in cluster.servers if s.pool is Pool.PS][:1] * workers
        from dataclasses import replace

        cluster = Cluster(servers=tuple(
            [replace(s, server_id=f"w{i:03d}") for i, s in enumerate(w)]
            + [replace(s, server_id=f"p{i:03d}") for i, s in enumerate(p)]),
            slot_seconds=slot_seconds)
    horizon = trace_horizon(specs, slot_seconds)
    t1 = time.perf_counter()
    from psched.core.simulator import simulate
    from psched.policies import make_policy

    name, opts = VARIANTS.get(policy, (policy, {}))
    pol = make_policy(name, **opts)
    active: list[int] = []
    cpu_ms: list[float] = []
    if not getattr(pol, "commits_on_arrival", False):
        _counting(pol, active, cpu_ms)
    else:
        _counting_arrivals(pol, cpu_ms)
    base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    c1 = time.process_time()
    result = simulate(specs, cluster, pol, horizon, check=check)
    c2 = time.process_time()
    t2 = time.perf_counter()
    from psched.results.metrics import summarize

    s = summarize(result)
    act = np.asarray(active) if active else np.zeros(0, dtype=int)
    cpu = np.asarray(cpu_ms)
    at_busy = cpu[act >= busy] if act.size else np.zeros(0)
    return {"jobs": len(specs), "policy": policy, "load_s": t1 - t0,
            "sim_s": t2 - t1, "sim_cpu_s": c2 - c1,
            "wall_s": t2 - t0, "base_mb": base_mb,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "horizon": horizon, "workers": len(cluster.indices(cluster.servers[0].pool)),
            "admitted": s["admitted"], "completed": s["completed"],
            "utility": s["total_utility"], "dec_p50": s["decision_ms_p50"],
            "dec_p99": s["decision_ms_p99"], "events": s["decision_events"],
            "max_active": int(act.max()) if act.size else None,
            "busy_events": int(at_busy.size),
            "busy_p99": float(np.percentile(at_busy, 99)) if at_busy.size else None,
            "cpu_p50": float(np.percentile(cpu, 50)) if cpu.size else None,
            "cpu_p99": float(np.percentile(cpu, 99)) if cpu.size else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=DEFAULT_TRACE)
    ap.add_argument("--jobs", default="1000,4000,16000")
    ap.add_argument("--policies", default=None,
                    help="default: fifo,drf,oasis; with --philly every registered policy")
    ap.add_argument("--slot-seconds", type=float, default=3600.0)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--load", type=float, default=0.8, help="load of the default cluster")
    ap.add_argument("--active", type=int, default=1000,
                    help="p99 decision time over events with at least this many active jobs")
    ap.add_argument("--workers", type=int, help="this many default worker (and PS) servers")
    ap.add_argument("--philly", type=int, metavar="N",
                    help="use the synthetic philly trace of N jobs (seed 0) as --trace")
    ap.add_argument("--cap", type=float, default=300.0,
                    help="wall seconds per cell of the cached table (default 300)")
    ap.add_argument("--cpu-limit", type=int, metavar="S",
                    help="also cap each cell at S CPU seconds (RLIMIT_CPU); cached as capped")
    ap.add_argument("--timeout", type=float, dest="cap", help=argparse.SUPPRESS)  # old name
    ap.add_argument("--cache", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "results", "bench_traces_cells.csv"),
                    help="CSV of finished cells (default benchmarks/results/...)")
    ap.add_argument("--force", action="store_true", help="re-run cached cells")
    ap.add_argument("--table-only", action="store_true",
                    help="print the table from the cache; run nothing")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--profile", metavar="POLICY", help="cProfile one cell in this process")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity") and not os.environ.get("PSCHED_BENCH_NO_PIN"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    sizes = [int(x) for x in args.jobs.split(",")]
    if args.policies is None:
        if args.philly and not args.one:
            from psched.policies import available_policies

            args.policies = ",".join(available_policies())
        else:
            args.policies = "fifo,drf,oasis"
    if args.philly:
        args.trace = _philly_trace(args.philly, create=not args.table_only)
    if args.one:
        if args.cpu_limit:
            resource.setrlimit(resource.RLIMIT_CPU, (args.cpu_limit, args.cpu_limit + 5))
        print(json.dumps(one(args.trace, sizes[0], args.policies, args.slot_seconds,
                             not args.no_check, args.load, args.active,
                             args.workers)))
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
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    _cached_cells(args, sizes)


def _philly_trace(n: int, create: bool = True) -> str:
    """The ``philly`` scenario's trace of ``n`` jobs, seed 0, written once to the temp folder."""
    import tempfile

    path = os.path.join(tempfile.gettempdir(), f"psched_philly_{n}_s0.csv")
    if create and not os.path.exists(path):
        from psched.runs.runner import synth_trace

        synth_trace(scenario="philly", jobs=n, seed=0, slots=1, slot_seconds=3600.0,
                    options={}, out=path)
    return path


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def _prepare(trace: str, n: int, slot_seconds: float) -> str:
    """The first ``n`` jobs of ``trace`` as a pickle in the temp folder, mapped once in a child
    process (so the parent never holds the trace)."""
    import hashlib
    import tempfile

    st = os.stat(trace)
    tag = hashlib.sha256(f"{os.path.abspath(trace)}|{st.st_size}|{st.st_mtime_ns}|{n}|"
                         f"{slot_seconds}".encode()).hexdigest()[:16]
    path = os.path.join(tempfile.gettempdir(), f"psched_bench_jobs_{tag}.pkl")
    if not os.path.exists(path):
        code = ("import os, pickle, sys; from psched.traces import load_any; "
                "specs = load_any(sys.argv[1], slot_seconds=float(sys.argv[3]))"
                "[:int(sys.argv[2])]; "
                "tmp = sys.argv[4] + '.tmp' + str(os.getpid()); "
                "f = open(tmp, 'wb'); pickle.dump(specs, f, protocol=5); f.close(); "
                "os.replace(tmp, sys.argv[4])")
        subprocess.run([sys.executable, "-c", code, trace, str(n), str(slot_seconds), path],
                       check=True)
    return path


def _commit() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, check=True,
                             capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(  # the cache itself does not count
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ":/",
             ":(exclude,top)benchmarks/results"], cwd=here, check=True, capture_output=True,
            text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("+dirty" if dirty.strip() else "")


def _cached_cells(args: argparse.Namespace, sizes: list[int]) -> None:
    """The table: every (jobs, policy) cell, run in a fresh child under a wall cap
    unless the cache has it, each cached at once; then the table from the cache."""
    from trace_cells import cell_key, format_table, needs_run, read_cache, write_cache

    cache = read_cache(args.cache)
    trace_tag = os.path.basename(args.trace)
    commit = None if args.table_only else _commit()
    order: list[dict[str, str]] = []
    for n in sizes:
        for policy in args.policies.split(","):
            base = {"trace": trace_tag, "jobs": n, "policy": policy, "impl": "after",
                    "workers_opt": args.workers or "", "load": args.load,
                    "check": not args.no_check, "active": args.active}
            key = cell_key(base)
            if not args.table_only and needs_run(cache.get(key), args.cap, args.force):
                row = _run_cell(args, n, policy, base, commit or "unknown")
                cache[key] = {k: "" if v is None else str(v) for k, v in row.items()}
                write_cache(args.cache, cache.values())
                print(format_table([cache[key]], args.active).splitlines()[-1],
                      file=sys.stderr, flush=True)
            if key in cache:
                order.append(cache[key])
    if not args.table_only:
        write_cache(args.cache, cache.values())
    print(f"trace {trace_tag}, cache {args.cache}; peak MB = the cell's ru_maxrss, (before "
          "sim) = its peak once its jobs were loaded, before simulating")
    print(format_table(order, args.active))


def _run_cell(args: argparse.Namespace, n: int, policy: str, base: dict,
              commit: str) -> dict:
    """Run one cell in a fresh child under the wall cap; its cache row."""
    from datetime import datetime, timezone

    jobs_file = _prepare(args.trace, n, args.slot_seconds)
    before = f"{os.getloadavg()[0]:.1f}"
    utc = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
    cmd = [sys.executable, os.path.abspath(__file__), "--one", "--trace", jobs_file, "--jobs",
           str(n), "--policies", policy, "--slot-seconds", str(args.slot_seconds),
           "--load", str(args.load), "--active", str(args.active)]
    if args.workers:
        cmd += ["--workers", str(args.workers)]
    if args.no_check:
        cmd.append("--no-check")
    if args.cpu_limit:
        cmd += ["--cpu-limit", str(args.cpu_limit)]
    stamp = {**base, "cap_s": args.cap, "commit": commit, "utc": utc, "loadavg_before": before}
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.cap,
                             check=False)
    except subprocess.TimeoutExpired:  # the child is killed
        return {**stamp, "status": "capped", "loadavg_after": f"{os.getloadavg()[0]:.1f}"}
    stamp["loadavg_after"] = f"{os.getloadavg()[0]:.1f}"
    if args.cpu_limit and out.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return {**stamp, "status": "capped-cpu", "cap_s": args.cpu_limit}
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        return {**stamp, "status": f"exit {out.returncode}"}
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {**stamp, **{k: v for k, v in r.items() if k not in ("jobs", "policy")},
            "status": "ok"}


if __name__ == "__main__":
    main()
