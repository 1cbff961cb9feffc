"""Dorm's window (``max_jobs``): utility, completed jobs, solver settling and time per window size.

One MILP of Dorm sees at most ``max_jobs`` jobs (:mod:`psched.policies.dorm_reach`): every
running job, then the earliest queued ones; the rest get a FIFO fill. This script runs Dorm
with each window size on

* ``oasis-300`` / ``oasis-400``: the ``oasis-paper`` scenario (T = 300), seeds 0..4, loaded
  exactly as ``benchmarks/policy_table.py`` (``rivals_tables.load``);
* ``philly-<N>``: the first N jobs of issue 18's synthetic Philly-scale trace (``psched trace
  synth --scenario philly --jobs 80000 --seed 0``, cached in the temp folder as
  ``benchmarks/bench_traces.py --philly 80000`` does), 1-h slots, default cluster, horizon rule.

Each cell (scenario, seed, window) runs in a forked child under a wall cap (``--cap-s``; a
capped cell is recorded as ``cap``, never as a number) and is appended to ``--cache`` (CSV: the
commit, UTC time and load average before/after), so a re-run measures only what is missing
(``--force`` re-measures). Dorm's solver stops at a *wall-clock* time limit per solve (0.25 s),
so its decisions depend on the machine's load: every cell records the load average and how
many solves did not settle (``not_optimal``).

    nice -n 5 python benchmarks/bench_dorm_window.py --windows 32,64,128,256 \
        --scenarios oasis-300,oasis-400,philly-10000
    python benchmarks/bench_dorm_window.py --table-only

``--policy elastic-mip:mip_rel_gap=1e-4`` runs another policy (with options) the same way.

Writes ``benchmarks/results/dorm_window_cells.csv`` and prints a markdown table: per scenario
and window, mean utility (± sd over seeds), completed jobs, solves not settled / solves, split
decisions, sim CPU s and wall s (sums over seeds).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from policy_table import run_capped  # noqa: E402

from psched.core.errors import InputError  # noqa: E402
from psched.policies.options import policy_variant  # noqa: E402

RESULTS = Path(__file__).parent / "results"
FIELDS = ("scenario", "seed", "policy", "opts", "max_jobs", "status", "utility", "completed",
          "jobs", "sim_cpu_s", "wall_s", "solves", "not_optimal", "reused", "decisions", "split",
          "jobs_beyond", "loadavg_before", "loadavg_after", "utc", "commit")


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True, cwd=Path(__file__).parent)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def load_scenario(scenario: str, seed: int) -> tuple[list[Any], Any, int]:
    """Jobs, cluster and horizon of one cell's scenario and seed."""
    if scenario.startswith("oasis-"):
        from rivals_tables import load

        specs, cluster, horizon, _ = load(scenario, seed)
        return specs, cluster, horizon
    if not scenario.startswith("philly-"):
        raise SystemExit(f"bench_dorm_window: --scenarios: unknown {scenario!r} "
                         "(oasis-<n> or philly-<N>)")
    from bench_traces import _philly_trace

    from psched.core.horizon import trace_horizon
    from psched.traces import load_any
    from psched.traces.clusters import default_cluster_for_trace

    n = int(scenario.split("-", 1)[1])
    specs = load_any(_philly_trace(80000), slot_seconds=3600.0)[:n]
    cluster = default_cluster_for_trace(specs, slot_seconds=3600.0, load=0.8)
    return specs, cluster, trace_horizon(specs, 3600.0)


def _report(rep: dict[str, Any], key: str) -> Any:
    """The policy report's figure ending in ``_<key>`` (``dorm_solves``, ``mip_solves``, ...)."""
    return next((v for k, v in rep.items() if k.endswith(f"_{key}")), "")


