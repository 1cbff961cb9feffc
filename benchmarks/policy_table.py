"""Every registered policy side by side: ONE table of total utility and completed jobs.

Rows of the table are policies (every policy in :func:`psched.policies.available_policies`,
so a newly registered one appears by itself); columns are scenarios:

* ``oasis-100`` .. ``oasis-400``: the ``oasis-paper`` scenario (T = 300), seeds 0..4, total
  utility mean ± sd and completed jobs (mean) -- the jobs and cluster of
  ``benchmarks/rivals_tables.py`` and ``benchmarks/replicate_fig3.py``;
* ``ef-cluster10``, ``ef-195job``, ``ef-cluster04``: ElasticFlow traces
  (``../shared/traces/elasticflow/augmented``, 1-h slots, the default cluster for the trace,
  the horizon rule), seed 0, loaded exactly as ``rivals_tables.load`` (BENCHMARKS sections 7, 8);
* ``fig5``: the Fig. 5 instances of ``benchmarks/bench_offline.py study`` (n in 3, 6, 9, 12
  servers x 4 priority ranges x ``--fig5-instances`` each, :func:`psched.ratio.instance_seed`);
  OPT is the exact offline optimum (:func:`psched.offline.solve_offline`); the cell gives
  OPT / policy: median, p90, max (``inf`` where the policy earned nothing).

Every cell (scenario, seed or instance, policy) is cached in ``--cache`` (CSV, appended as it
is measured; the last row of a cell wins), so a re-run measures only what is missing:
``--policies oasis-rp`` adds one policy's row; ``--force`` re-measures the selected cells (on
fig5 the policies only: a cached OPT is re-solved only with ``--force-opt``).
``--import-ratio`` seeds the fig5 cells (and OPT) from a ``psched ratio`` / ``bench_offline.py
study`` CSV of the same instances. Each trace cell runs in a forked child with a time cap
(``--cap-s``); a cell that hits it is recorded as ``cap`` and shown as ``> cap`` -- never as a
number. Partial cells (fewer seeds or instances than asked) show how many they hold.

    python benchmarks/policy_table.py                      # everything, every policy
    python benchmarks/policy_table.py --policies oasis-rp  # add one policy's row
    python benchmarks/policy_table.py --table-only         # print the table from the cache
    python benchmarks/policy_table.py --table-only --compare old_cells.csv  # what changed

Writes ``benchmarks/results/policy_table_cells.csv`` and ``benchmarks/results/policy_table.md``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import math  # noqa: E402
import multiprocessing as mp  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402
from queue import Empty  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from bench_offline import PRIORITIES  # noqa: E402
from rivals_tables import load  # noqa: E402

from psched.model import resolve_job  # noqa: E402
from psched.offline import solve_offline  # noqa: E402
from psched.policies import available_policies, make_policy  # noqa: E402
from psched.ratio import instance_seed, read_csv  # noqa: E402
from psched.simulator import simulate  # noqa: E402
from psched.traces.synth import fig5_instance  # noqa: E402

RESULTS = Path(__file__).parent / "results"
TRACES = ("oasis-100", "oasis-200", "oasis-300", "oasis-400", "ef-cluster10", "ef-195job",
          "ef-cluster04")
SCENARIOS = (*TRACES, "fig5")
FIG5_SERVERS = (3, 6, 9, 12)
FIELDS = ("scenario", "instance", "policy", "utility", "completed", "jobs", "wall_s",
          "status", "measured_at", "commit")
OPT = "OPT"  #: the policy name under which a fig5 instance's offline optimum is cached


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One measured cell: a policy's run of one scenario instance."""

    scenario: str  #: oasis-<n>, ef-<trace> or fig5
    instance: str  #: the seed (traces) or "servers:lo:hi:seed" (fig5)
    policy: str  #: policy name, or OPT
    utility: float  #: total utility (nan unless status is ok/optimal)
    completed: int  #: jobs completed (-1 unknown)
    jobs: int  #: jobs in the instance
    wall_s: float  #: wall seconds of the run
    status: str  #: ok, cap (hit --cap-s), error, or the MILP status for OPT

    def row(self, commit: str) -> dict[str, Any]:
        """A CSV row."""
        return {"scenario": self.scenario, "instance": self.instance, "policy": self.policy,
                "utility": self.utility, "completed": self.completed, "jobs": self.jobs,
                "wall_s": f"{self.wall_s:.2f}", "status": self.status,
                "measured_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ"),
                "commit": commit}


