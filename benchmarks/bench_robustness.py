"""Robustness: promises, completions and utility of the live service when jobs do not run at
their profiled speed.

The ``oasis-paper`` scenario (jobs arriving over ``--span`` slots, 1-hour model slots) runs
through :class:`ray_cluster.service.SchedulerService` on a
:class:`psched.core.reality.RealityExecutor` (not waiting for the wall clock, as
``bench_service_restart.py`` drives it) for ``--horizon-factor`` times the arrival span. One
row per reality: a global rate ``R`` in {0.8, 0.9, 0.95, 1.0, 1.05, 1.2} with no spread, R = 1
with a per-job factor ``sigma_job`` in {0.1, 0.2}, per-slot noise 0.1 and half a slot lost per
start, resume or resize, and ``sigma_job`` 0.2 alone (what not knowing a job's own speed before
it runs costs, with nothing else departing from the profile). Per row and policy, summed over
seeds: utility, jobs promised, kept (%), re-stated, missed, admitted, unfinished (admitted, not
completed by the end; dropped ones included), dropped, the worker-slots spent on jobs that
never completed (``wasted_ws``) and those run in the background (``background_ws``); and the
**oracle**: the same policy told each job's true lasting speed (its ``tau_s`` and communication
time divided by :meth:`RealityExecutor.true_speed`, so its model is the persistent part of
reality; the noise and the start-up cost stay), with ``ratio`` = utility / oracle utility.

Every cell (jobs, seed, reality, policy, real or oracle) is one process of a pool
(``--processes``, default 2). Writes ``benchmarks/results/robustness.md`` (the table) and
``robustness_cells.csv`` (one row per cell, rewritten as each cell finishes; ``--resume``
keeps every cell in it and runs only the cells asked for that it lacks, so a later run can
add rows or sizes to the table); ``--quick`` writes ``robustness_quick.*``, ``--stem NAME``
writes ``NAME.*`` (other seeds or settings beside the committed cells).

Usage::

    python benchmarks/bench_robustness.py                 # 200 and 1,000 jobs, seeds 0-4
    python benchmarks/bench_robustness.py --quick         # 200 jobs, seeds 0-1, 3 realities
    python benchmarks/bench_robustness.py --jobs 200 --seeds 0-4 --policies oasis-rp
    python benchmarks/bench_robustness.py --resume        # the cells an interrupted run left
    python benchmarks/bench_robustness.py --jobs 200 --policies fifo,srtf --no-oracle --resume
    python benchmarks/bench_robustness.py --jobs 200 --summary   # BENCHMARKS' tables
    python benchmarks/bench_robustness.py --jobs 200 --seeds 5-9 --policies oasis-rp \
        --stem robustness_seeds5-9                                 # beside, not over, them
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import logging
import multiprocessing
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from bench_service_restart import drive, service

from psched.core.model import JobSpec
from psched.core.reality import Reality, RealityExecutor
from psched.results.metrics import summarize
from psched.traces.synth import SCENARIOS
from ray_cluster.service import ServiceConfig

__all__ = ["REALITIES", "oracle_specs", "ratio_interval", "read_cells", "run_cell", "summary"]

RESULTS = Path(__file__).resolve().parent / "results"

#: The rows: (label, reality without its seed).
REALITIES: tuple[tuple[str, Reality], ...] = (
    *((f"R={r:g}", Reality(rate=r)) for r in (0.8, 0.9, 0.95, 1.0, 1.05, 1.2)),
    *((f"R=1 sj={s:g} ss=0.1 st=0.5",
       Reality(sigma_job=s, sigma_slot=0.1, startup=0.5)) for s in (0.1, 0.2)),
    ("R=1 sj=0.2", Reality(sigma_job=0.2)),  # the per-job factor alone: what it costs
)
#: ``--quick``'s rows.
QUICK = ("R=0.9", "R=1", "R=1 sj=0.2 ss=0.1 st=0.5")
#: Jobs per arrival slot when ``--span`` is not given (200 jobs arrive over 40 slots, as in
#: ``bench_service_restart.py``; 1,000 over 200).
JOBS_PER_SLOT = 5

COLUMNS = ("jobs", "seed", "reality", "policy", "oracle", "utility", "promised", "kept",
           "restated", "missed", "admitted", "unfinished", "dropped", "wasted_ws",
           "background_ws", "horizon", "cpu_s")


def oracle_specs(specs: Sequence[JobSpec], ex: RealityExecutor) -> list[JobSpec]:
    """Each job's mini-batch time (``tau`` with communication) divided by its true lasting
    speed: a model that knows the persistent part of reality (unchanged where it is 1)."""
    out = []
    for s in specs:
        speed = ex.true_speed(s.job_id)
        out.append(s if speed == 1.0 else dataclasses.replace(
            s, tau_s=s.minibatch_seconds() / speed, tau_includes_comm=True))
    return out


def _scenario(n_jobs: int, seed: int, span: int) -> tuple[list[JobSpec], Any]:
    jobs_fn, cluster_fn = SCENARIOS["oasis-paper"]
    specs, _ = jobs_fn(n_jobs, seed=seed, slots=span, slot_seconds=3600.0, options={})
    specs = [dataclasses.replace(s, workload="softmax", hparams='{"dataset": "digits"}')
             for s in specs]  # what a submission must name (never trained: simulated)
    return specs, cluster_fn(seed=seed, slot_seconds=3600.0)


def run_cell(cell: dict[str, Any]) -> dict[str, Any]:
    """One service run: ``cell`` has jobs, seed, span, horizon, reality (label), policy,
    oracle (bool). Returns its row (:data:`COLUMNS`)."""
    c0 = time.process_time()
    logging.getLogger("ray_cluster").setLevel(logging.ERROR)  # no line per re-statement
    label = cell["reality"]
    reality = dataclasses.replace(dict(REALITIES)[label], seed=cell["seed"])
    specs, cluster = _scenario(cell["jobs"], cell["seed"], cell["span"])
    if cell["oracle"]:
        specs = oracle_specs(specs, RealityExecutor(reality))
        reality = dataclasses.replace(reality, rate=1.0, sigma_job=0.0)
    cfg = ServiceConfig(policy=cell["policy"], slot_seconds=3600.0, horizon=cell["horizon"],
                        history=tuple(specs))
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # the journal in memory
    with tempfile.TemporaryDirectory(dir=shm) as tmp:
        svc = service(Path(tmp) / "svc", cfg, cluster, reality.executor(),
                      {"capture_s": 0.0, "plan_s": 0.0})
        drive(svc, specs, cell["horizon"])
        s = summarize(svc.loop.result())
        svc.close()
    row = {k: cell[k] for k in ("jobs", "seed", "reality", "policy", "oracle", "horizon")}
    row.update({k: s[k] for k in ("promised", "kept", "restated", "missed", "admitted",
                                  "unfinished", "dropped", "wasted_ws", "background_ws")})
    row["utility"] = s["total_utility"]
    row["cpu_s"] = time.process_time() - c0
    return row


def _cells(jobs: Sequence[int], seeds: Sequence[int], labels: Sequence[str],
           policies: Sequence[str], factor: float, span: int | None,
           oracle_too: bool = True) -> list[dict[str, Any]]:
    """Every run, the costliest first (more jobs, then oasis-rp, then the real reality). A
    reality whose lasting part is exact (rate 1, no per-job factor) is its own oracle;
    ``oracle_too`` False: no oracle runs."""
    out = []
    for n in jobs:
        arrive = span or max(1, n // JOBS_PER_SLOT)
        for label in labels:
            for oracle in (False, True) if _lasting(label) and oracle_too else (False,):
                out += [{"jobs": n, "seed": s, "span": arrive,
                         "horizon": round(factor * arrive), "reality": label,
                         "policy": p, "oracle": oracle} for p in policies for s in seeds]
    return sorted(out, key=lambda c: (-c["jobs"], c["policy"] != "oasis-rp", c["oracle"]))


def _lasting(label: str) -> bool:
    """True if the reality has a lasting departure (a rate or a per-job factor) an oracle
    can be told; else the real run is its own oracle."""
    r = dict(REALITIES)[label]
    return r.rate != 1.0 or r.sigma_job > 0


def _table(rows: list[dict[str, Any]], labels: Sequence[str]) -> list[str]:
    """Markdown: one line per (jobs, reality, policy), figures summed over seeds."""
    head = ("| jobs | reality | policy | utility | oracle | ratio (min seed) | promised | "
            "kept % | re-stated | missed | admitted | unfinished | dropped | wasted_ws | "
            "background_ws |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    keys = sorted({(r["jobs"], r["reality"], r["policy"]) for r in rows},
                  key=lambda k: (k[0], labels.index(k[1]), k[2]))
    for n, label, policy in keys:
        real = [r for r in rows if (r["jobs"], r["reality"], r["policy"], r["oracle"])
                == (n, label, policy, False)]
        orc = {r["seed"]: r for r in rows if (r["jobs"], r["reality"], r["policy"],
                                              r["oracle"]) == (n, label, policy, True)}
        if not orc and _lasting(label):  # run without its oracle
            orc = {r["seed"]: dict(r, utility=float("nan")) for r in real}
        orc = orc or {r["seed"]: r for r in real}  # exact lasting part: its own oracle
        if not real or set(orc) != {r["seed"] for r in real}:
            continue
        u = sum(r["utility"] for r in real)
        uo = sum(orc[r["seed"]]["utility"] for r in real)
        worst = min((r["utility"] / orc[r["seed"]]["utility"]
                     if orc[r["seed"]]["utility"] > 0 else float("nan")) for r in real)

        def tot(k: str, rs: list[dict[str, Any]] = real) -> float:
            return sum(r[k] for r in rs)

        kept = f"{100 * tot('kept') / tot('promised'):.1f}" if tot("promised") else "-"
        lines.append(
            f"| {n} | {label} | {policy} | {u:.1f} | {uo:.1f} | "
            f"{u / uo if uo else float('nan'):.3f} ({worst:.3f}) | {tot('promised'):.0f} | "
            f"{kept} | {tot('restated'):.0f} | {tot('missed'):.0f} | {tot('admitted'):.0f} | "
            f"{tot('unfinished'):.0f} | {tot('dropped'):.0f} | {tot('wasted_ws'):.1f} | "
            f"{tot('background_ws'):.1f} |")
    return lines


#: how BENCHMARKS names each reality
NAMES = {"R=1 sj=0.1 ss=0.1 st=0.5": "σ_job 0.1, start-up 0.5",
         "R=1 sj=0.2 ss=0.1 st=0.5": "σ_job 0.2, start-up 0.5",
         "R=1 sj=0.2": "σ_job 0.2 alone"}


#: resamples of :func:`ratio_interval` (fixed: the tables are reproducible to the digit)
DRAWS = 10_000


def ratio_interval(real: Sequence[float], oracle: Sequence[float],
                   level: float = 0.95) -> tuple[float, float]:
    """The paired bootstrap interval of ``sum(real) / sum(oracle)`` over seeds: the seeds
    (pairs ``real[i]``, ``oracle[i]``) drawn with replacement :data:`DRAWS` times from a
    fixed generator, the ratio of sums of each draw, its central ``level`` quantiles. Five
    seeds tell a ratio only to within this interval. O(DRAWS seeds)."""
    r, o = np.asarray(real, dtype=float), np.asarray(oracle, dtype=float)
    pick = np.random.default_rng(0).integers(0, r.size, size=(DRAWS, r.size))
    ratios = r[pick].sum(axis=1) / o[pick].sum(axis=1)
    tail = (1.0 - level) / 2.0
    return float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1.0 - tail))


def summary(rows: list[dict[str, Any]], jobs: int = 200) -> list[str]:
    """BENCHMARKS' tables of ``jobs``-job cells: per reality, oasis-rp's and oasis's utility
    against their oracles (worst seed), promises kept (re-stated), unfinished and the
    worker-slots of jobs never completed; then each other policy at R=0.9 and at σ_job 0.2
    with start-up. Figures summed over the seeds a row has."""
    labels = [label for label, _ in REALITIES]

    def cells(label: str, policy: str, oracle: bool) -> dict[int, dict[str, Any]]:
        return {r["seed"]: r for r in rows if (r["jobs"], r["reality"], r["policy"],
                                               r["oracle"]) == (jobs, label, policy, oracle)}

    def ours(label: str, policy: str, waste: bool) -> list[str]:
        real = cells(label, policy, False)
        orc = cells(label, policy, True) if _lasting(label) else real
        u = sum(r["utility"] for r in real.values())
        if _lasting(label):
            uo = sum(orc[k]["utility"] for k in real)
            worst = min(real[k]["utility"] / orc[k]["utility"] for k in real)
            low, high = ratio_interval([real[k]["utility"] for k in real],
                                       [orc[k]["utility"] for k in real])
            head = f"{u:,.0f} / {uo:,.0f} = {u / uo:.3f} ({worst:.2f}; {low:.2f}–{high:.2f})"
        else:
            head = f"{u:,.0f} (its own)"
        kept = sum(r["kept"] for r in real.values())
        promised = sum(r["promised"] for r in real.values())
        stated = sum(r["restated"] for r in real.values())
        unfinished = sum(r["unfinished"] for r in real.values())
        wasted = sum(r["wasted_ws"] for r in real.values())
        return [head, f"{100 * kept / promised:.1f} ({stated})",
                f"{unfinished} / {wasted:,.0f}" if waste else f"{unfinished}"]

    out = ["| reality | oasis-rp: utility / oracle (worst seed; 95% over seeds) | kept % "
           "(re-stated) | unfinished | oasis: utility / oracle (worst seed; 95% over seeds) | "
           "kept % (re-stated) | "
           "unfinished / wasted_ws |", "|---|---|---|---|---|---|---|"]
    for label in labels:
        if cells(label, "oasis-rp", False) and cells(label, "oasis", False):
            out.append("| " + " | ".join([NAMES.get(label, label),
                                          *ours(label, "oasis-rp", False),
                                          *ours(label, "oasis", True)]) + " |")
    pair = ("R=0.9", "R=1 sj=0.2 ss=0.1 st=0.5")
    others = sorted({r["policy"] for r in rows if r["jobs"] == jobs}
                    - {"oasis", "oasis-rp"})
    out += ["", f"| policy | {pair[0]}: utility, unfinished / admitted, wasted_ws | "
                f"{NAMES[pair[1]]}: the same |", "|---|---|---|"]
    for policy in others:
        parts = []
        for label in pair:
            real = cells(label, policy, False).values()
            parts.append(f"{sum(r['utility'] for r in real):,.0f}, "
                         f"{sum(r['unfinished'] for r in real)} / "
                         f"{sum(r['admitted'] for r in real)}, "
                         f"{sum(r['wasted_ws'] for r in real):,.0f}")
        out.append(f"| {policy} | {parts[0]} | {parts[1]} |")
    return out


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(str(row[k]) for k in ("jobs", "seed", "reality", "policy", "oracle",
                                       "horizon"))


def read_cells(path: Path) -> list[dict[str, Any]]:
    """The rows of an earlier cells CSV, typed as :func:`run_cell` returns them."""
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        for k in ("jobs", "seed", "horizon", "promised", "kept", "restated", "missed",
                  "admitted", "unfinished", "dropped"):
            r[k] = int(r[k])
        for k in ("utility", "wasted_ws", "background_ws", "cpu_s"):
            r[k] = float(r[k])
        r["oracle"] = r["oracle"] == "True"
    return rows


def _write_cells(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    tmp.replace(path)


def _ints(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b) + 1)) if b else [int(a)]
    return out


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--jobs", type=_ints, default=[200, 1000], help="e.g. 200,1000")
    p.add_argument("--seeds", type=_ints, default=list(range(5)), help="e.g. 0-4")
    p.add_argument("--policies", default="oasis,oasis-rp")
    p.add_argument("--realities", default=None,
                   help="rows by label, ';'-separated (default: all): " +
                        "; ".join(label for label, _ in REALITIES))
    p.add_argument("--span", type=int, default=None,
                   help=f"arrival span in slots (default: jobs / {JOBS_PER_SLOT})")
    p.add_argument("--horizon-factor", type=float, default=3.0,
                   help="horizon = this x the arrival span (default 3)")
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--quick", action="store_true",
                   help="200 jobs, seeds 0-1, rows " + "; ".join(QUICK))
    p.add_argument("--no-oracle", action="store_true",
                   help="skip the oracle runs (the table's oracle and ratio read nan)")
    p.add_argument("--summary", action="store_true",
                   help="print BENCHMARKS' tables of the cells CSV for the first --jobs "
                        "size and run nothing")
    p.add_argument("--stem", default=None,
                   help="write results/STEM.md and results/STEM_cells.csv (default: "
                        "robustness, or robustness_quick with --quick): other seeds or "
                        "settings without touching the committed cells")
    p.add_argument("--resume", action="store_true",
                   help="keep every cell of the cells CSV (the table shows them all) and "
                        "run only the cells asked for that it lacks")
    args = p.parse_args(argv)
    labels = [label for label, _ in REALITIES]
    chosen = args.realities.split(";") if args.realities else labels
    if args.quick:
        args.jobs, args.seeds, chosen = [200], [0, 1], list(QUICK)
    unknown = [c for c in chosen if c not in labels]
    if unknown:
        p.error(f"unknown reality {unknown[0]!r}")
    policies = [x.strip() for x in args.policies.split(",") if x.strip()]
    cells = _cells(args.jobs, args.seeds, chosen, policies, args.horizon_factor, args.span,
                   oracle_too=not args.no_oracle)
    stem = args.stem or ("robustness_quick" if args.quick else "robustness")
    if not stem or any(c in stem for c in "/\\") or stem.startswith("."):
        p.error(f"--stem: expected a file name stem, got {stem!r}")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{stem}_cells.csv"
    if args.summary:
        print("\n".join(summary(read_cells(path), args.jobs[0])))
        return
    wanted = {_key(c) for c in cells}
    rows = read_cells(path) if args.resume else []  # every cell kept, asked for or not
    done = {_key(r) for r in rows} & wanted
    cells = [c for c in cells if _key(c) not in done]
    print(f"{len(cells)} service runs on {args.processes} processes ({len(done)} kept)",
          file=sys.stderr)
    t0 = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(args.processes) as pool:
        for i, row in enumerate(pool.imap_unordered(run_cell, cells), 1):
            rows.append(row)
            _write_cells(path, rows)
            print(f"[{i}/{len(cells)}] {row['jobs']} jobs seed {row['seed']} "
                  f"{row['reality']} {row['policy']}{' oracle' if row['oracle'] else ''}: "
                  f"utility {row['utility']:.1f}, kept {row['kept']}/{row['promised']}, "
                  f"unfinished {row['unfinished']} ({row['cpu_s']:.1f} s)",
                  file=sys.stderr, flush=True)
    rows.sort(key=lambda r: (r["jobs"], labels.index(r["reality"]), r["policy"], r["oracle"],
                             r["seed"]))
    _write_cells(path, rows)
    cmd = "python benchmarks/bench_robustness.py " + shlex.join(sys.argv[1:] if argv is None
                                                               else argv)
    text = [f"`{cmd.strip()}` ({time.perf_counter() - t0:.0f} s wall for {len(cells)} "
            f"cells, {sum(r['cpu_s'] for r in rows):.0f} CPU s in all; seeds "
            f"{','.join(map(str, args.seeds))}, horizon {args.horizon_factor:g}x the arrival "
            "span; figures summed over seeds, ratio = utility / oracle utility):", "",
            *_table(rows, labels)]
    tmp = RESULTS / f"{stem}.md.tmp"
    tmp.write_text("\n".join(text) + "\n")
    tmp.replace(RESULTS / f"{stem}.md")
    print("\n".join(text))


if __name__ == "__main__":
    main()