def _child(specs: Any, cluster: Any, horizon: int, seed: int, policy: tuple[str, dict],
           max_jobs: int, queue: Any) -> None:
    """One run; puts its figures on ``queue``."""
    from psched.core.simulator import simulate
    from psched.policies import make_policy

    pol = make_policy(policy[0], max_jobs=max_jobs, **policy[1])
    c0, t0 = time.process_time(), time.perf_counter()
    res = simulate(specs, cluster, pol, horizon, seed=seed)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    rep = pol.report()
    queue.put({"utility": float(sum(r.utility for r in res.records.values())),
               "completed": sum(r.completion is not None for r in res.records.values()),
               "sim_cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
               **{k: _report(rep, k) for k in ("solves", "not_optimal", "reused")},
               **{k: _report(rep, f"reach_{k}") for k in ("decisions", "split",
                                                          "jobs_beyond")}})


def run_cell(scenario: str, seed: int, policy: tuple[str, dict], max_jobs: int, cap_s: float,
             loaded: tuple[list[Any], Any, int]) -> dict[str, Any]:
    """One cell in a forked child under the wall cap; its cache row."""
    specs, cluster, horizon = loaded
    row: dict[str, Any] = {"scenario": scenario, "seed": seed, "policy": policy[0],
                           "opts": _opts_text(policy[1]), "max_jobs": max_jobs,
                           "jobs": len(specs), "loadavg_before": f"{os.getloadavg()[0]:.1f}",
                           "utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ")}
    got, wall = run_capped(_child, (specs, cluster, horizon, seed, policy, max_jobs), cap_s)
    row["loadavg_after"] = f"{os.getloadavg()[0]:.1f}"
    if got is None:
        row.update(status="cap" if wall >= cap_s else "error", wall_s=round(wall, 2))
    else:
        row.update(status="ok", **got)
    return row


Key = tuple[str, int, str, int]  #: scenario, seed, variant (policy + options), max_jobs


def _opts_text(opts: dict[str, Any]) -> str:
    return ";".join(f"{k}={v}" for k, v in sorted(opts.items()))


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """``dorm`` or ``elastic-mip:mip_rel_gap=1e-4;time_limit_s=1`` -> (policy, options), typed
    and checked by the policy's signature (:func:`psched.policies.options.policy_variant`)."""
    try:
        return policy_variant(text)
    except InputError as err:
        raise SystemExit(f"bench_dorm_window: {err}") from None


def _variant(policy: str, opts: str) -> str:
    return f"{policy}:{opts}" if opts else policy


def read_cache(path: Path) -> dict[Key, dict[str, str]]:
    """The last row of every (scenario, seed, variant, max_jobs)."""
    out: dict[Key, dict[str, str]] = {}
    if path.exists():
        with open(path, newline="") as fh:
            for d in csv.DictReader(fh):
                out[d["scenario"], int(d["seed"]), _variant(d["policy"], d["opts"]),
                    int(d["max_jobs"])] = d
    return out


def append(path: Path, row: dict[str, Any]) -> None:
    """One row appended to the cache (header first if the file is new)."""
    new = not path.exists() or path.stat().st_size == 0
    with open(path, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS, restval="")
        if new:
            w.writeheader()
        w.writerow(row)


def _seeds(scenario: str, n: int) -> list[int]:
    return [0] if scenario.startswith("philly-") else list(range(n))


def _num(r: dict[str, str], key: str) -> float:
    return float(r[key]) if r.get(key) not in (None, "") else 0.0


