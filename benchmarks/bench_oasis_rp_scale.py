"""Whole runs at trace scale: one policy per process, wall and CPU time, peak memory, outcome.

Traces: ``philly-<n>`` (the synthetic Philly-like trace of ``psched trace synth --scenario
philly``: most jobs short and 1-GPU, a tenth time-insensitive, a heavy tail; 1-hour slots,
the default cluster of the trace, the horizon rule of ``oasis.md`` section 7 under the
revised window rule) or ``ef-<name>`` (an ElasticFlow trace, loaded as
``benchmarks/rivals_tables.py`` does). Each policy runs in its own child process, so that the
peak resident memory (``ru_maxrss`` of that child) is the policy's run alone, trace loading
included. One markdown row per policy; its last column counts broken promises (re-derived
from the allocation rows, :func:`psched.core.promises.broken_promises`) and the policy's re-pack,
queue and commitment counters.

    python benchmarks/bench_oasis_rp_scale.py --trace philly-80000 \
        --policies oasis,oasis-rp,fifo,srtf
    python benchmarks/bench_oasis_rp_scale.py --trace ef-cluster04 --policies oasis,oasis-rp
    python benchmarks/bench_oasis_rp_scale.py --trace philly-80000 \
        --policies oasis-rp:commit_margin=1
    python benchmarks/bench_oasis_rp_scale.py --trace philly-80000 --policies oasis-rp \
        --max-cpu-s 120      # how far a run gets in 120 CPU s
    python benchmarks/bench_oasis_rp_scale.py --trace philly-80000 --policies oasis-rp,oasis \
        --setup-only         # CPU s of loading the trace and of the loop's set-up only

A policy may carry options, ``name:opt=value:...`` (as in ``bench_oasis_rp.py``).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import multiprocessing as mp  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))


def load(trace: str, seed: int) -> tuple[list[Any], Any, int]:
    """Jobs, cluster and horizon of ``trace``."""
    from psched.core.horizon import trace_horizon
    from psched.traces.clusters import default_cluster_for_trace

    if trace.startswith("philly-"):
        from psched.traces.synth_philly import philly_jobs

        specs, _ = philly_jobs(int(trace.split("-", 1)[1]), seed=seed)
        cluster = default_cluster_for_trace(specs, slot_seconds=3600.0)
        return specs, cluster, trace_horizon(specs, 3600.0, None)
    from rivals_tables import load as ef_load

    specs, cluster, horizon, _ = ef_load(trace, seed)
    return specs, cluster, horizon


class _Capped(Exception):
    """The run used up its CPU budget (``--max-cpu-s``)."""


def _capped(pol: Any, max_cpu_s: float | None, seen: list[int]) -> Any:
    """``pol`` with ``on_arrival`` counting arrivals and stopping the run past the budget."""
    inner = pol.on_arrival

    def on_arrival(job: Any, view: Any) -> Any:
        if max_cpu_s is not None and time.process_time() > max_cpu_s:
            raise _Capped
        seen[0] += 1
        return inner(job, view)

    pol.on_arrival = on_arrival
    return pol


def _policy_kw(policy: str) -> tuple[str, dict[str, Any]]:
    """``name:opt=value:...`` as a name and options (certificate off for the OASiS family)."""
    name, *opts = policy.split(":")
    kw: dict[str, Any] = {"certificate": False} if name.startswith("oasis") else {}
    for o in opts:
        k, v = o.split("=", 1)
        kw[k] = _number(v)
    return name, kw


def _setup_child(trace: str, policy: str, seed: int, out: Any) -> None:
    """``--setup-only``: CPU s of loading the trace, and of the loop's set-up (each job
    resolved, the policy's ``start``: hindsight prices, density floor and guard), nothing run."""
    from psched.core.arrivals import TraceArrivals
    from psched.core.loop import SchedulerLoop
    from psched.policies import make_policy

    c0 = time.process_time()
    specs, cluster, horizon = load(trace, seed)
    c1 = time.process_time()
    name, kw = _policy_kw(policy)
    SchedulerLoop(cluster=cluster, policy=make_policy(name, **kw), horizon=horizon,
                  arrivals=TraceArrivals(specs), known_jobs=specs, seed=seed)
    out.send({"policy": policy, "load_cpu_s": c1 - c0, "setup_cpu_s": time.process_time() - c1})


