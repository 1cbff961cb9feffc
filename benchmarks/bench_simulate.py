"""Wall time of ``psched simulate`` on the oasis-paper scenario, 100 to 400 jobs, T = 300.

Each figure is the median CPU time (``time.process_time``: robust on a shared, loaded machine)
of ``--repeat`` runs of the whole simulation (loop, policy and the independent checker); BLAS is
pinned to one thread. Ratios are against FIFO at the same size, measured in the same run, and
against the same policy with the checker off (the checker's share).

    python benchmarks/bench_simulate.py [--jobs 100,200,300,400] [--policies fifo,drf]
"""

from __future__ import annotations

import argparse
import statistics
import time

from psched.core.simulator import simulate
from psched.policies import available_policies, make_policy
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs


def time_run(n_jobs: int, policy: str, seed: int, check: bool, slots: int) -> float:
    specs, _ = oasis_paper_jobs(n_jobs, seed=seed, slots=slots)
    cluster = oasis_paper_cluster(seed=seed)
    t0 = time.process_time()
    simulate(specs, cluster, make_policy(policy), slots, seed=seed, check=check)
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="100,200,300,400")
    ap.add_argument("--policies", default=",".join(available_policies()))
    ap.add_argument("--slots", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    sizes = [int(x) for x in args.jobs.split(",")]
    names = args.policies.split(",")
    print("| jobs | policy | CPU s (median) | vs FIFO | checker off s | checker share |")
    print("|---:|---|---:|---:|---:|---:|")
    for n in sizes:
        fifo = statistics.median(time_run(n, "fifo", args.seed, True, args.slots)
                                 for _ in range(args.repeat))
        for name in names:
            on = fifo if name == "fifo" else statistics.median(
                time_run(n, name, args.seed, True, args.slots) for _ in range(args.repeat))
            off = statistics.median(time_run(n, name, args.seed, False, args.slots)
                                    for _ in range(args.repeat))
            print(f"| {n} | {name} | {on:.3f} | {on / fifo:.2f} | {off:.3f} | "
                  f"{(on - off) / on:.0%} |", flush=True)


if __name__ == "__main__":
    main()