def read_cells(path: Path) -> dict[tuple[str, str, str], Cell]:
    """The cache: the last row of every (scenario, instance, policy)."""
    out: dict[tuple[str, str, str], Cell] = {}
    if not path.exists():
        return out
    with open(path, newline="") as fh:
        for d in csv.DictReader(fh):
            cell = Cell(scenario=d["scenario"], instance=d["instance"], policy=d["policy"],
                        utility=float(d["utility"]), completed=int(d["completed"]),
                        jobs=int(d["jobs"]), wall_s=float(d["wall_s"]), status=d["status"])
            out[cell.scenario, cell.instance, cell.policy] = cell
    return out


class CellWriter:
    """Appends cells to the cache as they are measured (a long run loses nothing)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.commit = _commit()

    def write(self, cells: Sequence[Cell]) -> None:
        new = not self.path.exists() or self.path.stat().st_size == 0
        with open(self.path, "a", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=FIELDS)
            if new:
                w.writeheader()
            w.writerows(c.row(self.commit) for c in cells)


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True, cwd=Path(__file__).parent)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


# ---------------------------------------------------------------- traces (oasis-paper, EF)

def _run_policy(specs: Any, cluster: Any, horizon: int, name: str, seed: int,
                queue: Any) -> None:
    """Child process: one simulation; puts (utility, completed, wall_s) on ``queue``."""
    t0 = time.perf_counter()
    res = simulate(specs, cluster, make_policy(name), horizon, seed=seed)
    util = float(sum(r.utility for r in res.records.values()))
    done = sum(r.completion is not None for r in res.records.values())
    queue.put((util, done, time.perf_counter() - t0))


def run_capped(target: Any, args: tuple[Any, ...], cap_s: float) -> tuple[Any, float]:
    """``target(*args, queue)`` in a forked child that puts one result on ``queue``; the
    result (None if the child died or ran past ``cap_s`` wall seconds: it is killed, by its
    handle) and the wall seconds it took."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    t0 = time.perf_counter()
    proc.start()
    got = None
    while got is None:
        try:
            got = queue.get(timeout=1.0)
        except Empty:
            if not proc.is_alive() or time.perf_counter() - t0 >= cap_s:
                break
    wall = time.perf_counter() - t0
    if proc.is_alive():
        proc.kill()  # our own child, by its handle
    proc.join()
    return got, wall


def trace_cells(scenario: str, seed: int, policies: Sequence[str],
                cap_s: float) -> Iterator[Cell]:
    """Run every policy on one trace instance, each in a forked child capped at ``cap_s``."""
    specs, cluster, horizon, _ = load(scenario, seed)
    for name in policies:
        got, wall = run_capped(_run_policy, (specs, cluster, horizon, name, seed), cap_s)
        if got is not None:
            status, (util, done, wall) = "ok", got
        else:
            status = "cap" if wall >= cap_s else "error"
            util, done = math.nan, -1
        print(f"{scenario} seed {seed} {name}: {status} utility {util:.1f}, "
              f"completed {done}/{len(specs)}, {wall:.1f} s", flush=True)
        yield Cell(scenario=scenario, instance=str(seed), policy=name, utility=util,
                   completed=done, jobs=len(specs), wall_s=wall, status=status)


# ---------------------------------------------------------------- fig5 ratio instances

def fig5_keys(per_cell: int) -> list[tuple[int, tuple[float, float], int]]:
    """(servers, priority, generator seed) of every instance, as ``bench_offline.py study``."""
    return [(n, prio, instance_seed(0, n, prio, i)) for prio in PRIORITIES
            for n in FIG5_SERVERS for i in range(per_cell)]


def fig5_key(n: int, prio: tuple[float, float], seed: int) -> str:
    return f"{n}:{prio[0]:g}:{prio[1]:g}:{seed}"