def _child(trace: str, policy: str, seed: int, out: Any, max_cpu_s: float | None = None) -> None:
    from psched.core.simulator import simulate
    from psched.policies import make_policy
    from psched.results.metrics import summarize

    w0, c0 = time.perf_counter(), time.process_time()
    specs, cluster, horizon = load(trace, seed)
    load_s = time.perf_counter() - w0
    name, kw = _policy_kw(policy)
    seen = [0]
    try:
        res = simulate(specs, cluster, _capped(make_policy(name, **kw), max_cpu_s, seen),
                       horizon, seed=seed)
    except _Capped:
        out.send({"policy": policy, "capped": True, "arrivals": seen[0], "jobs": len(specs),
                  "horizon": horizon, "wall_s": time.perf_counter() - w0,
                  "cpu_s": time.process_time() - c0,
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0})
        return
    from psched.core.promises import broken_promises

    s = summarize(res)
    broken = len(broken_promises(res))  # re-derived from the allocation rows
    util = s["utilization"]
    gpu = util.get("worker", {}).get("gpu") if isinstance(util, dict) else None
    dec = np.array(res.decision_ms) if res.decision_ms else np.zeros(1)
    out.send({"policy": policy, "jobs": len(specs), "horizon": horizon,
              "servers": len(cluster.servers), "utility": s["total_utility"],
              "completed": s["completed"], "rejected": s["rejected"], "gpu_util": gpu,
              "wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0,
              "load_s": load_s, "dec_p50": float(np.percentile(dec, 50)),
              "dec_p99": float(np.percentile(dec, 99)),
              "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
              "counters": " ".join([f"broken_promises={broken}"] + [
                  f"{k}={res.report[k]}" for k in COUNTERS if k in res.report])})


#: report counters shown per row (the re-pack, the queue and the commitments of ``oasis-rp``)
COUNTERS = ("repack_tried", "repack_kept", "queue_admitted", "admitted_uncommitted",
            "committed_late", "uncommitted_searches")


def _number(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="philly-80000")
    ap.add_argument("--policies", default="oasis,oasis-rp,fifo,srtf")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-cpu-s", type=float, default=None,
                    help="stop a policy's run past this much CPU (the row says how far it got)")
    ap.add_argument("--setup-only", action="store_true",
                    help="CPU s of the trace's loading and of the loop's set-up only")
    args = ap.parse_args()
    ctx = mp.get_context("fork")
    print(f"load {os.getloadavg()[0]:.2f}")
    if args.setup_only:
        print("| trace | policy | load CPU s | set-up CPU s |\n|---|---|---|---|")
        for policy in args.policies.split(","):
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_setup_child, args=(args.trace, policy, args.seed, send))
            proc.start()
            m = recv.recv()
            proc.join()
            print(f"| {args.trace} | {policy} | {m['load_cpu_s']:.2f} | {m['setup_cpu_s']:.2f} |",
                  flush=True)
        print(f"load {os.getloadavg()[0]:.2f}")
        return
    print("| trace | policy | jobs | T | utility | completed | rejected share | GPU util |"
          " decision p50 / p99 ms (wall) | run wall s | CPU s | peak RSS MB | counters |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for policy in args.policies.split(","):
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child,
                           args=(args.trace, policy, args.seed, send, args.max_cpu_s))
        proc.start()
        m = recv.recv()
        proc.join()
        if m.get("capped"):
            print(f"| {args.trace} | {policy} | {m['jobs']} | {m['horizon']} | stopped at"
                  f" {args.max_cpu_s:.0f} CPU s after {m['arrivals']} arrivals | | | | |"
                  f" {m['wall_s']:.1f} | {m['cpu_s']:.1f} | {m['maxrss_mb']:.0f} | |", flush=True)
            continue
        gpu = "" if m["gpu_util"] is None else f"{m['gpu_util']:.3f}"
        print(f"| {args.trace} | {policy} | {m['jobs']} | {m['horizon']} | {m['utility']:.1f} |"
              f" {m['completed']} | {m['rejected'] / m['jobs']:.3f} | {gpu} |"
              f" {m['dec_p50']:.2f} / {m['dec_p99']:.1f} | {m['wall_s']:.1f} |"
              f" {m['cpu_s']:.1f} | {m['maxrss_mb']:.0f} | {m['counters']} |", flush=True)
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
