"""oasis-rp's bounded effort (``effort``, :mod:`psched.policies.oasis_rp.effort`) on every row.

Each variant (``oasis-rp[:opt=value...]``) runs the rows of the policy table -- ``oasis-<n>``
(seeds), ``ef-<trace>`` (seed 0), the ``fig5`` instances -- with the same jobs, clusters and
horizons as ``benchmarks/policy_table.py``. Every run is checked (broken promises re-derived
from the allocation rows: :func:`psched.promises.broken_promises`; the script stops on one).
Per cell: utility, completed, CPU seconds and the effort counters (``effort_trimmed``,
``effort_skipped``, ``effort_searches``: 0 where the rule never acted). Cells are cached in
``--cache`` (a re-run measures only what is missing; ``--force`` re-measures).

    python benchmarks/bench_rp_effort.py --scenarios oasis-100,oasis-200,oasis-300,oasis-400 \\
        --variants oasis-rp,oasis-rp:effort=1
    python benchmarks/bench_rp_effort.py --scenarios ef-cluster10,ef-195job,fig5
    python benchmarks/bench_rp_effort.py --scenarios ef-cluster04 --cap-cpu-s 600
    python benchmarks/bench_rp_effort.py --table-only
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import resource  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from bench_oasis_rp_levers import append as append_row  # noqa: E402
from bench_oasis_rp_levers import (  # noqa: E402
    cell_inputs,
    checked_row,
    instances,
    read_cache,
    run_variant,
)

RESULTS = Path(__file__).parent / "results"
COUNTERS = ("effort_trimmed", "effort_skipped", "effort_searches", "repack_tried",
            "repack_kept", "soft_bumps")
FIELDS = ("scenario", "instance", "variant", "utility", "completed", "cpu_s", "broken",
          *COUNTERS, "measured_at")


def measure_cell(scenario: str, instance: str, variant: str,
                 cap_cpu_s: float | None) -> dict[str, object]:
    """Run one cell (certificate off); raise if a promise was broken."""
    inputs = cell_inputs(scenario, instance)
    if cap_cpu_s is not None:  # a runaway cell stops with SIGXCPU, not a number
        used = int(resource.getrusage(resource.RUSAGE_SELF).ru_utime)
        resource.setrlimit(resource.RLIMIT_CPU, (used + int(cap_cpu_s), resource.RLIM_INFINITY))
    res, cpu = run_variant(variant, *inputs)
    return checked_row(scenario, instance, variant, res, cpu, COUNTERS)


def append(path: Path, row: dict[str, object]) -> None:
    """Add ``row`` to this bench's cache (its own columns: the effort counters)."""
    append_row(path, row, FIELDS)


def render(cache: dict, scenarios: list[str], variants: list[str], seeds: list[int],
           fig5_per_cell: int) -> str:
    """One row per (scenario, seed); fig5 summed over its instances. Each variant cell:
    utility (completed) [CPU s; trimmed / skipped], and the ratio to the first variant."""
    lines = ["| row | " + " | ".join(f"`{v}` utility (completed) CPU s [trimmed/skipped]"
                                       for v in variants) + " | new / old |",
             "|---|" + "---:|" * (len(variants) + 1)]
    for sc in scenarios:
        keys = instances(sc, seeds, fig5_per_cell)
        groups = [(f"fig5 ({len(keys)} instances, sum)", keys)] if sc == "fig5" else [
            (f"{sc} ({k})", [k]) for k in keys]
        for label, ks in groups:
            cells, utils = [], []
            for v in variants:
                got = [cache.get((sc, k, v)) for k in ks]
                if any(g is None for g in got):
                    cells.append("")
                    utils.append(np.nan)
                    continue
                u = sum(float(g["utility"]) for g in got)  # type: ignore[index]
                c = sum(int(g["completed"]) for g in got)  # type: ignore[index]
                cpu = sum(float(g["cpu_s"]) for g in got)  # type: ignore[index]
                tr = sum(int(float(g["effort_trimmed"] or 0)) for g in got)  # type: ignore[index]
                sk = sum(int(float(g["effort_skipped"] or 0)) for g in got)  # type: ignore[index]
                cells.append(f"{u:,.1f} ({c}) {cpu:.1f} [{tr}/{sk}]")
                utils.append(u)
            ratio = " / ".join(f"{x / utils[0]:.4f}" for x in utils[1:]) if utils else ""
            lines.append(f"| {label} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default="oasis-100,oasis-200,oasis-300,oasis-400,"
                    "ef-cluster10,ef-195job,fig5")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--variants", default="oasis-rp,oasis-rp:effort=1")
    ap.add_argument("--fig5-instances", type=int, default=7)
    ap.add_argument("--cache", type=Path, default=RESULTS / "rp_effort_cells.csv")
    ap.add_argument("--cap-cpu-s", type=float, default=None,
                    help="stop the whole script (SIGXCPU) if one cell uses this much CPU")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--table-only", action="store_true")
    args = ap.parse_args()
    scenarios = args.scenarios.split(",")
    variants = args.variants.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    cache = read_cache(args.cache)
    if not args.table_only:
        print(f"load {os.getloadavg()[0]:.2f}", flush=True)
        for sc in scenarios:
            for k in instances(sc, seeds, args.fig5_instances):
                for v in variants:
                    if (sc, k, v) in cache and not args.force:
                        continue
                    row = measure_cell(sc, k, v, args.cap_cpu_s)
                    append(args.cache, row)
                    cache[(sc, k, v)] = {key: str(val) for key, val in row.items()}
                    print(sc, k, v, row["utility"], row["cpu_s"], flush=True)
        print(f"load {os.getloadavg()[0]:.2f}", flush=True)
    print(render(cache, scenarios, variants, seeds, args.fig5_instances))


if __name__ == "__main__":
    main()
