"""oasis-rp's options side by side on the policy table's cells, against the best rival.

Each variant (``oasis-rp[:opt=value...]``, options to ``make_policy``) runs the cells of
``benchmarks/policy_table.py`` -- ``oasis-<n>`` (seeds), ``ef-<trace>`` (seed 0) and the
``fig5`` instances -- with the same jobs, clusters and horizons. Rival cells and the fig5
optimum (OPT, proven optimal) are read from the policy table's cache
(``benchmarks/results/policy_table_cells.csv``); nothing of theirs is re-run. Variant cells
are cached in ``benchmarks/results/oasis_rp_levers.csv`` (a re-run measures only what is
missing; ``--force`` re-measures). Every run is checked: broken promises (completions
re-derived from the allocation rows) must be 0, else the script stops.

    python benchmarks/bench_oasis_rp_levers.py --scenarios fig5 \\
        --variants oasis-rp,oasis-rp:price_source=hindsight,oasis-rp:commit_margin=1
    python benchmarks/bench_oasis_rp_levers.py --scenarios oasis-100,oasis-200 --seeds 0,1,2,3,4
    python benchmarks/bench_oasis_rp_levers.py --table-only

Prints one markdown row per (scenario, seed) with each variant's utility (completed) and the
gap to the best rival; for fig5, OPT/variant median / p90 / max.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from bench_oasis_rp import parse_variant  # noqa: E402
from policy_table import OPT, fig5_key, fig5_keys, read_cells  # noqa: E402
from rivals_tables import load  # noqa: E402

from psched.core.promises import broken_promises  # noqa: E402
from psched.core.records import RunResult  # noqa: E402
from psched.core.simulator import simulate  # noqa: E402
from psched.policies import make_policy  # noqa: E402
from psched.traces.synth import fig5_instance  # noqa: E402

RESULTS = Path(__file__).parent / "results"
FIELDS = ("scenario", "instance", "variant", "utility", "completed", "cpu_s", "broken",
          "queue_admitted", "measured_at")
#: rivals of the table (every registered policy but the OASiS family)
RIVALS = ("dorm", "drf", "elastic-mip", "fifo", "greedy-fill", "greedy-gain", "optimus",
          "rrh", "srtf")


def run_variant(variant: str, specs: list, cluster: object,
                horizon: int) -> tuple[RunResult, float]:
    """One simulation of ``variant`` (certificate off); the result and its CPU seconds."""
    name, kw = parse_variant(variant)
    kw.setdefault("certificate", False)
    c0 = time.process_time()
    res = simulate(specs, cluster, make_policy(name, **kw), horizon)  # type: ignore[arg-type]
    return res, time.process_time() - c0


def cell_inputs(scenario: str, instance: str) -> tuple[list, object, int]:
    """The jobs, cluster and horizon of one cell (a ``fig5`` key or a scenario's seed)."""
    if scenario == "fig5":
        n, lo, hi, seed = instance.split(":")
        specs, cluster = fig5_instance(int(n), seed=int(seed), priority=(float(lo), float(hi)))
        return specs, cluster, 10
    specs, cluster, horizon, _ = load(scenario, int(instance))
    return specs, cluster, horizon


def checked_row(scenario: str, instance: str, variant: str, res: RunResult, cpu: float,
                counters: tuple[str, ...]) -> dict[str, object]:
    """A cell's cache row (utility, completed, CPU s, the report's ``counters``); raise if a
    promise was broken (re-derived from the allocation rows)."""
    broken = broken_promises(res)
    if broken:
        raise SystemExit(f"{scenario} {instance} {variant}: broken promise: {broken[0]}")
    recs = res.records.values()
    return {"scenario": scenario, "instance": instance, "variant": variant,
            "utility": float(sum(r.utility for r in recs)),
            "completed": sum(r.completion is not None for r in recs), "cpu_s": f"{cpu:.2f}",
            "broken": 0, **{c: res.report.get(c, 0) for c in counters},
            "measured_at": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())}


def measure_cell(scenario: str, instance: str, variant: str) -> dict[str, object]:
    """Run one cell; raise if a promise was broken."""
    res, cpu = run_variant(variant, *cell_inputs(scenario, instance))
    return checked_row(scenario, instance, variant, res, cpu, ("queue_admitted",))


def read_cache(path: Path) -> dict[tuple[str, str, str], dict[str, str]]:
    if not path.exists():
        return {}
    with open(path, newline="") as fh:
        return {(r["scenario"], r["instance"], r["variant"]): r for r in csv.DictReader(fh)}


