"""Whole OASiS runs with the fast search against the literal DP, on Fig. 5 instances.

For each instance (``fig5_instance``, n in 3, 6, 9, 12 servers, ``--per-cell`` instances per
n, seeds from :func:`psched.runs.ratio.instance_seed`, priority [1, 100]) ``oasis`` runs twice,
``method="fast"`` and ``method="literal"``; the runs are the same when every decision
(admission, completion slot) and every executed allocation match. Prints how many differ and
the utility ratio fast / literal where they do. (Before the tie rule of
``psched.oasis.schedule``: 32 of 80 differed, 0.78x-1.34x.)

    python benchmarks/oasis_tie_runs.py [--per-cell 20]
"""

from __future__ import annotations

import argparse

from psched.core.records import RunResult
from psched.core.simulator import simulate
from psched.policies import make_policy
from psched.runs.ratio import instance_seed
from psched.traces.synth import fig5_instance


def run(n: int, seed: int, method: str) -> RunResult:
    specs, cluster = fig5_instance(n, seed=seed)
    return simulate(specs, cluster, make_policy("oasis", method=method, certificate=False), 10)


def same(a: RunResult, b: RunResult) -> bool:
    """Every decision and every executed allocation alike."""
    da = [(j, r.admitted, r.completion) for j, r in a.records.items()]
    db = [(j, r.admitted, r.completion) for j, r in b.records.items()]
    return da == db and sorted(a.allocations) == sorted(b.allocations)


def total(res: RunResult) -> float:
    return float(sum(r.utility for r in res.records.values()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-cell", type=int, default=20)
    args = ap.parse_args()
    differ, ratios, count = 0, [], 0
    for n in (3, 6, 9, 12):
        for i in range(args.per_cell):
            seed = instance_seed(0, n, (1.0, 100.0), i)
            fast, lit = run(n, seed, "fast"), run(n, seed, "literal")
            count += 1
            if not same(fast, lit):
                differ += 1
                ratios.append(total(fast) / total(lit) if total(lit) > 0 else float("inf"))
    span = f", fast / literal utility {min(ratios):.2f}x-{max(ratios):.2f}x" if ratios else ""
    print(f"{differ} of {count} whole runs differ between the fast search and the literal "
          f"DP{span}")


if __name__ == "__main__":
    main()
