"""Simulation against reality: one trace simulated and run for real through the service.

On the embedded local Ray (loopback), with an honest model of the machine:

* the worker capacity is declared as the custom resource ``psched_worker_cpu`` = the cores
  (``--cores``), so the cluster model (:mod:`ray_cluster.cluster_model`) has room for that
  many 1-CPU workers and no more;
* tau is profiled under that configuration: one job of each workload with ``--cores``
  workers training at once for ``--profile-s`` seconds (seconds per mini-batch = elapsed x
  workers / mini-batches);
* each job's ``minibatches`` is rescaled by nominal tau / measured tau, so its work ``W`` in
  worker-slots is the one the trace was built for.

Then the same specs are simulated (:func:`psched.simulator.simulate`, OASiS, hindsight
prices from the trace) and run for real (:func:`ray_cluster.service.run_trace`, OASiS with
the trace as price history: the same U and L), and compared job by job: planned completion
slot (the simulation's) against the actual one, and utility. Time-critical jobs (sigmoid
decay >= 4, or deadline utilities) are reported apart.

Usage::

    python benchmarks/fidelity.py traces/run_small.csv --slot-seconds 30 --cores 2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time

from psched.horizon import trace_horizon
from psched.model import JobSpec
from psched.policies import make_policy
from psched.simulator import RunResult, simulate
from psched.traces.native import load_trace

__all__ = ["compare", "profile_loaded"]

CRITICAL_DECAY = 4.0  #: sigmoid decay from which a job counts as time-critical (oasis.md s. 7)


def profile_loaded(spec: JobSpec, workers: int, seconds: float) -> float:
    """Seconds per mini-batch with ``workers`` workers of ``spec`` training at once."""
    from psched.model import resolve_job
    from ray_cluster.executor import training_job
    from ray_cluster.runtime import JobRuntime, RuntimeConfig

    probe = dataclasses.replace(spec, job_id=f"profile-{spec.job_id}", max_workers=workers,
                                minibatches=10**7)
    rt = JobRuntime(training_job(resolve_job(probe, 3600.0, 10)),
                    RuntimeConfig(checkpoint_dir=None, evaluate=False))
    try:
        rt.resize([None] * workers, [None])
        rt.run_until(time.time() + 600, until_batches=4 * workers)  # warm-up
        rt.record()
        b0, t0 = rt.batches, time.time()
        rt.run_until(time.time() + seconds)
        rt.record()
        return (time.time() - t0) * workers / max(1, rt.batches - b0)
    finally:
        rt.close()


def _critical(spec: JobSpec) -> bool:
    u = spec.utility
    return u.kind == "deadline" or (u.kind == "sigmoid" and u.decay >= CRITICAL_DECAY)


def compare(sim: RunResult, real: RunResult) -> tuple[list[dict], dict]:
    """Per-job rows and the summary of a simulated and a real run of the same specs."""
    rows = []
    for job_id, s in sim.records.items():
        r = real.records[job_id]
        diff = (None if s.completion is None or r.completion is None
                else r.completion - s.completion)
        rows.append({"job": job_id, "critical": _critical(s.job.spec), "work": s.job.work,
                     "admitted_sim": s.admitted, "admitted_real": r.admitted,
                     "planned": s.completion, "actual": r.completion, "diff": diff,
                     "utility_sim": s.utility, "utility_real": r.utility})
    both = [x for x in rows if x["admitted_sim"] and x["admitted_real"]]
    within = sum(1 for x in both if x["diff"] is not None and abs(x["diff"]) <= 1)
    exact = sum(1 for x in both if x["diff"] == 0)

    def total(key: str, crit: bool) -> float:
        return sum(x[key] for x in rows if x["critical"] == crit)

    summary = {
        "jobs": len(rows), "admitted_both": len(both),
        "decisions_agree": sum(x["admitted_sim"] == x["admitted_real"] for x in rows),
        "within_one_slot": within, "exact": exact,
        "utility_sim_noncritical": total("utility_sim", False),
        "utility_real_noncritical": total("utility_real", False),
        "utility_sim_critical": total("utility_sim", True),
        "utility_real_critical": total("utility_real", True),
    }
    return rows, summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--slot-seconds", type=float, default=30.0)
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    p.add_argument("--profile-s", type=float, default=12.0)
    p.add_argument("--out", help="write the rows and summary as JSON here")
    args = p.parse_args()
    import ray

    from psched.commands_service import init_ray
    from ray_cluster.cluster_model import cluster_from_nodes
    from ray_cluster.service import ServiceConfig, run_trace

    init_ray(None, num_cpus=args.cores, resources={"psched_worker_cpu": float(args.cores)})
    cluster, node_of = cluster_from_nodes(ray.nodes(), args.slot_seconds)
    specs = load_trace(args.trace)
    taus: dict[tuple[str, str], float] = {}
    for s in specs:
        key = (s.workload, s.hparams)
        if key not in taus:
            taus[key] = profile_loaded(s, args.cores, args.profile_s)
            print(f"tau {s.workload} {s.hparams}: {taus[key] * 1e3:.2f} ms "
                  f"(nominal {s.tau_s * 1e3:.2f} ms)", flush=True)
    specs = [dataclasses.replace(s, tau_s=taus[(s.workload, s.hparams)], tau_includes_comm=True,
                                 minibatches=max(1, round(s.minibatches * s.tau_s
                                                          / taus[(s.workload, s.hparams)])))
             for s in specs]
    horizon = trace_horizon(specs, args.slot_seconds)
    sim = simulate(specs, cluster, make_policy("oasis"), horizon)
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="psched-fidelity-") as work:
        real = run_trace(specs, work, config=ServiceConfig(
            slot_seconds=args.slot_seconds, horizon=horizon, history=tuple(specs)),
            cluster=cluster, node_of=node_of)
    wall = time.time() - t0
    rows, summary = compare(sim, real)
    summary["wall_s"] = wall
    summary["cluster"] = cluster.to_dict()
    print("| job | critical | W | admitted sim/real | planned slot | actual slot | diff "
          "| utility sim | utility real |")
    print("|---|---|---|---|---|---|---|---|---|")
    for x in rows:
        print(f"| {x['job']} | {'yes' if x['critical'] else 'no'} | {x['work']} | "
              f"{int(x['admitted_sim'])}/{int(x['admitted_real'])} | {x['planned']} | "
              f"{x['actual']} | {x['diff']} | {x['utility_sim']:.3f} | "
              f"{x['utility_real']:.3f} |")
    print(json.dumps({k: v for k, v in summary.items() if k != "cluster"}))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"rows": rows, "summary": summary}, fh, indent=2)
    ray.shutdown()


if __name__ == "__main__":
    main()