def fig5_cells(n: int, prio: tuple[float, float], seed: int, names: Sequence[str],
               time_limit: float) -> Iterator[Cell]:
    """Policies (in process: the instances are tiny) and, if asked for, OPT of one instance."""
    specs, cluster = fig5_instance(n, seed=seed, priority=prio)
    key, horizon = fig5_key(n, prio, seed), 10
    for name in names:
        t0 = time.perf_counter()
        if name == OPT:
            jobs = [j for j in (resolve_job(s, cluster.slot_seconds, horizon) for s in specs)
                    if j.window > 0]
            sol = solve_offline(jobs, cluster, horizon, time_limit=time_limit)
            util, done, status = sol.objective, len(sol.completion), sol.status
        else:
            res = simulate(specs, cluster, make_policy(name), horizon)  # as psched.ratio does
            util = float(sum(r.utility for r in res.records.values()))
            done = sum(r.completion is not None for r in res.records.values())
            status = "ok"
        yield Cell(scenario="fig5", instance=key, policy=name, utility=util, completed=done,
                   jobs=len(specs), wall_s=time.perf_counter() - t0, status=status)


def import_ratio(path: Path, known: Sequence[str]) -> list[Cell]:
    """fig5 cells (policies and OPT) from a ratio-study CSV (:func:`psched.ratio.read_csv`)."""
    out = []
    for r in read_csv(path):
        key = fig5_key(r.servers, r.priority, r.seed)
        out.append(Cell(scenario="fig5", instance=key, policy=OPT, utility=r.opt,
                        completed=-1, jobs=r.jobs, wall_s=r.opt_s, status=r.opt_status))
        out += [Cell(scenario="fig5", instance=key, policy=p, utility=u, completed=-1,
                     jobs=r.jobs, wall_s=0.0, status="ok")
                for p, u in r.utility.items() if p in known]
    return out


# ---------------------------------------------------------------- the table

def _fmt(x: float) -> str:
    if not math.isfinite(x):
        return "∞" if x > 0 else "–"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def trace_summary(cells: dict[tuple[str, str, str], Cell], scenario: str, policy: str,
                  seeds: Sequence[int]) -> tuple[str, float]:
    """The cell text and its sort value (mean utility) for one trace column."""
    got = [cells.get((scenario, str(s), policy)) for s in seeds]
    have = [c for c in got if c is not None]
    if not have:
        return "", math.nan
    capped = [c for c in have if c.status == "cap"]
    if capped:
        return f"> {max(c.wall_s for c in capped):.0f} s (cap)", math.nan
    ok = [c for c in have if c.status == "ok"]
    if not ok:
        return "error", math.nan
    u = np.array([c.utility for c in ok])
    done = np.array([c.completed for c in ok])
    part = "" if len(ok) == len(seeds) else f" [{len(ok)}/{len(seeds)} seeds]"
    if len(ok) == 1:
        return f"{_fmt(u[0])} ({done[0]}){part}", float(u[0])
    sd = f"{u.std():,.0f}" if abs(u.mean()) >= 100 else _fmt(float(u.std()))
    return f"{_fmt(u.mean())} ± {sd} ({done.mean():.0f}){part}", float(u.mean())


def ratio_summary(cells: dict[tuple[str, str, str], Cell], policy: str,
                  keys: Sequence[str]) -> tuple[str, float]:
    """OPT / policy over the fig5 instances: median / p90 / max (only proven-optimal OPT)."""
    ratios = []
    for k in keys:
        opt, got = cells.get(("fig5", k, OPT)), cells.get(("fig5", k, policy))
        if opt is None or got is None or opt.status != "optimal":
            continue
        ratios.append(opt.utility / got.utility if got.utility > 0 else math.inf)
    if not ratios:
        return "", math.nan
    r = np.array(ratios)
    med = float(np.median(r))
    part = "" if len(r) == len(keys) else f" [{len(r)}/{len(keys)}]"
    return (f"{med:.2f} / {np.percentile(r, 90):.2f} / {_fmt(float(r.max()))}{part}",
            -med)


