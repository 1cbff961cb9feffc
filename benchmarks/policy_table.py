"""Every registered policy side by side: ONE table of total utility and completed jobs.

Rows of the table are policies (every policy in :func:`psched.policies.available_policies`,
so a newly registered one appears by itself); columns are scenarios:

* ``oasis-100`` .. ``oasis-400``: the ``oasis-paper`` scenario (T = 300), seeds 0..4, total
  utility mean ± sd and completed jobs (mean) -- the jobs and cluster of
  ``benchmarks/rivals_tables.py`` and ``benchmarks/replicate_fig3.py``;
* ``ef-cluster10``, ``ef-195job``, ``ef-cluster04``: ElasticFlow traces
  (``traces/elasticflow/augmented``, 1-h slots, the default cluster for the trace,
  the horizon rule), seed 0, loaded exactly as ``rivals_tables.load`` (BENCHMARKS sections 7, 8);
* ``fig5``: the Fig. 5 instances of ``benchmarks/bench_offline.py study`` (n in 3, 6, 9, 12
  servers x 4 priority ranges x ``--fig5-instances`` each,
  :func:`psched.runs.ratio.instance_seed`);
  OPT is the exact offline optimum (:func:`psched.offline.optimum.solve_offline`); the cell gives
  OPT / policy: median, p90, max (``inf`` where the policy earned nothing).

The **evaluation table** (``--table eval``, issue 26; none of its rows was used to tune
``oasis-rp``) has one row per (scenario, seed) of :data:`EVAL_ROWS`, not means:

* ``oasis-100`` .. ``oasis-400`` at seeds 5..9;
* ``efsplit-cluster10``, ``efsplit-195job``: the second half of the ElasticFlow trace, with its
  first half as the price history (``bench_oasis_rp_history.py --history split``), mapping
  seeds 0..4. A priced policy (``psched.core.policy.takes_price_bounds``: the OASiS family)
  prices from that history (``price_source="history"``); the rivals ignore it;
* ``philly-2000``, ``philly-10000``, ``philly-80000``: ``psched trace synth --scenario philly``
  at that many jobs, seeds 0..2, loaded as ``bench_oasis_rp_scale.load``.

Each row gives the ``--focus`` policy (``oasis-rp``), the best OASiS-family policy and the best
rival with their ratios (``✓`` where the focus is at or above the best rival), then every
policy's value. Its cells share the cache (instance = seed), so when one policy changes only
its row is re-run: ``--table eval --policies oasis-rp --force``.

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
    python benchmarks/policy_table.py --table eval --table-only  # the evaluation table
    nice -n 10 python benchmarks/policy_table.py --table eval --policies oasis-rp --force
    python benchmarks/policy_table.py --table eval --scenarios oasis-100 --seeds 5-9,12

``--seeds N`` means seeds 0..N-1; a list of seeds and ranges (``5-9``, ``0,2``, ``0-2,7``)
means those. Writes ``benchmarks/results/policy_table_cells.csv`` and
``benchmarks/results/policy_table.md`` (``policy_table_eval.md`` for ``--table eval``).
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
from collections.abc import Callable, Iterator, Mapping, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from functools import cache  # noqa: E402
from pathlib import Path  # noqa: E402
from queue import Empty  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from bench_oasis_rp_scale import load as scale_load  # noqa: E402
from bench_offline import PRIORITIES  # noqa: E402
from rivals_tables import load  # noqa: E402

from psched.core.model import Cluster, JobSpec, resolve_job  # noqa: E402
from psched.core.policy import takes_price_bounds as priced_factory  # noqa: E402
from psched.core.simulator import simulate  # noqa: E402
from psched.offline.optimum import solve_offline  # noqa: E402
from psched.policies import available_policies, make_policy, policy_factory  # noqa: E402
from psched.results.metrics import promise_figures  # noqa: E402
from psched.runs.ratio import instance_seed, read_csv  # noqa: E402
from psched.traces.synth import fig5_instance  # noqa: E402

RESULTS = Path(__file__).parent / "results"
TRACES = ("oasis-100", "oasis-200", "oasis-300", "oasis-400", "ef-cluster10", "ef-195job",
          "ef-cluster04")
SCENARIOS = (*TRACES, "fig5")
FIG5_SERVERS = (3, 6, 9, 12)
FIELDS = ("scenario", "instance", "policy", "utility", "completed", "jobs", "wall_s",
          "status", "measured_at", "commit", "unfinished", "wasted_ws", "background_ws")
OPT = "OPT"  #: the policy name under which a fig5 instance's offline optimum is cached
MAIN_SEEDS = 5  #: the main table's oasis-paper seeds, 0..4
#: the evaluation table's rows: scenario -> seeds, cheapest first (the order they are measured)
EVAL_ROWS: dict[str, tuple[int, ...]] = {
    **{f"oasis-{n}": tuple(range(5, 10)) for n in (100, 200, 300, 400)},
    "efsplit-cluster10": tuple(range(5)),
    "efsplit-195job": tuple(range(5)),
    **{f"philly-{n}": (0, 1, 2) for n in (2000, 10000, 80000)},
}


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One measured cell: a policy's run of one scenario instance."""

    scenario: str  #: oasis-<n>, ef-<trace>, efsplit-<trace>, philly-<n> or fig5
    instance: str  #: the seed (traces) or "servers:lo:hi:seed" (fig5)
    policy: str  #: policy name, or OPT
    utility: float  #: total utility (nan unless status is ok/optimal)
    completed: int  #: jobs completed (-1 unknown)
    jobs: int  #: jobs in the instance
    wall_s: float  #: wall seconds of the run
    status: str  #: ok, cap (hit --cap-s), error, or the MILP status for OPT
    unfinished: int = -1  #: admitted jobs never completed by the horizon (-1 not measured)
    wasted_ws: float = math.nan  #: worker-slots run by jobs never completed (nan not measured)
    background_ws: float = math.nan  #: worker-slots run on room no plan used (nan not measured)

    def row(self, commit: str) -> dict[str, Any]:
        """A CSV row."""
        return {"scenario": self.scenario, "instance": self.instance, "policy": self.policy,
                "utility": self.utility, "completed": self.completed, "jobs": self.jobs,
                "wall_s": f"{self.wall_s:.2f}", "status": self.status,
                "measured_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ"),
                "commit": commit,
                "unfinished": "" if self.unfinished < 0 else self.unfinished,
                "wasted_ws": "" if math.isnan(self.wasted_ws) else self.wasted_ws,
                "background_ws": "" if math.isnan(self.background_ws) else self.background_ws}


