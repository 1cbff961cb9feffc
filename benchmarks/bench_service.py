"""Burst load on the scheduler service: N submissions at once, all journaled and decided.

Each submission is decided at once (``SchedulerService.submit``): the policy's decision, the
journal transaction (SQLite WAL, synchronous=FULL) with the submission and its decision, under
the service lock. Measured per submission: submit-to-decision latency (wall), and the policy's
own decision time in the same run (the baseline: latency minus it is the service's overhead).
Jobs and cluster: the ``oasis-paper`` scenario (section 7 of ``oasis.md``), every job arriving
in the burst's slot. The loop runs with the simulated executor and a 30 s wall slot, so the
burst lands within one slot; the service thread waits on the clock meanwhile.

Usage::

    python benchmarks/bench_service.py --jobs 500 [--policy oasis] [--sizes 100,250,500]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import threading
import time

import numpy as np

from psched.core.executor import SimulatedExecutor
from psched.traces.synth import SCENARIOS
from ray_cluster.service import SchedulerService, ServiceConfig

__all__ = ["burst"]


def burst(n_jobs: int, *, policy: str = "oasis", seed: int = 0, threads: int = 8,
          slots: int = 300) -> dict[str, float]:
    """Submit ``n_jobs`` at once from ``threads`` client threads; return the figures."""
    jobs_fn, cluster_fn = SCENARIOS["oasis-paper"]
    specs, _ = jobs_fn(n_jobs, seed=seed, slots=slots, slot_seconds=3600.0, options={})
    # the model keeps the scenario's 3600 s slots (job sizes in slots); the wall clock ticks
    # every 30 s, so the whole burst lands in slot 0
    cluster = cluster_fn(seed=seed, slot_seconds=3600.0)
    # every job arrives in the burst's slot and names a workload, as a submission must (the
    # simulated executor never trains it)
    specs = [dataclasses.replace(s, arrival=0, workload="softmax",
                                 hparams='{"dataset": "digits"}') for s in specs]
    with tempfile.TemporaryDirectory() as work:
        cfg = ServiceConfig(policy=policy, slot_seconds=30.0, horizon=slots,
                            history=tuple(specs))
        svc = SchedulerService(work, config=cfg, cluster=cluster, executor=SimulatedExecutor())
        svc.start()
        lat: list[float] = []
        lock = threading.Lock()

        def client(part: list) -> None:
            for s in part:
                out = svc.submit(s)
                with lock:
                    lat.append(out["latency_ms"])

        t0 = time.perf_counter()
        workers = [threading.Thread(target=client, args=(specs[i::threads],))
                   for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        wall = time.perf_counter() - t0
        svc.stop()
        svc.join()
        decisions = [d for d in svc.journal.decisions() if d.kind == "arrival"]
        subs = svc.journal.submissions()
        # a re-planning policy (oasis-rp) books its arrival decisions per event slot: the
        # burst's slot has not ended, so they are still the slot's event times
        policy_ms = np.array(svc.loop.state.decision_ms or svc.loop.state.event_ms)
        svc.journal.close()
    lat_a = np.array(lat)
    return {
        "jobs": n_jobs, "journaled": len(subs), "decided": len(decisions),
        "admitted": sum(d.admitted for d in decisions), "wall_s": wall,
        "throughput_per_s": n_jobs / wall,
        "p50_ms": float(np.percentile(lat_a, 50)), "p99_ms": float(np.percentile(lat_a, 99)),
        "max_ms": float(lat_a.max()),
        "policy_p50_ms": float(np.percentile(policy_ms, 50)),
        "policy_p99_ms": float(np.percentile(policy_ms, 99)),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=500)
    p.add_argument("--sizes", default="", help="also these burst sizes (comma-separated)")
    p.add_argument("--policy", default="oasis")
    p.add_argument("--threads", default="1,8", help="client threads (comma-separated)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    sizes = sorted({args.jobs, *(int(x) for x in args.sizes.split(",") if x)})
    print("| burst | clients | journaled | decided | admitted | wall s | jobs/s | latency p50 ms "
          "| latency p99 ms | max ms | policy p50 ms | policy p99 ms | p99 / policy p99 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, k in [(n, int(k)) for n in sizes for k in args.threads.split(",")]:
        r = burst(n, policy=args.policy, seed=args.seed, threads=k)
        print(f"| {n} | {k} | {r['journaled']} | {r['decided']} | {r['admitted']} | "
              f"{r['wall_s']:.1f} | {r['throughput_per_s']:.1f} | {r['p50_ms']:.1f} | "
              f"{r['p99_ms']:.1f} | {r['max_ms']:.1f} | {r['policy_p50_ms']:.1f} | "
              f"{r['policy_p99_ms']:.1f} | {r['p99_ms'] / r['policy_p99_ms']:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