def render(cells: dict[tuple[str, str, str], Cell], policies: Sequence[str],
           scenarios: Sequence[str], seeds: int, fig5_per_cell: int) -> str:
    """The markdown table: one row per policy, the best value of each column in bold."""
    keys = [fig5_key(n, p, s) for n, p, s in fig5_keys(fig5_per_cell)]
    grid: dict[str, dict[str, tuple[str, float]]] = {}
    for p in policies:
        grid[p] = {}
        for sc in scenarios:
            if sc == "fig5":
                grid[p][sc] = ratio_summary(cells, p, keys)
            else:
                sd = [0] if sc.startswith("ef-") else list(range(seeds))
                grid[p][sc] = trace_summary(cells, sc, p, sd)
    def jobs(sc: str) -> str:
        n = {c.jobs for k, c in cells.items() if k[0] == sc}
        return "/".join(str(x) for x in sorted(n)) or "?"

    head = [(f"fig5: OPT / policy, median / p90 / max ({len(keys)} instances)" if sc == "fig5"
             else f"{sc}: mean ± sd (completed of {jobs(sc)}), {seeds} seeds"
             if sc.startswith("oasis-") else f"{sc}: utility (completed of {jobs(sc)})")
            for sc in scenarios]
    lines = ["| policy | " + " | ".join(head) + " |",
             "|---|" + "---:|" * len(scenarios)]
    best = {sc: max((grid[p][sc][1] for p in policies if not math.isnan(grid[p][sc][1])),
                    default=math.nan) for sc in scenarios}
    for p in policies:
        row = []
        for sc in scenarios:
            text, val = grid[p][sc]
            row.append(f"**{text}**" if text and val == best[sc] else text)
        lines.append(f"| {p} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def _seed_list(text: str) -> list[int]:
    """``--map-seeds``: comma-separated non-negative integers."""
    try:
        seeds = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of seeds: {text!r}") from None
    if not seeds or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"seeds must be >= 0: {text!r}")
    return seeds