def read_cells(path: Path) -> dict[tuple[str, str, str], Cell]:
    """The cache: the last row of every (scenario, instance, policy)."""
    out: dict[tuple[str, str, str], Cell] = {}
    if not path.exists():
        return out
    with open(path, newline="") as fh:
        for d in csv.DictReader(fh):
            cell = Cell(scenario=d["scenario"], instance=d["instance"], policy=d["policy"],
                        utility=float(d["utility"]), completed=int(d["completed"]),
                        jobs=int(d["jobs"]), wall_s=float(d["wall_s"]), status=d["status"],
                        unfinished=int(d.get("unfinished") or -1),
                        wasted_ws=float(d.get("wasted_ws") or math.nan),
                        background_ws=float(d.get("background_ws") or math.nan))
            out[cell.scenario, cell.instance, cell.policy] = cell
    return out


class CellWriter:
    """Appends cells to the cache as they are measured (a long run loses nothing)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.commit = _commit()

    def write(self, cells: Sequence[Cell]) -> None:
        new = not self.path.exists() or self.path.stat().st_size == 0
        if not new:
            _upgrade_header(self.path)
        with open(self.path, "a", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=FIELDS)
            if new:
                w.writeheader()
            w.writerows(c.row(self.commit) for c in cells)


def _upgrade_header(path: Path) -> None:
    """Rewrite a cache whose header lacks some of :data:`FIELDS` (a cache written before
    the waste columns) with the full header, its rows kept (the new fields empty)."""
    with open(path, newline="") as fh:
        if next(csv.reader(fh), None) == list(FIELDS):
            return
        fh.seek(0)
        rows = list(csv.DictReader(fh))
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS, restval="", extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    tmp.replace(path)


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True, cwd=Path(__file__).parent)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


# ---------------------------------------------------------------- traces (oasis-paper, EF, Philly)

def load_scenario(scenario: str, seed: int) -> tuple[list[JobSpec], Cluster, int,
                                                      list[JobSpec]]:
    """Jobs, cluster, horizon and price history (empty but for ``efsplit-``) of one instance:
    ``oasis-<n>`` and ``ef-<trace>`` as ``rivals_tables.load``, ``philly-<n>`` as
    ``bench_oasis_rp_scale.load``, ``efsplit-<trace>`` as ``bench_oasis_rp_history.split_trace``
    (the second half of ``ef-<trace>``, the first half its history)."""
    kind, _, name = scenario.partition("-")
    if kind == "philly":
        specs, cluster, horizon = scale_load(scenario, seed)
        return specs, cluster, horizon, []
    if kind == "efsplit":
        from bench_oasis_rp_history import split_trace  # here: that module imports this one

        specs, cluster, _, _ = load(f"ef-{name}", seed)
        history, run, horizon = split_trace(specs)
        return run, cluster, horizon, history
    specs, cluster, horizon, _ = load(scenario, seed)
    return specs, cluster, horizon, []


@cache
def takes_price_bounds(name: str) -> bool:
    """Whether policy ``name`` is of the OASiS family (prices with U and L, and can take them
    from a history trace)."""
    return priced_factory(policy_factory(name))


def _run_policy(specs: Any, cluster: Any, horizon: int, history: list[JobSpec], name: str,
                seed: int, queue: Any) -> None:
    """Child process: one simulation (an OASiS-family policy priced from ``history`` if there
    is one); puts (utility, completed, wall_s) on ``queue``."""
    t0 = time.perf_counter()
    priced = bool(history) and takes_price_bounds(name)
    policy = make_policy(name, price_source="history") if priced else make_policy(name)
    res = simulate(specs, cluster, policy, horizon, seed=seed, history=history if priced else ())
    queue.put((*outcome(res), time.perf_counter() - t0))


def outcome(res: Any) -> tuple[float, int, int, float, float]:
    """A run's total utility, completed jobs, admitted jobs never completed, worker-slots run
    by jobs never completed (:func:`psched.results.metrics.promise_figures`' ``wasted_ws``) and
    worker-slots run in the background. O(jobs)."""
    recs = list(res.records.values())
    figs = promise_figures(res)
    return (float(sum(r.utility for r in recs)), sum(r.completion is not None for r in recs),
            sum(r.admitted and r.completion is None for r in recs), figs["wasted_ws"],
            figs["background_ws"])


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
    specs, cluster, horizon, history = load_scenario(scenario, seed)
    for name in policies:
        got, wall = run_capped(_run_policy, (specs, cluster, horizon, history, name, seed),
                               cap_s)
        if got is not None:
            status, (util, done, unfin, wasted, bg, wall) = "ok", got
        else:
            status = "cap" if wall >= cap_s else "error"
            util, done, unfin, wasted, bg = math.nan, -1, -1, math.nan, math.nan
        print(f"{scenario} seed {seed} {name}: {status} utility {util:.1f}, "
              f"completed {done}/{len(specs)}, unfinished {unfin}, wasted {wasted:.1f} ws, "
              f"{wall:.1f} s", flush=True)
        yield Cell(scenario=scenario, instance=str(seed), policy=name, utility=util,
                   completed=done, jobs=len(specs), wall_s=wall, status=status,
                   unfinished=unfin, wasted_ws=wasted, background_ws=bg)


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
        unfin, wasted, bg = -1, math.nan, math.nan
        if name == OPT:
            jobs = [j for j in (resolve_job(s, cluster.slot_seconds, horizon) for s in specs)
                    if j.window > 0]
            sol = solve_offline(jobs, cluster, horizon, time_limit=time_limit)
            util, done, status = sol.objective, len(sol.completion), sol.status
        else:
            res = simulate(specs, cluster, make_policy(name), horizon)  # as offline.ratio does
            util, done, unfin, wasted, bg = outcome(res)
            status = "ok"
        yield Cell(scenario="fig5", instance=key, policy=name, utility=util, completed=done,
                   jobs=len(specs), wall_s=time.perf_counter() - t0, status=status,
                   unfinished=unfin, wasted_ws=wasted, background_ws=bg)


def import_ratio(path: Path, known: Sequence[str]) -> list[Cell]:
    """fig5 cells (policies and OPT) from a ratio-study CSV
    (:func:`psched.runs.ratio.read_csv`)."""
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
    med = float(np.median(r))  # inf where an infinite ratio reaches it, never NaN
    part = "" if len(r) == len(keys) else f" [{len(r)}/{len(keys)}]"
    return (f"{_times(med)} / {_times(quantile(r, 90))} / {_fmt(float(r.max()))}{part}",
            -med)


def _times(x: float) -> str:
    return f"{x:.2f}" if math.isfinite(x) else "∞"


def quantile(values: np.ndarray, q: float) -> float:
    """``np.percentile(values, q)`` (linear), also where some values are ``inf`` (a policy
    that earned nothing): numpy interpolates ``inf - inf`` there and returns NaN
    (``np.median`` does not: it averages the two middle values); here a
    quantile between a finite value and ``inf`` is ``inf``, one at a finite value is that
    value. O(n log n)."""
    if np.all(np.isfinite(values)):
        return float(np.percentile(values, q))
    s = np.sort(values)
    at = q / 100.0 * (s.size - 1)
    i = math.floor(at)
    if at == i:
        return float(s[i])
    return float(s[i + 1]) if math.isinf(s[i + 1]) else float(np.percentile(values, q))


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


def waste_summary(cells: dict[tuple[str, str, str], Cell], scenario: str, policy: str,
                  instances: Sequence[str]) -> str:
    """``unfinished / wasted`` of one column: admitted jobs never completed and the
    worker-slots run by jobs never completed (means over the instances of an oasis-paper
    column, sums over fig5's); blank unless every instance's run measured them."""
    got = [cells.get((scenario, i, policy)) for i in instances]
    ok = [c for c in got if c is not None and c.status == "ok"]
    if not ok or len(ok) < len(got) or any(c.unfinished < 0 or math.isnan(c.wasted_ws)
                                           for c in ok):
        return ""
    unfin = np.array([c.unfinished for c in ok], dtype=float)
    wasted = np.array([c.wasted_ws for c in ok])
    if scenario == "fig5":
        return f"{unfin.sum():.0f} / {_fmt(float(wasted.sum()))}"
    n = f"{unfin.mean():.1f}" if len(ok) > 1 else f"{unfin[0]:.0f}"
    return f"{n} / {_fmt(float(wasted.mean()))}"


def render_waste(cells: dict[tuple[str, str, str], Cell], policies: Sequence[str],
                 scenarios: Sequence[str], seeds: int, fig5_per_cell: int) -> str:
    """The main table's companion: per policy and column, the admitted jobs that never
    completed and the worker-slots spent on jobs that never completed (``unfinished /
    wasted``; blank where the cells predate the measurement)."""
    keys = [fig5_key(n, p, s) for n, p, s in fig5_keys(fig5_per_cell)]
    inst = {sc: keys if sc == "fig5" else ["0"] if sc.startswith("ef-")
            else [str(s) for s in range(seeds)] for sc in scenarios}
    head = [f"{sc}: sum over {len(keys)}" if sc == "fig5" else
            f"{sc}: mean of {seeds}" if sc.startswith("oasis-") else sc for sc in scenarios]
    lines = ["| policy: admitted never completed / worker-slots wasted | " + " | ".join(head)
             + " |", "|---|" + "---:|" * len(scenarios)]
    for p in policies:
        lines.append(f"| {p} | " + " | ".join(waste_summary(cells, sc, p, inst[sc])
                                                for sc in scenarios) + " |")
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


def parse_seeds(text: str) -> int | list[int]:
    """``--seeds``: ``N`` (seeds 0..N-1, a count), or a comma-separated list of seeds and
    inclusive ranges (``5-9``, ``0,2``, ``0-2,7``; one seed alone is ``7-7``)."""
    if text.isdigit():
        return int(text)
    seeds = []
    for part in text.split(","):
        lo, dash, hi = part.partition("-")
        hi = hi if dash else lo
        if not (lo.isdigit() and hi.isdigit()) or int(hi) < int(lo):
            raise argparse.ArgumentTypeError(
                f"not a count or a list of seeds and ranges (5-9,12): {text!r}")
        seeds += range(int(lo), int(hi) + 1)
    return seeds


def scenario_seeds(args: argparse.Namespace, scenario: str) -> Sequence[int]:
    """The seeds measured of a trace scenario: ``--map-seeds`` for ``ef-``; else ``--seeds``,
    by default the table's (:data:`EVAL_ROWS` for ``--table eval``, 0..4 for the main one)."""
    if scenario.startswith("ef-"):
        return list(args.map_seeds)
    seeds = args.seeds
    if seeds is None:
        return EVAL_ROWS[scenario] if getattr(args, "table", "main") == "eval" \
            else range(MAIN_SEEDS)
    return range(seeds) if isinstance(seeds, int) else seeds


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


# ---------------------------------------------------------------- the evaluation table

def best_of(cells: dict[tuple[str, str, str], Cell], scenario: str, seed: int,
            names: Sequence[str]) -> tuple[str, float, int]:
    """The best of ``names`` on one instance: its name and utility ("" and nan if none is
    measured), and how many of ``names`` are not known there (capped, failed or missing)."""
    got = [cells.get((scenario, str(seed), p)) for p in names]
    ok = [(c.utility, c.policy) for c in got if c is not None and c.status == "ok"]
    val, who = max(ok, default=(math.nan, ""))
    return who, val, len(names) - len(ok)


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b > 0 and math.isfinite(a) else "–"


def eval_verdict(cells: dict[tuple[str, str, str], Cell], scenario: str, seed: int,
                 policies: Sequence[str], focus: str) -> tuple[str, bool | None]:
    """One row of the verdict table, and whether ``focus`` is at or above the best rival
    there (None where either is not measured; False where ``focus`` was capped or failed)."""
    family = [p for p in policies if takes_price_bounds(p)]
    rivals = [p for p in policies if p not in family]
    mine, mine_v = trace_summary(cells, scenario, focus, [seed])
    fam, fam_v, _ = best_of(cells, scenario, seed, family)
    riv, riv_v, unknown = best_of(cells, scenario, seed, rivals)
    jobs = next((c.jobs for p in policies if (c := cells.get((scenario, str(seed), p)))), 0)
    at_least = None if math.isnan(riv_v) or not mine else \
        False if math.isnan(mine_v) else mine_v >= riv_v
    mark = {True: "✓ ", False: "✗ ", None: ""}[at_least]
    note = f" [{unknown} of {len(rivals)} capped or missing]" if unknown else ""
    waste = waste_summary(cells, scenario, focus, [str(seed)])
    return (f"| {scenario} | {seed} | {jobs or ''} | {mine} | {_named(fam, fam_v)} | "
            f"{_named(riv, riv_v)}{note} | {_ratio(fam_v, riv_v)} | "
            f"{mark}{_ratio(mine_v, riv_v)} | {waste} |"), at_least


def _named(name: str, value: float) -> str:
    return f"{name} {_fmt(value)}" if name else ""


def eval_matrix(cells: dict[tuple[str, str, str], Cell], policies: Sequence[str],
                rows: Sequence[tuple[str, int]]) -> str:
    """Every policy's utility (completed) per row, the best of each row in bold."""
    lines = ["| scenario | seed | " + " | ".join(policies) + " |",
             "|---|---:|" + "---:|" * len(policies)]
    for sc, seed in rows:
        got = [trace_summary(cells, sc, p, [seed]) for p in policies]
        best = max((v for _, v in got if not math.isnan(v)), default=math.nan)
        lines.append(f"| {sc} | {seed} | " + " | ".join(
            f"**{t}**" if t and v == best else t for t, v in got) + " |")
    return "\n".join(lines)


def render_eval(cells: dict[tuple[str, str, str], Cell], policies: Sequence[str],
                rows: Mapping[str, Sequence[int]], focus: str) -> str:
    """The evaluation table: a headline, then one verdict row per (scenario, seed) -- the
    focus, the best OASiS-family policy, the best rival and the ratios -- then the matrix of
    every policy's value per row."""
    keys = [(sc, seed) for sc, seeds in rows.items() for seed in seeds]
    verdicts = [eval_verdict(cells, sc, seed, policies, focus) for sc, seed in keys]
    below = [f"{sc} seed {seed}" for (sc, seed), (_, ok) in zip(keys, verdicts, strict=True)
             if ok is False]
    known = sum(ok is not None for _, ok in verdicts)
    head = (f"**{focus} is at or above the best rival on {known - len(below)} of {known} "
            f"measured rows** ({len(keys)} rows in all)"
            + (f"; below on: {', '.join(below)}" if below else ""))
    table = [f"| scenario | seed | jobs | {focus}: utility (completed) | best OASiS family | "
             f"best rival | family / rival | {focus} / rival (✓ at or above) | "
             f"{focus}: admitted never completed / worker-slots wasted |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|", *(v for v, _ in verdicts)]
    return "\n\n".join([head, "\n".join(table), eval_matrix(cells, policies, keys)])


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
        for seed in scenario_seeds(args, sc):
            todo = missing(sc, str(seed), policies)
            if todo:
                keep(lambda sc=sc, seed=seed, todo=todo: trace_cells(sc, seed, todo, args.cap_s))


def main() -> None:
    args = _parser().parse_args()
    known = available_policies()
    policies = known if args.policies == "all" else args.policies.split(",")
    unknown = sorted(set(policies) - set(known))
    if unknown:
        raise SystemExit(f"policy_table: --policies: unknown {unknown}; known {known}")
    own = list(SCENARIOS) if args.table == "main" else list(EVAL_ROWS)
    scenarios = args.scenarios.split(",") if args.scenarios else own
    bad = sorted(set(scenarios) - set(own))
    if bad:
        raise SystemExit(f"policy_table: --scenarios: unknown {bad} for --table "
                         f"{args.table}; known {own}")
    RESULTS.mkdir(exist_ok=True)
    writer = CellWriter(args.cache)
    if args.import_ratio is not None:
        writer.write(import_ratio(args.import_ratio, known))
    cells = read_cells(args.cache)
    if not args.table_only:
        measure(args, policies, scenarios, cells, writer)
    shown = [p for p in known if any(k[2] == p for k in cells)]
    table = render_eval(cells, shown, EVAL_ROWS, args.focus) if args.table == "eval" \
        else main_table(args, cells, shown)
    print(table)
    md = args.md or RESULTS / ("policy_table.md" if args.table == "main"
                               else "policy_table_eval.md")
    tmp = md.with_suffix(".md.tmp")
    tmp.write_text(table + "\n")
    tmp.replace(md)


def main_table(args: argparse.Namespace, cells: dict[tuple[str, str, str], Cell],
               shown: Sequence[str]) -> str:
    """The main table (and the mapping-draw tables, and ``--compare``'s, printed)."""
    seeds = args.seeds if isinstance(args.seeds, int) else MAIN_SEEDS
    table = render(cells, shown, list(SCENARIOS), seeds, args.fig5_instances)
    table += "\n\n" + render_waste(cells, shown, list(SCENARIOS), seeds, args.fig5_instances)
    if args.map_seeds != [0]:
        efs = [sc for sc in SCENARIOS if sc.startswith("ef-")
               and any(k[0] == sc and k[1] != "0" for k in cells)]
        table += "\n\n" + render_map_seeds(cells, shown, efs, args.map_seeds, args.focus)
    if args.compare is not None:
        print(compare(read_cells(args.compare), cells, shown, list(SCENARIOS), seeds,
                      args.fig5_instances))
    return table


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", choices=("main", "eval"), default="main",
                    help="the main table, or the evaluation table (its rows: EVAL_ROWS)")
    ap.add_argument("--policies", default="all", help="comma-separated, or all (registered)")
    ap.add_argument("--scenarios", help="comma-separated; default: every one of --table")
    ap.add_argument("--seeds", type=parse_seeds,
                    help="N (seeds 0..N-1) or a list such as 5-9,12; default: the table's "
                    "(main: 0..4; eval: each row's)")
    ap.add_argument("--map-seeds", type=_seed_list, default=[0],
                    help="ElasticFlow mapping seeds, comma-separated (default 0); with more "
                    "than seed 0 the mapping-draw table is printed (and written) too")
    ap.add_argument("--focus", default="oasis-rp",
                    help="the policy the mapping-draw and evaluation tables set against its "
                    "best rival")
    ap.add_argument("--fig5-instances", type=int, default=7,
                    help="instances per (servers, priority) cell; 16 cells (7 -> 112)")
    ap.add_argument("--cap-s", type=float, default=900.0,
                    help="wall-time cap per trace cell, s; a capped cell shows '> cap'")
    ap.add_argument("--time-limit", type=float, default=300.0, help="OPT MILP limit, s")
    ap.add_argument("--cache", type=Path, default=RESULTS / "policy_table_cells.csv")
    ap.add_argument("--md", type=Path, help="default results/policy_table.md "
                    "(policy_table_eval.md for --table eval)")
    ap.add_argument("--import-ratio", type=Path,
                    help="seed the fig5 cells from this ratio-study CSV first")
    ap.add_argument("--force", action="store_true",
                    help="re-measure the selected cells (fig5: the policies, not OPT)")
    ap.add_argument("--force-opt", action="store_true",
                    help="also re-solve the fig5 offline optima (OPT) already cached")
    ap.add_argument("--table-only", action="store_true", help="only print the cached table")
    ap.add_argument("--compare", type=Path, metavar="OLD_CSV",
                    help="also print the main-table cells that differ from this older cache")
    return ap


if __name__ == "__main__":
    main()