def append(path: Path, row: dict[str, object],
           fields: tuple[str, ...] = FIELDS) -> None:
    """Add ``row`` to the cache at ``path`` (a header first when it is new or empty)."""
    new = not path.exists() or path.stat().st_size == 0
    with open(path, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        if new:
            w.writeheader()
        w.writerow(row)


def instances(scenario: str, seeds: list[int], fig5_per_cell: int,
              map_seeds: tuple[int, ...] = (0,)) -> list[str]:
    """The cells of a scenario: fig5 keys, ElasticFlow mapping seeds or oasis-paper seeds."""
    if scenario == "fig5":
        return [fig5_key(n, p, s) for n, p, s in fig5_keys(fig5_per_cell)]
    return ([str(s) for s in map_seeds] if scenario.startswith("ef-")
            else [str(s) for s in seeds])


def best_rival(table: dict, scenario: str, instance: str) -> tuple[str, float]:
    got = [(p, table[(scenario, instance, p)].utility) for p in RIVALS
           if (scenario, instance, p) in table and table[(scenario, instance, p)].status == "ok"]
    return max(got, key=lambda x: x[1]) if got else ("?", math.nan)


def render(cache: dict, table: dict, scenarios: list[str], variants: list[str],
           seeds: list[int], fig5_per_cell: int, map_seeds: tuple[int, ...] = (0,)) -> str:
    head = "| scenario (seed) | best rival | " + " | ".join(f"`{v}`" for v in variants) + " |"
    lines = [head, "|---|---|" + "---:|" * len(variants)]
    for sc in scenarios:
        keys = instances(sc, seeds, fig5_per_cell, map_seeds)
        if sc == "fig5":
            cells = []
            for v in variants:
                r = []
                for k in keys:
                    opt, got = table.get(("fig5", k, OPT)), cache.get(("fig5", k, v))
                    if opt is None or got is None or opt.status != "optimal":
                        continue
                    u = float(got["utility"])
                    r.append(opt.utility / u if u > 0 else math.inf)
                a = np.array(r) if r else np.array([math.nan])
                cells.append(f"{np.median(a):.3f} / {np.percentile(a, 90):.2f} / "
                             f"{a.max():.2f} [{len(r)}]")
            lines.append("| fig5 OPT/policy median / p90 / max | rrh 1.25 / 1.45 / 1.99 | "
                         + " | ".join(cells) + " |")
            continue
        for k in keys:
            who, val = best_rival(table, sc, k)
            cells = []
            for v in variants:
                got = cache.get((sc, k, v))
                if got is None:
                    cells.append("")
                    continue
                u = float(got["utility"])
                cells.append(f"{u:,.0f} ({got['completed']}) {100 * (u / val - 1):+.1f}%")
            lines.append(f"| {sc} ({k}) | {who} {val:,.0f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default="fig5")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--map-seeds", default="0",
                    help="ElasticFlow mapping seeds (rivals from --table, e.g. the cache of "
                    "policy_table.py --map-seeds)")
    ap.add_argument("--variants", default="oasis-rp")
    ap.add_argument("--fig5-instances", type=int, default=7)
    ap.add_argument("--cache", type=Path, default=RESULTS / "oasis_rp_levers.csv")
    ap.add_argument("--table", type=Path, default=RESULTS / "policy_table_cells.csv")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--table-only", action="store_true")
    args = ap.parse_args()
    scenarios = args.scenarios.split(",")
    variants = args.variants.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    map_seeds = tuple(int(s) for s in args.map_seeds.split(","))
    table = read_cells(args.table)
    cache = read_cache(args.cache)
    print(f"load {os.getloadavg()[0]:.2f}", flush=True)
    if not args.table_only:
        for sc in scenarios:
            for k in instances(sc, seeds, args.fig5_instances, map_seeds):
                for v in variants:
                    if (sc, k, v) in cache and not args.force:
                        continue
                    row = measure_cell(sc, k, v)
                    append(args.cache, row)
                    cache[(sc, k, v)] = {kk: str(vv) for kk, vv in row.items()}
                    if sc != "fig5":
                        print(f"{sc} {k} {v}: {row['utility']:.1f} ({row['completed']}) "
                              f"cpu {row['cpu_s']} s", flush=True)
    print(render(cache, table, scenarios, variants, seeds, args.fig5_instances, map_seeds))
    print(f"load {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
