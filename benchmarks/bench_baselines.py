"""CPU time of whole FIFO and DRF simulations on the oasis-paper scenario (T = 300).

CPU time (``time.process_time``, median of ``--repeat`` runs) is reported next to wall time
because the development machine is shared: CPU time barely moves with other people's load.
Each run is the whole loop with the independent checker on. The ratio is against FIFO at the
same size, measured in the same run.

    python benchmarks/bench_baselines.py [--jobs 100,200,400,800] [--repeat 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import statistics
import time

from psched.metrics import summarize
from psched.policies import make_policy
from psched.simulator import simulate
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="100,200,400,800")
    ap.add_argument("--policies", default="fifo,drf")
    ap.add_argument("--slots", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print("| jobs | policy | CPU s | wall s | CPU vs first policy | decision events "
          "| decision ms p50 / p99 | utility |")
    print("|---:|---|---:|---:|---:|---:|---|---:|")
    for n in (int(x) for x in args.jobs.split(",")):
        specs, _ = oasis_paper_jobs(n, seed=args.seed, slots=args.slots)
        cluster = oasis_paper_cluster(seed=args.seed)
        base = None
        for name in args.policies.split(","):
            cpu, wall = [], []
            for _ in range(args.repeat):
                c0, w0 = time.process_time(), time.perf_counter()
                result = simulate(specs, cluster, make_policy(name), args.slots, seed=args.seed)
                cpu.append(time.process_time() - c0)
                wall.append(time.perf_counter() - w0)
            s = summarize(result)
            c = statistics.median(cpu)
            base = base or c
            print(f"| {n} | {name} | {c:.2f} | {statistics.median(wall):.2f} | {c / base:.2f} "
                  f"| {s['decision_events']} | {s['decision_ms_p50']:.1f} / "
                  f"{s['decision_ms_p99']:.1f} | {s['total_utility']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
