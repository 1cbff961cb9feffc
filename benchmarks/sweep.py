"""Sweep speed-up: the same cells one after another vs. as tasks on an embedded local Ray.

Default: 24 cells = 3 policies (fifo, drf, oasis) x 2 seeds x 2 load factors x 2 cluster
sizes, on ElasticFlow ``augmented/cluster10.csv`` (260 jobs). Both runs write to fresh
folders; the Ray run's wall time includes starting and stopping Ray. The rows of both runs are
checked equal (all but ``wall_s``).

    python benchmarks/sweep.py [--trace FILE] [--jobs N] [--num-cpus 2]
    python benchmarks/sweep.py --philly 80000 --jobs 20000 --policies fifo,srtf,drf,optimus \
        --seeds 0,1 --loads 1 --scales 1 --num-cpus 2      # 8 cells of a Philly-scale trace
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from psched.sweep import SweepSpec, cells_of, run_sweep

DEFAULT_TRACE = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "traces",
                             "elasticflow", "augmented", "cluster10.csv")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=DEFAULT_TRACE)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--policies", default="fifo,drf,oasis")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--loads", default="1,2")
    ap.add_argument("--scales", default="0.5,1")
    ap.add_argument("--num-cpus", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--philly", type=int, metavar="N",
                    help="use the synthetic philly trace of N jobs (seed 0) as --trace")
    args = ap.parse_args()
    if args.philly:
        args.trace = os.path.join(tempfile.gettempdir(), f"psched_philly_{args.philly}_s0.csv")
        if not os.path.exists(args.trace):
            from psched.runner import synth_trace

            synth_trace(scenario="philly", jobs=args.philly, seed=0, slots=1,
                        slot_seconds=3600.0, options={}, out=args.trace)
    spec = SweepSpec(trace=(args.trace,), jobs=args.jobs,
                     policies=tuple(args.policies.split(",")),
                     seeds=tuple(int(s) for s in args.seeds.split(",")),
                     loads=tuple(float(x) for x in args.loads.split(",")),
                     scales=tuple(float(x) for x in args.scales.split(",")))
    n = len(cells_of(spec))
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        t0 = time.perf_counter()
        serial = run_sweep(spec, a, parallel=False)
        t1 = time.perf_counter()
        ray_rows = run_sweep(spec, b, parallel=True, num_cpus=args.num_cpus)
        t2 = time.perf_counter()
    def strip(rows: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if k not in ("wall_s", "ray_node")} for r in rows]

    same = strip(serial) == strip(ray_rows)
    cell_sum = sum(r["wall_s"] for r in ray_rows)
    print(f"| cells | serial s | Ray s ({args.num_cpus} CPUs) | speed-up | sum of cell times "
          "on Ray s | rows equal |")
    print("|---:|---:|---:|---:|---:|---|")
    print(f"| {n} | {t1 - t0:.1f} | {t2 - t1:.1f} | {(t1 - t0) / (t2 - t1):.2f} | "
          f"{cell_sum:.1f} | {same} |")
    by_policy: dict[str, float] = {}
    for r in serial:
        by_policy[r["policy"]] = by_policy.get(r["policy"], 0.0) + r["wall_s"]
    print("serial time by policy: " + ", ".join(f"{k} {v:.1f} s" for k, v in by_policy.items()))


if __name__ == "__main__":
    main()
