"""Where an ``oasis-rp`` variant loses to a rival on an ElasticFlow trace, job by job.

Runs the two policies on the same cell as ``policy_table.py`` (``ef-<trace>``, mapping seed
``--map-seed``, default 0; with
``--jobs N`` only the first N jobs of the trace, same cluster and horizon: a window that
iterates fast) and prints: utility and jobs completed in time by each; the jobs one completes
in time and the other does not, by the reason ``oasis-rp`` gave, by workers ``N``, by
density (:func:`psched.policies.oasis_rp.admission.density`, utility per unit of cluster share over
the job's work) and by deadline (slots from arrival); and the mean worker and PS containers
in use per stretch of slots.

    python benchmarks/rp_gap.py --jobs 3000
    python benchmarks/rp_gap.py --variant oasis-rp:defer=1 --rival srtf
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import collections  # noqa: E402
import itertools  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from bench_oasis_rp import parse_variant  # noqa: E402
from rivals_tables import load  # noqa: E402

from psched.model import Pool, resolve_job  # noqa: E402
from psched.policies import make_policy  # noqa: E402
from psched.policies.oasis_rp.admission import density  # noqa: E402
from psched.promises import broken_promises  # noqa: E402
from psched.simulator import RunResult, simulate  # noqa: E402

DENSITY_EDGES = (0, 10, 100, 300, 1000, 3000, 10000, np.inf)


def run(variant: str, specs: list, cluster: object, horizon: int,
        seed: int = 0) -> tuple[RunResult, float]:
    """One run of ``variant`` (``name[:opt=value...]``) with the simulator's ``seed`` (the
    policy table's rule: the cell's seed; FIFO and RRH draw from it); the result and its CPU
    seconds."""
    name, kw = parse_variant(variant)
    if name.startswith("oasis"):
        kw.setdefault("certificate", False)
    c0 = time.process_time()
    res = simulate(specs, cluster, make_policy(name, **kw), horizon,  # type: ignore[arg-type]
                   seed=seed)
    return res, time.process_time() - c0


def usage_per_slot(res: RunResult) -> tuple[np.ndarray, np.ndarray]:
    """Worker and PS containers in use in each slot."""
    w, p = np.zeros(res.horizon), np.zeros(res.horizon)
    for t, _, _, role, c in res.allocations:
        (w if role == "worker" else p)[t] += c
    return w, p


def breakdown(title: str, ids: list[str], value: dict[str, float], keys: dict[str, object]) -> None:
    """Count and utility of ``ids`` grouped by ``keys``."""
    print(f"  {title}:")
    got: dict[object, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for j in ids:
        got[keys[j]][0] += 1
        got[keys[j]][1] += value[j]
    for k in sorted(got, key=str):
        print(f"    {k}: {got[k][0]} jobs, utility {got[k][1]:,.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="ef-cluster04")
    ap.add_argument("--map-seed", type=int, default=0, help="the trace's mapping seed")
    ap.add_argument("--jobs", type=int, default=0, help="first N jobs only (0: all)")
    ap.add_argument("--variant", default="oasis-rp")
    ap.add_argument("--rival", default="srtf")
    ap.add_argument("--stretch", type=int, default=250, help="slots per usage row")
    args = ap.parse_args()
    specs, cluster, horizon, desc = load(args.trace, args.map_seed)
    if args.jobs:
        specs = specs[: args.jobs]
    print(f"{desc}; {len(specs)} jobs; load {os.getloadavg()[0]:.2f}", flush=True)
    a, cpu_a = run(args.variant, specs, cluster, horizon, args.map_seed)
    assert broken_promises(a) == [], "broken promise"
    b, cpu_b = run(args.rival, specs, cluster, horizon, args.map_seed)
    ra, rb = a.records, b.records
    for name, res, cpu in ((args.variant, a, cpu_a), (args.rival, b, cpu_b)):
        recs = res.records.values()
        print(f"{name}: utility {sum(r.utility for r in recs):,.1f}, in time "
              f"{sum(r.utility > 0 for r in recs)}, completed "
              f"{sum(r.completion is not None for r in recs)}, CPU {cpu:.1f} s")
    jobs = {s.job_id: resolve_job(s, 3600.0, horizon) for s in specs}
    dens = {j: density(job, cluster) for j, job in jobs.items()}
    band = {j: next(f"[{lo:>5g}, {hi:g})" for lo, hi in itertools.pairwise(DENSITY_EDGES)
                    if lo <= d < hi) for j, d in dens.items()}
    lost = [j for j in ra if ra[j].utility == 0 < rb[j].utility]
    won = [j for j in ra if rb[j].utility == 0 < ra[j].utility]
    for title, ids, res in ((f"in time by {args.rival} only", lost, b),
                            (f"in time by {args.variant} only", won, a)):
        value = {j: res.records[j].utility for j in ids}
        print(f"{title}: {len(ids)} jobs, utility {sum(value.values()):,.1f}")
        breakdown(f"{args.variant}'s reason", ids, value,
                  {j: ra[j].reason or "admitted" for j in ids})
        breakdown("workers N", ids, value, {j: f"{jobs[j].max_workers:3d}" for j in ids})
        breakdown("density", ids, value, band)
        breakdown("deadline (slots from arrival)", ids, value,
                  {j: f"{jobs[j].window:2d}" if jobs[j].window < 10 else ">= 10" for j in ids})
    n_w = int(sum(s.capacity.gpu for s in cluster.servers if s.pool is Pool.WORKER))
    print(f"mean containers in use per {args.stretch} slots (workers of {n_w} GPUs, PS):")
    (wa, pa), (wb, pb) = usage_per_slot(a), usage_per_slot(b)
    for lo in range(0, horizon, args.stretch):
        hi = min(horizon, lo + args.stretch)
        print(f"  slots {lo}-{hi - 1}: {args.variant} {wa[lo:hi].mean():.0f} / "
              f"{pa[lo:hi].mean():.0f}, {args.rival} {wb[lo:hi].mean():.0f} / "
              f"{pb[lo:hi].mean():.0f}")
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
