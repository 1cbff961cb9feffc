"""Simulation against reality: one trace simulated and run for real through the service.

On the embedded local Ray (loopback), with an honest model of the machine:

* the worker capacity is declared as the custom resource ``psched_worker_cpu`` = the cores
  (``--cores``), so the cluster model (:mod:`ray_cluster.runtime.cluster_model`) has room for that
  many 1-CPU workers and no more;
* tau is profiled under that configuration: one job of each workload with ``--cores``
  workers training at once for ``--profile-s`` seconds (seconds per mini-batch = elapsed x
  workers / mini-batches);
* each job's ``minibatches`` is rescaled by nominal tau / measured tau, so its work ``W`` in
  worker-slots is the one the trace was built for.

Then the same specs are simulated (:func:`psched.core.simulator.simulate`, OASiS, hindsight
prices from the trace) and run for real (:func:`ray_cluster.service.run_trace`, OASiS with
the trace as price history: the same U and L), and compared job by job: planned completion
slot (the simulation's) against the actual one, and utility. Time-critical jobs (sigmoid
decay >= 4, or deadline utilities) are reported apart.

``--testbed`` instead runs a scaled-down replica of the paper's testbed (``oasis.md`` section
6: 12 jobs over 10 slots) for real with OASiS and rivals, total utility beside the paper's.

Usage::

    python benchmarks/fidelity.py traces/run_small.csv --slot-seconds 30 --cores 2
    python benchmarks/fidelity.py --testbed --slot-seconds 10 --cores 2 --policies oasis,fifo,drf
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time
from typing import Any

from psched.core.horizon import trace_horizon
from psched.core.model import JobSpec
from psched.core.records import RunResult
from psched.core.simulator import simulate
from psched.policies import make_policy
from psched.traces.native import load_trace

__all__ = ["compare", "profile_loaded"]

CRITICAL_DECAY = 4.0  #: sigmoid decay from which a job counts as time-critical (oasis.md s. 7)


def profile_loaded(spec: JobSpec, workers: int, steps: int) -> float:
    """Seconds per mini-batch with ``workers`` workers of ``spec`` training at once (``steps``
    mini-batches each), served by as many PS shards as a plan gives that many workers."""
    from ray_cluster.runtime.executor import profiled_spec

    probe = dataclasses.replace(spec, max_workers=max(workers, spec.max_workers))
    return profiled_spec(probe, workers=workers, steps=steps).tau_s


class SlotLog:
    """A :class:`~ray_cluster.runtime.executor.RayExecutor` that records, per slot and job, the
    boundary time (resize) and the mini-batches trained against what the profiled tau
    promises for the slot (workers x slot seconds / tau)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.rows: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:  # lookahead, runtimes, release, close, ...
        return getattr(self.__dict__["inner"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "lookahead":
            setattr(self.inner, name, value)
        else:
            super().__setattr__(name, value)

    def apply(self, t: int, plan: Any, jobs: Any) -> Any:
        ex = self.inner
        before = {j: ex.runtimes[j].batches if j in ex.runtimes else 0 for j in plan}
        report = ex.apply(t, plan, jobs)
        log = ex.slot_log[-1]
        for job_id, alloc in plan.items():
            rt = ex.runtimes.get(job_id)
            got = (rt.batches if rt is not None else 0) - before[job_id]
            want = alloc.n_workers * ex.slot_seconds / jobs[job_id].spec.tau_s
            self.rows.append({"slot": t, "job": job_id, "workers": alloc.n_workers,
                              "ps": alloc.n_ps, "boundary_s": log["resize_s"],
                              "batches": got, "expected": want,
                              "ratio": got / want if want else 0.0,
                              "done": bool(rt is not None and rt.done)})
        return report


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


#: The paper's testbed total utility (x 10^2), oasis.md section 6.
PAPER_TESTBED = {"oasis": 2.82, "dorm": 1.78, "fifo": 1.38, "drf": 0.90, "rrh": 0.61}


def testbed_specs(seed: int, tau: dict[str, float], slot_seconds: float) -> list[JobSpec]:
    """12 jobs arriving over slots 0..5 of a 10-slot horizon; W in 2..4 worker-slots, N 1..2,
    sigmoid utilities with the paper's type mix (10% insensitive, 55% sensitive, 35%
    critical), value U[1, 100], target U{F..10}."""
    import numpy as np

    from psched.core.model import Resources
    from psched.core.utility import Utility

    rng = np.random.default_rng(seed)
    out = []
    for i in range(12):
        wl = "softmax" if i % 2 == 0 else "mlp"
        hp = '{"dataset": "digits"}' if wl == "softmax" else '{"dataset": "digits", "hidden": 32}'
        n = int(rng.integers(1, 3))
        work = int(rng.integers(2, 5))
        fastest = -(-work // n)
        kind = rng.choice(3, p=[0.1, 0.55, 0.35])
        decay = 0.0 if kind == 0 else (rng.uniform(0.01, 1) if kind == 1 else rng.uniform(4, 6))
        m = max(1, round((work - 0.5) * slot_seconds / (n * tau[wl])))
        out.append(JobSpec(
            job_id=f"tb{i:02d}", arrival=int(rng.integers(0, 6)), epochs=1, max_workers=n,
            minibatches=m, tau_s=tau[wl], grad_mb=0.05, tau_includes_comm=True,
            worker_demand=Resources(cpu=1, memory_gb=1, bandwidth_gbps=1),
            ps_demand=Resources(cpu=1, memory_gb=1, bandwidth_gbps=1),
            utility=Utility(kind="sigmoid", value=float(rng.uniform(1, 100)),
                            decay=float(decay), target=float(rng.integers(fastest, 11))),
            workload=wl, hparams=hp))
    return out


def testbed(args: argparse.Namespace, cluster, node_of) -> None:  # type: ignore[no-untyped-def]
    from ray_cluster.service import ServiceConfig, run_trace

    probe = testbed_specs(args.seed, {"softmax": 0.01, "mlp": 0.01}, args.slot_seconds)
    tau = {}
    for s in probe:
        if s.workload not in tau:
            tau[s.workload] = profile_loaded(s, args.cores, args.profile_steps)
    specs = testbed_specs(args.seed, tau, args.slot_seconds)
    horizon = 10
    print("| policy | admitted sim/real | completed sim/real | utility sim | utility real "
          "| paper (x10^2) |")
    print("|---|---|---|---|---|---|")
    for name in args.policies.split(","):
        sim = simulate(specs, cluster, make_policy(name), horizon)
        with tempfile.TemporaryDirectory(prefix="psched-testbed-") as work:
            real = run_trace(specs, work, config=ServiceConfig(
                policy=name, slot_seconds=args.slot_seconds, horizon=horizon,
                history=tuple(specs)), cluster=cluster, node_of=node_of)
        u_sim = sum(r.utility for r in sim.records.values())
        u_real = sum(r.utility for r in real.records.values())
        print(f"| {name} | {sum(r.admitted for r in sim.records.values())}/"
              f"{sum(r.admitted for r in real.records.values())} | "
              f"{sum(r.completion is not None for r in sim.records.values())}/"
              f"{sum(r.completion is not None for r in real.records.values())} | "
              f"{u_sim:.1f} | {u_real:.1f} | {PAPER_TESTBED.get(name, float('nan'))} |",
              flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", nargs="?")
    p.add_argument("--testbed", action="store_true", help="the testbed replica instead")
    p.add_argument("--policies", default="oasis,fifo,drf")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--slot-seconds", type=float, default=30.0)
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    p.add_argument("--profile-steps", type=int, default=3000,
                   help="mini-batches per worker when profiling tau")
    p.add_argument("--out", help="write the rows and summary as JSON here")
    args = p.parse_args()
    import ray

    from psched.cli.connect import init_ray
    from ray_cluster.runtime import RuntimeConfig
    from ray_cluster.runtime.cluster_model import cluster_from_nodes
    from ray_cluster.runtime.executor import RayExecutor
    from ray_cluster.service import ServiceConfig, run_trace

    init_ray(None, num_cpus=args.cores, resources={"psched_worker_cpu": float(args.cores)})
    cluster, node_of = cluster_from_nodes(ray.nodes(), args.slot_seconds)
    if args.testbed:
        testbed(args, cluster, node_of)
        ray.shutdown()
        return
    specs = load_trace(args.trace)
    taus: dict[tuple[str, str], float] = {}
    for s in specs:
        key = (s.workload, s.hparams)
        if key not in taus:
            taus[key] = profile_loaded(s, args.cores, args.profile_steps)
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
        executor = SlotLog(RayExecutor(cluster, RuntimeConfig(checkpoint_dir=f"{work}/ckpt"),
                                       slot_seconds=args.slot_seconds, node_of=node_of))
        real = run_trace(specs, work, config=ServiceConfig(
            slot_seconds=args.slot_seconds, horizon=horizon, history=tuple(specs)),
            cluster=cluster, node_of=node_of, executor=executor)
    wall = time.time() - t0
    rows, summary = compare(sim, real)
    summary["wall_s"] = wall
    print("| slot | job | workers/PS | boundary s | mini-batches | at profiled tau | ratio |")
    print("|---|---|---|---|---|---|---|")
    for r in executor.rows:
        print(f"| {r['slot']} | {r['job']} | {r['workers']}/{r['ps']} | {r['boundary_s']:.2f} | "
              f"{r['batches']} | {r['expected']:.0f} | {r['ratio']:.2f} |")
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
            json.dump({"rows": rows, "summary": summary, "slots": executor.rows}, fh, indent=2)
    ray.shutdown()


if __name__ == "__main__":
    main()