def render_map_seeds(cells: dict[tuple[str, str, str], Cell], policies: Sequence[str],
                     scenarios: Sequence[str], map_seeds: Sequence[int], focus: str) -> str:
    """Two markdown tables over ElasticFlow mapping draws: every policy per (trace, mapping
    seed), the best of each column in bold; then ``focus`` against its best rival per
    column (the rival's name, both utilities and ``focus`` / rival - 1)."""
    cols = [(sc, s) for sc in scenarios for s in map_seeds]
    lines = ["| policy | " + " | ".join(f"{sc} map seed {s}" for sc, s in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    grid = {p: [trace_summary(cells, sc, p, [s]) for sc, s in cols] for p in policies}
    best = [max((grid[p][i][1] for p in policies if not math.isnan(grid[p][i][1])),
                default=math.nan) for i in range(len(cols))]
    for p in policies:
        row = [f"**{t}**" if t and v == best[i] else t for i, (t, v) in enumerate(grid[p])]
        lines.append(f"| {p} | " + " | ".join(row) + " |")
    lines += ["", f"| trace | map seed | {focus} | best rival | {focus} / best rival |",
              "|---|---:|---:|---|---:|"]
    for i, (sc, s) in enumerate(cols):
        mine = cells.get((sc, str(s), focus))
        rivals = [(grid[p][i][1], p) for p in policies
                  if p != focus and not math.isnan(grid[p][i][1])]
        if mine is None or mine.status != "ok" or not rivals:
            continue
        val, who = max(rivals)
        ratio = f"{mine.utility / val - 1:+.1%}" if val > 0 else "–"
        lines.append(f"| {sc} | {s} | {_fmt(mine.utility)} ({mine.completed}) | {who} "
                     f"{_fmt(val)} | {ratio} |")
    return "\n".join(lines)


def compare(old: dict[tuple[str, str, str], Cell], new: dict[tuple[str, str, str], Cell],
            policies: Sequence[str], scenarios: Sequence[str], seeds: int,
            fig5_per_cell: int) -> str:
    """A markdown table of the summary cells that differ between two caches (old -> new)."""
    keys = [fig5_key(n, p, s) for n, p, s in fig5_keys(fig5_per_cell)]
    lines = ["| policy | scenario | before | now |", "|---|---|---:|---:|"]
    for p in policies:
        for sc in scenarios:
            if sc == "fig5":
                a, b = ratio_summary(old, p, keys)[0], ratio_summary(new, p, keys)[0]
            else:
                sd = [0] if sc.startswith("ef-") else list(range(seeds))
                a, b = trace_summary(old, sc, p, sd)[0], trace_summary(new, sc, p, sd)[0]
            if a != b:
                lines.append(f"| {p} | {sc} | {a or '–'} | {b or '–'} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- driver

def measure(args: argparse.Namespace, policies: Sequence[str], scenarios: Sequence[str],
            cells: dict[tuple[str, str, str], Cell], writer: CellWriter) -> None:
    """Measure every selected cell missing from the cache (all of them with ``--force``)."""
    def missing(sc: str, inst: str, names: Sequence[str]) -> list[str]:
        return [p for p in names
                if (args.force_opt if p == OPT else args.force) or (sc, inst, p) not in cells]

    def keep(batch: Callable[[], Iterator[Cell]]) -> None:
        for cell in batch():
            writer.write([cell])
            cells[cell.scenario, cell.instance, cell.policy] = cell

    for sc in scenarios:
        if sc == "fig5":
            for n, prio, seed in fig5_keys(args.fig5_instances):
                key = fig5_key(n, prio, seed)
                todo = missing(sc, key, [*policies, OPT])
                if todo:
                    keep(lambda n=n, prio=prio, seed=seed, todo=todo: fig5_cells(
                        n, prio, seed, todo, args.time_limit))
            continue
        for seed in (args.map_seeds if sc.startswith("ef-") else range(args.seeds)):
            todo = missing(sc, str(seed), policies)
            if todo:
                keep(lambda sc=sc, seed=seed, todo=todo: trace_cells(sc, seed, todo, args.cap_s))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", default="all", help="comma-separated, or all (registered)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--seeds", type=int, default=5, help="oasis-paper seeds 0..n-1")
    ap.add_argument("--map-seeds", type=_seed_list, default=[0],
                    help="ElasticFlow mapping seeds, comma-separated (default 0); with more "
                    "than seed 0 the mapping-draw table is printed (and written) too")
    ap.add_argument("--focus", default="oasis-rp",
                    help="the policy the mapping-draw table compares with its best rival")
    ap.add_argument("--fig5-instances", type=int, default=7,
                    help="instances per (servers, priority) cell; 16 cells (7 -> 112)")
    ap.add_argument("--cap-s", type=float, default=900.0,
                    help="wall-time cap per trace cell, s; a capped cell shows '> cap'")
    ap.add_argument("--time-limit", type=float, default=300.0, help="OPT MILP limit, s")
    ap.add_argument("--cache", type=Path, default=RESULTS / "policy_table_cells.csv")
    ap.add_argument("--md", type=Path, default=RESULTS / "policy_table.md")
    ap.add_argument("--import-ratio", type=Path,
                    help="seed the fig5 cells from this ratio-study CSV first")
    ap.add_argument("--force", action="store_true",
                    help="re-measure the selected cells (fig5: the policies, not OPT)")
    ap.add_argument("--force-opt", action="store_true",
                    help="also re-solve the fig5 offline optima (OPT) already cached")
    ap.add_argument("--table-only", action="store_true", help="only print the cached table")
    ap.add_argument("--compare", type=Path, metavar="OLD_CSV",
                    help="also print the cells that differ from this older cache")
    args = ap.parse_args()
    known = available_policies()
    policies = known if args.policies == "all" else args.policies.split(",")
    unknown = sorted(set(policies) - set(known))
    if unknown:
        raise SystemExit(f"policy_table: --policies: unknown {unknown}; known {known}")
    scenarios = args.scenarios.split(",")
    bad = sorted(set(scenarios) - set(SCENARIOS))
    if bad:
        raise SystemExit(f"policy_table: --scenarios: unknown {bad}; known {list(SCENARIOS)}")
    RESULTS.mkdir(exist_ok=True)
    writer = CellWriter(args.cache)
    if args.import_ratio is not None:
        writer.write(import_ratio(args.import_ratio, known))
    cells = read_cells(args.cache)
    if not args.table_only:
        measure(args, policies, scenarios, cells, writer)
    shown = [p for p in known if any(k[2] == p for k in cells)]
    table = render(cells, shown, list(SCENARIOS), args.seeds, args.fig5_instances)
    if args.map_seeds != [0]:
        efs = [sc for sc in SCENARIOS if sc.startswith("ef-")
               and any(k[0] == sc and k[1] != "0" for k in cells)]
        table += "\n\n" + render_map_seeds(cells, shown, efs, args.map_seeds, args.focus)
    print(table)
    if args.compare is not None:
        print(compare(read_cells(args.compare), cells, shown, list(SCENARIOS), args.seeds,
                      args.fig5_instances))
    tmp = args.md.with_suffix(".md.tmp")
    tmp.write_text(table + "\n")
    tmp.replace(args.md)


if __name__ == "__main__":
    main()
