"""``oasis-rp`` when reality runs behind: suspensions and promises kept, literal boundary
re-plan vs the steady one (:mod:`psched.policies.oasis_rp.steady`), in the same run.

Reality is :class:`psched.behind.StartupExecutor`: every worker does ``--rate`` of its
planned work and a job that starts or resumes loses ``--startup`` of the slot (a resume
costs actor start-up on Ray). Two scenarios, each over ``--seeds`` seeds:

* ``contended``: 8 jobs (1-3 workers, 2-8 worker-slots, sigmoid or constant utility)
  arriving in slots 0-7 on one 2-worker server, the service tests' set-up;
* ``oasis-paper``: ``--jobs`` jobs of the ``oasis-paper`` scenario (1-hour model slots).

Per policy variant: admitted jobs, promises kept, admitted jobs completed, suspensions
(times a job stopped and ran again; from the executed allocations), the most suspensions
of one job, and CPU seconds of the runs.

Usage::

    python benchmarks/bench_rp_behind.py --seeds 8 --rate 0.9 --startup 1.0 --jobs 100
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence

from psched.behind import behind_run, churn
from psched.model import Cluster, JobSpec, Pool, Resources, Server
from psched.policies.oasis_rp import OasisRpPolicy
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs
from psched.utility import Utility

__all__ = ["contended", "main", "measure"]

SLOT_S = 0.01


def contended(seed: int) -> tuple[list[JobSpec], Cluster, int]:
    """The service tests' random set: 8 jobs on one worker server with 2 CPUs."""
    rng = random.Random(seed)
    specs = []
    for i in range(8):
        n = rng.randint(1, 3)
        work_s = rng.choice([0.02, 0.04, 0.08])
        value, kind = rng.uniform(1, 20), rng.choice(["sigmoid", "constant"])
        specs.append(JobSpec(
            job_id=f"j{i}", arrival=rng.randrange(0, 8), epochs=1, max_workers=n,
            minibatches=10, tau_s=work_s / (10 * n), grad_mb=0.01, tau_includes_comm=True,
            worker_demand=Resources(cpu=1, memory_gb=1, bandwidth_gbps=1),
            ps_demand=Resources(cpu=1, memory_gb=1, bandwidth_gbps=1),
            utility=Utility(kind=kind, value=value, decay=0.5, target=4), workload="softmax"))
    cap = Resources(cpu=2, memory_gb=8, bandwidth_gbps=10)
    cluster = Cluster(servers=(Server(server_id="m/w", pool=Pool.WORKER, capacity=cap),
                               Server(server_id="m/ps", pool=Pool.PS, capacity=cap)),
                      slot_seconds=SLOT_S)
    return specs, cluster, 80


def paper(seed: int, jobs: int) -> tuple[list[JobSpec], Cluster, int]:
    return list(oasis_paper_jobs(jobs, seed=seed)[0]), oasis_paper_cluster(seed=seed), 300


def measure(scenario: str, seeds: Sequence[int], rate: float, startup: float,
            jobs: int) -> dict[str, list[float]]:
    """Sums over ``seeds`` per variant: admitted, kept, completed, suspensions, max, CPU s."""
    out = {"literal": [0.0] * 6, "steady": [0.0] * 6}
    for seed in seeds:
        specs, cluster, horizon = contended(seed) if scenario == "contended" else paper(
            seed, jobs)
        for name in out:
            c0 = time.process_time()
            res = behind_run(specs, cluster, OasisRpPolicy(steady=name == "steady"), horizon,
                             rate=rate, startup=startup, seed=seed)
            cpu = time.process_time() - c0
            adm = [r for r in res.records.values() if r.promised is not None]
            kept = sum(r.completion is not None and r.completion <= r.promised for r in adm)
            done = sum(r.completion is not None for r in adm)
            ch = churn(res.allocations)
            row = out[name]
            for i, v in enumerate((len(adm), kept, done, ch.suspensions)):
                row[i] += v
            row[4] = max(row[4], ch.max_suspensions)
            row[5] += cpu
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--rate", type=float, default=0.9)
    ap.add_argument("--startup", type=float, default=1.0)
    ap.add_argument("--jobs", type=int, default=100, help="oasis-paper jobs (0: skip it)")
    args = ap.parse_args(argv)
    print(f"rate {args.rate}, startup {args.startup} slot per (re)start, "
          f"seeds 0..{args.seeds - 1}")
    print("| scenario | re-plan | admitted | promises kept | completed | suspensions | "
          "max per job | CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    scenarios = ["contended"] + (["oasis-paper"] if args.jobs else [])
    for sc in scenarios:
        got = measure(sc, range(args.seeds), args.rate, args.startup, args.jobs)
        label = sc if sc == "contended" else f"oasis-paper {args.jobs}"
        for name, r in got.items():
            print(f"| {label} | {name} | {r[0]:.0f} | {r[1]:.0f} | {r[2]:.0f} | {r[3]:.0f} | "
                  f"{r[4]:.0f} | {r[5]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
