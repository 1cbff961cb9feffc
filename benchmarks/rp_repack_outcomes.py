"""Where oasis-rp's re-packs end, and what each ending costs: a tally by stage.

Runs ``oasis-rp[:opt=value...]`` on a trace of ``bench_oasis_rp_scale.py`` (``philly-<n>``,
``ef-<name>``) until ``--max-cpu-s`` (the run stops at the next arrival past it) and records,
for every re-pack, the sequence of its stages and its CPU seconds:

- ``S+`` / ``S-``: the newcomer's search (candidates out of the book) finds a schedule / none;
- ``RK+`` / ``RK-``: the first order (the newcomer placed, each candidate keeps its plan or is
  searched within its promise) fits every candidate / stops at one that finds none;
- ``RL+`` / ``RL-``: the second order (each candidate re-planned as late as its promise
  allows) fits every candidate / stops at one;
- ``pulls``: the moved candidates were pulled forward (then the gain decided).

One line per sequence and outcome (``kept`` or ``fail``), dearest first: count, CPU s, mean
candidates. Decisions are those of the plain run (the wrappers only time and record).

    python benchmarks/rp_repack_outcomes.py --trace philly-80000 --max-cpu-s 120
    python benchmarks/rp_repack_outcomes.py --trace ef-cluster04 --max-cpu-s 60
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_oasis_rp import parse_variant
from bench_oasis_rp_scale import load

from psched.policies import make_policy
from psched.policies.oasis_rp import repack as repack_module
from psched.simulator import simulate


class _Stop(Exception):
    """The run used up its CPU budget."""


def tally(pol: Any) -> dict[str, list[float]]:
    """Wrap the re-pack stages (:mod:`psched.policies.oasis_rp.repack`'s functions, and the
    run state's admission search); the tally fills as it runs: sequence -> [count, CPU s,
    candidates]."""
    out: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0])
    cur: list[list[str]] = []
    refit, pull, cands_fn = repack_module._refit, repack_module.pull_one, repack_module._repack

    def traced(st: Any) -> None:
        if "search_new" in vars(st):
            return
        search_new = st.search_new

        def s(*a: Any, **k: Any) -> Any:
            got = search_new(*a, **k)
            if cur:
                cur[-1].append("S+" if got.schedule else "S-")
            return got

        st.search_new = s

    def r(*a: Any, **k: Any) -> Any:
        got = refit(*a, **k)
        if cur:
            cur[-1].append(("RK" if k.get("keep_old") else "RL") + ("+" if got is not None
                                                                     else "-"))
        return got

    def p(*a: Any, **k: Any) -> Any:
        if cur and (not cur[-1] or cur[-1][-1] != "pulls"):
            cur[-1].append("pulls")
        return pull(*a, **k)

    def rc(st: Any, job: Any, t: int, base: float, cands: list[str], defer: bool) -> Any:
        traced(st)
        cur.append([])
        c0 = time.process_time()
        got = cands_fn(st, job, t, base, cands, defer)
        key = ("kept " if got.schedule else "fail ") + " ".join(cur.pop())
        row = out[key]
        row[0] += 1
        row[1] += time.process_time() - c0
        row[2] += len(cands)
        return got

    repack_module._refit, repack_module.pull_one, repack_module._repack = r, p, rc
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="philly-80000")
    ap.add_argument("--variant", default="oasis-rp")
    ap.add_argument("--max-cpu-s", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    specs, cluster, horizon = load(args.trace, args.seed)
    name, kw = parse_variant(args.variant)
    kw.setdefault("certificate", False)
    pol = make_policy(name, **kw)
    out = tally(pol)
    seen = [0]
    inner = pol.on_arrival
    c0 = time.process_time()

    def on_arrival(*a: Any) -> Any:
        if time.process_time() - c0 > args.max_cpu_s:
            raise _Stop
        seen[0] += 1
        return inner(*a)

    pol.on_arrival = on_arrival
    try:
        simulate(specs, cluster, pol, horizon, seed=args.seed)
        done = True
    except _Stop:
        done = False
    print(f"{args.trace} {args.variant}: {seen[0]} arrivals, finished {done},"
          f" {time.process_time() - c0:.1f} CPU s, load {os.getloadavg()[0]:.2f}")
    print("| re-pack stages | re-packs | CPU s | mean candidates |\n|---|---:|---:|---:|")
    for key, (n, cpu, cands) in sorted(out.items(), key=lambda x: -x[1][1]):
        print(f"| {key} | {int(n)} | {cpu:.2f} | {cands / n:.1f} |")
    print({k: v for k, v in pol.report().items() if isinstance(v, int) and v})


if __name__ == "__main__":
    main()
