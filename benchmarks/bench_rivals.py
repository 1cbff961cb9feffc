"""Decision time of the elastic MIP allocator and Dorm at 50, 200 and 500 active jobs.

The jobs are the ``oasis-paper`` scenario's (its cluster: 50 worker + 50 PS servers), all made
active at once. The first event places every job from scratch (all queued); then each of
``--events`` further events has one running job complete and one new job arrive, so the solver
sees running and queued jobs together, as in a run. Each figure is the time of the policy's
``plan`` call at an event (what the loop records as ``decision_ms``), p50 and p99 over those
events; the ratio is against a baseline measured in the same run on the same events (the
marginal-gain greedy for the MIP allocator, DRF for Dorm).

``--solvers`` compares, in one run on the same events, the solver paths of both MILP policies:
``scipy`` (the previous path, :func:`scipy.optimize.milp`, HiGHS 1.12, no warm start, the
elastic MIP's p/u model), ``unfolded`` (HiGHS 1.16 through highspy, same model), ``cold``
(highspy, the MIP's costs folded, no warm start) and ``warm`` (folded, started from the
previous event's solution: the default); CPU ms (``time.process_time``) beside wall ms.

    python benchmarks/bench_rivals.py [--sizes 50,200,500] [--events 15] [--seed 0] \
        [--mip-time-limit SECONDS]
    python benchmarks/bench_rivals.py --solvers scipy,unfolded,cold,warm --sizes 200
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from typing import Any

import numpy as np

from psched.core.model import resolve_job
from psched.offline.milp import scipy_solver
from psched.policies import JobStatus, RunContext, View, make_policy
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

PAIRS = (("elastic-mip", "greedy-gain"), ("dorm", "drf"))
HORIZON = 300
SOLVERS: dict[str, dict[str, Any]] = {
    "scipy": {"solver": scipy_solver, "warm_start": False, "fold": False},
    "unfolded": {"warm_start": False, "fold": False},
    "cold": {"warm_start": False},
    "warm": {"warm_start": True},
}


def event_times(policy_name: str, n: int, events: int, seed: int, cpu: list[float] | None = None,
                **options: Any) -> tuple[list[float], dict[str, Any]]:
    """Milliseconds of ``plan`` at the first event and at ``events`` completion+arrival events
    (CPU milliseconds appended to ``cpu`` when given)."""
    cluster = oasis_paper_cluster(seed=seed)
    specs, _ = oasis_paper_jobs(n + events, seed=seed, slots=HORIZON)
    jobs = [resolve_job(replace(s, arrival=0), cluster.slot_seconds, HORIZON) for s in specs]
    policy = make_policy(policy_name, **options)
    policy.start(RunContext(cluster=cluster, horizon=HORIZON, seed=seed))
    done = {j.job_id: 0.0 for j in jobs[:n]}
    pending = list(jobs[n:])
    by_id = {j.job_id: j for j in jobs}
    times: list[float] = []
    arrived: tuple[str, ...] = tuple(done)
    completed: tuple[str, ...] = ()
    for t in range(events + 1):
        view = View(t=t, cluster=cluster, horizon=HORIZON,
                    active={j: JobStatus(job=by_id[j], done=d, first_slot=None)
                            for j, d in done.items()},
                    arrived=arrived, completed=completed)
        t0, c0 = time.perf_counter(), time.process_time()
        plan = policy.plan(view)
        times.append((time.perf_counter() - t0) * 1e3)
        if cpu is not None:
            cpu.append((time.process_time() - c0) * 1e3)
        for j, a in plan.items():
            done[j] += a.n_workers
        running = [j for j in plan if plan[j].n_workers]
        if not running or not pending:
            break
        gone = min(running, key=lambda j: by_id[j].work - done[j])
        del done[gone]
        new = pending.pop(0)
        done[new.job_id] = 0.0
        arrived, completed = (new.job_id,), (gone,)
    return times, policy.report()


def compare_solvers(args: argparse.Namespace) -> None:
    """Both MILP policies under each solver path, on the same events, in one run."""
    print("| active jobs | policy | solver | p50 ms | p90 ms | p50 CPU ms | first event ms | "
          "solver notes |")
    print("|---:|---|---|---:|---:|---:|---:|---|")
    for n in (int(x) for x in args.sizes.split(",")):
        for name, _ in PAIRS:
            for label in args.solvers.split(","):
                opts = dict(SOLVERS[label])
                if name == "dorm":
                    opts.pop("fold", None)
                if name == "elastic-mip" and args.mip_time_limit is not None:
                    opts["time_limit_s"] = args.mip_time_limit
                if name == "elastic-mip" and args.mip_gap is not None:
                    opts["mip_rel_gap"] = args.mip_gap
                cpu: list[float] = []
                times, report = event_times(name, n, args.events, args.seed, cpu, **opts)
                later = np.array(times[1:] or times)
                later_cpu = np.array(cpu[1:] or cpu)
                notes = ", ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
                                  for k, v in report.items()
                                  if "objective" not in k and v is not None)
                print(f"| {n} | {name} | {label} | {np.percentile(later, 50):.1f} | "
                      f"{np.percentile(later, 90):.1f} | {np.percentile(later_cpu, 50):.1f} | "
                      f"{times[0]:.1f} | {notes} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="50,200,500")
    ap.add_argument("--events", type=int, default=15)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mip-time-limit", type=float, help="elastic-mip time_limit_s (default:"
                    " the policy's)")
    ap.add_argument("--mip-gap", type=float, help="elastic-mip mip_rel_gap (default: the "
                    "policy's)")
    ap.add_argument("--solvers", help="compare solver paths (comma list of scipy, cold, warm)")
    args = ap.parse_args()
    if args.solvers:
        compare_solvers(args)
        return
    mip_opts: dict[str, Any] = ({} if args.mip_time_limit is None
                                else {"time_limit_s": args.mip_time_limit})
    if args.mip_gap is not None:
        mip_opts["mip_rel_gap"] = args.mip_gap
    print("| active jobs | policy | p50 ms | p99 ms | first event ms | baseline | baseline p50 ms"
          " | ratio p50 | notes |")
    print("|---:|---|---:|---:|---:|---|---:|---:|---|")
    for n in (int(x) for x in args.sizes.split(",")):
        for name, base in PAIRS:
            opts = mip_opts if name == "elastic-mip" else {}
            times, report = event_times(name, n, args.events, args.seed, **opts)
            btimes, _ = event_times(base, n, args.events, args.seed)
            later, blater = np.array(times[1:] or times), np.array(btimes[1:] or btimes)
            notes = ", ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
                              for k, v in report.items() if "objective" not in k)
            print(f"| {n} | {name} | {np.percentile(later, 50):.1f} | "
                  f"{np.percentile(later, 99):.1f} | {times[0]:.1f} | {base} | "
                  f"{np.percentile(blater, 50):.1f} | "
                  f"{np.percentile(later, 50) / np.percentile(blater, 50):.1f} | {notes} |",
                  flush=True)


if __name__ == "__main__":
    main()
