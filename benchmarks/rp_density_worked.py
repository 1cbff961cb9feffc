"""Worked Fig. 5 instances for oasis-rp's density floor: job by job, before / now / OPT.

For each instance key ``n:lo:hi:seed`` (as in ``results/policy_table_cells.csv``) prints the
clearing density ``rho*``, each job's size and density, what ``oasis-rp`` did without the
floor (``density_floor=0``) and with ``--theta`` (default 0.5), and what the exact offline
optimum does (``psched.offline.offline_optimum``, HiGHS; about 1 s per instance):

    python benchmarks/rp_density_worked.py 9:50:100:2642459430 12:75:100:4239476729
"""

from __future__ import annotations

import argparse

from psched.model import resolve_job
from psched.offline import offline_optimum
from psched.policies import make_policy
from psched.policies.oasis_rp.admission import clearing_density, job_size
from psched.simulator import simulate
from psched.traces.synth import fig5_instance

__all__ = ["main"]

T = 10


def show(key: str, theta: float) -> None:
    """Print one instance, job by job."""
    n, lo, hi, seed = key.split(":")
    specs, cluster = fig5_instance(int(n), seed=int(seed), priority=(float(lo), float(hi)))
    jobs = [resolve_job(s, cluster.slot_seconds, T) for s in specs]
    rho = clearing_density(jobs, cluster, T)
    old = simulate(specs, cluster, make_policy("oasis-rp", density_floor=0.0), T)
    new = simulate(specs, cluster, make_policy("oasis-rp", density_floor=theta), T)
    opt = offline_optimum(specs, cluster, T)
    uo = sum(r.utility for r in old.records.values())
    un = sum(r.utility for r in new.records.values())
    print(f"== {key}: rho* {rho:.2f}, floor {theta * rho:.2f} per size; OPT "
          f"{opt.objective:.1f} ({opt.status}); before {uo:.1f} (OPT/policy "
          f"{opt.objective / uo:.3f}); now {un:.1f} ({opt.objective / un:.3f})")
    for j in jobs:
        jid, size = j.job_id, job_size(j, cluster)
        ro, rn = old.records[jid], new.records[jid]
        print(f"  {jid} a={j.arrival} W={j.work} N={j.max_workers} "
              f"gpu={j.spec.worker_demand.gpu:.0f} f(F)={j.utility_at(j.fastest):5.1f} "
              f"size={size:.2f} density={j.utility_at(j.fastest) / size:6.1f} | before "
              f"{'admitted' if ro.admitted else ro.reason} done={ro.completion} "
              f"u={ro.utility:5.1f} | now {'admitted' if rn.admitted else rn.reason} "
              f"done={rn.completion} u={rn.utility:5.1f} | OPT done={opt.completion.get(jid)} "
              f"u={opt.utility.get(jid, 0.0):5.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("keys", nargs="+", help="instance keys n:lo:hi:seed")
    ap.add_argument("--theta", type=float, default=0.5, help="density_floor (default 0.5)")
    args = ap.parse_args()
    for key in args.keys:
        show(key, args.theta)


if __name__ == "__main__":
    main()
