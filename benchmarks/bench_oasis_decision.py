"""OASiS decision time per arrival: the fast exact search against the literal DP, same run.

Scenario ``oasis-paper`` (50 + 50 servers, T = 300, 400 jobs by default), one core. Jobs are
decided in arrival order on one policy; every arrival is timed end to end (pricing the window,
slot costs, search, placement, commit). On every ``--literal-every``-th arrival the literal
DP (paper Alg. 2 over worker units) is timed first on the same prices, and its payoff must
equal the fast one (the run stops otherwise). Ratios are literal / fast on that subsample.
Times are CPU time of the process (``time.process_time``), so that other load on a shared
machine does not inflate them; wall-clock times of the fast search are printed too.

    python benchmarks/bench_oasis_decision.py [--jobs 400] [--slots 300] [--seed 0]
        [--literal-every 10] [--sizes 100,200,300,400] [--old-cap]

``--old-cap`` also times the same jobs with every window capped at the old
``max(10 x fastest, 50)`` slots (before ``oasis.md`` section 7 was revised), in the same run.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from psched.core.model import (  # noqa: E402
    WINDOW_FASTEST_FACTOR,
    WINDOW_MIN_SLOTS,
    JobSpec,
    ceil_eps,
    resolve_job,
)
from psched.core.policy import RunContext, View  # noqa: E402
from psched.core.records import cannot_fit  # noqa: E402
from psched.oasis.literal import solve_literal  # noqa: E402
from psched.policies import make_policy  # noqa: E402
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs  # noqa: E402


def old_cap(spec: JobSpec, slot_seconds: float) -> int:
    """The window cap before ``oasis.md`` section 7 was revised: ``max(10 x fastest, 50)``."""
    fastest = ceil_eps(spec.work(slot_seconds) / spec.max_workers)
    return max(WINDOW_FASTEST_FACTOR * fastest, WINDOW_MIN_SLOTS)


def run(n_jobs: int, slots: int, seed: int, literal_every: int,
        capped: bool = False) -> dict[str, object]:
    """Decide every arrival; return timings (ms) and the literal subsample.

    A window ends at the utility floor or the horizon (``oasis.md`` section 7); ``capped``
    also caps it at the old ``max(10 x fastest, 50)`` (a baseline of the same jobs).
    """
    specs, _ = oasis_paper_jobs(n_jobs, seed=seed, slots=slots)
    cluster = oasis_paper_cluster(seed=seed)
    sl = cluster.slot_seconds
    jobs = [resolve_job(s, sl, slots, old_cap(s, sl) if capped else None) for s in specs]
    pol = make_policy("oasis")
    pol.start(RunContext(cluster=cluster, horizon=slots, known_jobs=jobs))
    fast_ms: list[float] = []
    wall_ms: list[float] = []
    pairs: list[tuple[float, float]] = []
    admitted = 0
    for k, job in enumerate(jobs):
        if cannot_fit(job, cluster) or job.window == 0:
            continue
        view = View(t=job.arrival, cluster=cluster, horizon=slots, active={})
        lit_ms = None
        if literal_every and k % literal_every == 0:
            t0 = time.process_time()
            ref = solve_literal(pol.ledger.inputs(job), 0.0)
            lit_ms = (time.process_time() - t0) * 1e3
        t0, c0 = time.perf_counter(), time.process_time()
        dec = pol.on_arrival(job, view)
        ms = (time.process_time() - c0) * 1e3
        wall_ms.append((time.perf_counter() - t0) * 1e3)
        fast_ms.append(ms)
        admitted += dec.admitted
        if lit_ms is not None:
            got = pol._decided[-1][1]
            if not math.isclose(got, ref.payoff, rel_tol=1e-9, abs_tol=1e-12):
                raise SystemExit(f"{job.job_id}: fast payoff {got!r} != literal {ref.payoff!r}")
            pairs.append((lit_ms, ms))
    return {"fast_ms": np.array(fast_ms), "wall_ms": np.array(wall_ms), "pairs": pairs,
            "admitted": admitted, "decided": len(fast_ms),
            "windows": np.array([j.window for j in jobs])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--slots", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--literal-every", type=int, default=10)
    ap.add_argument("--sizes", default="", help="also time the fast search at these job counts")
    ap.add_argument("--old-cap", action="store_true",
                    help="also time a run with the old window cap max(10 x fastest, 50), "
                         "same jobs, as a baseline")
    args = ap.parse_args()
    res = run(args.jobs, args.slots, args.seed, args.literal_every)
    ms = res["fast_ms"]
    pairs = np.array(res["pairs"])
    print(f"oasis-paper, {args.jobs} jobs, T = {args.slots}, seed {args.seed}: "
          f"{res['decided']} arrivals decided, {res['admitted']} admitted")
    print("| method | arrivals | p50 ms | p99 ms | max ms | mean ms |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| fast (all arrivals) | {ms.size} | {np.percentile(ms, 50):.2f} | "
          f"{np.percentile(ms, 99):.2f} | {ms.max():.2f} | {ms.mean():.2f} |")
    wall = res["wall_ms"]
    print(f"| fast, wall clock | {wall.size} | {np.percentile(wall, 50):.2f} | "
          f"{np.percentile(wall, 99):.2f} | {wall.max():.2f} | {wall.mean():.2f} |")
    if pairs.size:
        lit, fast = pairs[:, 0], pairs[:, 1]
        ratio = lit / fast
        print(f"| literal DP (subsample) | {lit.size} | {np.percentile(lit, 50):.1f} | "
              f"{np.percentile(lit, 99):.1f} | {lit.max():.1f} | {lit.mean():.1f} |")
        print(f"| fast on that subsample | {fast.size} | {np.percentile(fast, 50):.2f} | "
              f"{np.percentile(fast, 99):.2f} | {fast.max():.2f} | {fast.mean():.2f} |")
        print(f"\nliteral / fast on the same arrivals: median {np.median(ratio):.0f}x, "
              f"min {ratio.min():.0f}x, total time {lit.sum() / fast.sum():.0f}x; "
              "payoffs identical on every one")
    win = res["windows"]
    print(f"\nwindows: median {np.median(win):.0f} slots, max {win.max()}")
    if args.old_cap:
        old = run(args.jobs, args.slots, args.seed, 0, capped=True)
        m = old["fast_ms"]
        print(f"old cap max(10 x fastest, 50), same jobs: {old['admitted']} admitted; p50 "
              f"{np.percentile(m, 50):.2f} ms, p99 {np.percentile(m, 99):.2f} ms, max "
              f"{m.max():.2f} ms; new rule / old cap p50 "
              f"{np.percentile(ms, 50) / np.percentile(m, 50):.2f}x, p99 "
              f"{np.percentile(ms, 99) / np.percentile(m, 99):.2f}x")
    if args.sizes:
        print("\n| jobs | p50 ms | p99 ms | max ms |")
        print("|---:|---:|---:|---:|")
        for n in (int(x) for x in args.sizes.split(",")):
            m = run(n, args.slots, args.seed, 0)["fast_ms"]
            print(f"| {n} | {np.percentile(m, 50):.2f} | {np.percentile(m, 99):.2f} | "
                  f"{m.max():.2f} |")


if __name__ == "__main__":
    main()