def render(cache: dict[Key, dict[str, str]], scenarios: list[str], variant: str,
           windows: list[int], seeds: int) -> str:
    """The markdown table (module docstring)."""
    lines = [f"{variant}:", "",
             "| scenario | max_jobs | utility mean ± sd | completed (mean) | solves not settled "
             "/ solves | split decisions / decisions | sim CPU s (sum) | wall s (sum) | "
             "load avg | seeds |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for sc in scenarios:
        for w in windows:
            rows = [cache.get((sc, s, variant, w)) for s in _seeds(sc, seeds)]
            have = [r for r in rows if r is not None]
            if not have:
                continue
            bad = [r for r in have if r["status"] != "ok"]
            if bad:
                lines.append(f"| {sc} | {w} | {bad[0]['status']} after "
                             f"{float(bad[0]['wall_s']):.0f} s | | | | | | | {len(have)} |")
                continue
            u = np.array([float(r["utility"]) for r in have])
            f = {k: sum(_num(r, k) for r in have) for k in
                 ("completed", "solves", "not_optimal", "split", "decisions", "sim_cpu_s",
                  "wall_s")}
            loads = [float(r[k]) for r in have for k in ("loadavg_before", "loadavg_after")]
            sd = f" ± {u.std():,.0f}" if len(have) > 1 else ""
            lines.append(
                f"| {sc} | {w} | {u.mean():,.0f}{sd} | {f['completed'] / len(have):,.0f} | "
                f"{f['not_optimal']:.0f} / {f['solves']:.0f} | {f['split']:.0f} / "
                f"{f['decisions']:.0f} | {f['sim_cpu_s']:.1f} | {f['wall_s']:.1f} | "
                f"{min(loads):.1f}–{max(loads):.1f} | {len(have)} |")
    return "\n".join(lines)


def measure(args: argparse.Namespace, scenarios: list[str], policy: tuple[str, dict],
            windows: list[int], cache: dict[Key, dict[str, str]]) -> None:
    """Every selected cell missing from the cache (all with ``--force``), appended as run."""
    variant = _variant(policy[0], _opts_text(policy[1]))
    commit = _commit()
    for sc in scenarios:
        for seed in _seeds(sc, args.seeds):
            todo = [w for w in windows if args.force or (sc, seed, variant, w) not in cache]
            if not todo:
                continue
            loaded = load_scenario(sc, seed)
            for w in todo:
                row = run_cell(sc, seed, policy, w, args.cap_s, loaded)
                row["commit"] = commit
                append(args.cache, row)
                cache[sc, seed, variant, w] = {k: str(v) for k, v in row.items()}
                print(f"{sc} seed {seed} {variant} max_jobs {w}: {row['status']} utility "
                      f"{row.get('utility', math.nan):.1f} completed "
                      f"{row.get('completed', -1)} not settled "
                      f"{row.get('not_optimal', '-')}/{row.get('solves', '-')} "
                      f"{row['wall_s']} s (load {row['loadavg_before']}-"
                      f"{row['loadavg_after']})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="dorm",
                    help="dorm or elastic-mip, options after a colon: "
                         "elastic-mip:mip_rel_gap=1e-4;time_limit_s=1")
    ap.add_argument("--windows", default="32,64,128,256", help="max_jobs values")
    ap.add_argument("--scenarios", default="oasis-300,oasis-400,philly-10000")
    ap.add_argument("--seeds", type=int, default=5, help="oasis-paper seeds 0..n-1")
    ap.add_argument("--cap-s", type=float, default=600.0, help="wall cap per cell, s")
    ap.add_argument("--cache", type=Path, default=RESULTS / "dorm_window_cells.csv")
    ap.add_argument("--force", action="store_true", help="re-measure the selected cells")
    ap.add_argument("--table-only", action="store_true", help="only print the cached table")
    args = ap.parse_args()
    try:
        windows = [int(x) for x in args.windows.split(",")]
    except ValueError:
        raise SystemExit(f"bench_dorm_window: --windows: integers expected, got "
                         f"{args.windows!r}") from None
    if any(w < 1 for w in windows):
        raise SystemExit("bench_dorm_window: --windows: every value must be >= 1")
    policy = parse_variant(args.policy)
    scenarios = args.scenarios.split(",")
    cache = read_cache(args.cache)
    if not args.table_only:
        RESULTS.mkdir(exist_ok=True)
        measure(args, scenarios, policy, windows, cache)
    print(render(cache, scenarios, _variant(policy[0], _opts_text(policy[1])), windows,
                 args.seeds))


if __name__ == "__main__":
    main()
