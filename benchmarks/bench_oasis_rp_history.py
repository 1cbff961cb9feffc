"""oasis-rp with prices (and the density floor) estimated from a HISTORY trace, not hindsight.

``oasis`` prices with U and L computed from the whole trace ("hindsight", the paper's "known
from past experience"); ``oasis-rp`` with ``price_source="hindsight"`` does the same, its
density floor the trace's clearing density, an oracle. A live service has no hindsight: it
prices from the arrivals so far (``"online"``, the default) or from a history trace
(``price_source="history"``). This benchmark runs each cell with hindsight and with history
prices (a ``price_source`` in ``--variant`` replaces hindsight in the first column) and
prints utility per seed (oasis-paper, ElasticFlow) and OPT / policy over the Fig. 5
instances (OPT cached in ``results/policy_table_cells.csv``). The history (``--history``):

``redraw``
    the same scenario drawn with another seed (``seed + 1000``). For oasis-paper and Fig. 5
    that is the same workload, other jobs; for an ElasticFlow trace the rows (arrivals, GPUs,
    run times) are the trace's own and only the mapping's draws differ (model, utility kind,
    value, decay, target): a history that knows the arrivals, so a weak test.
``split``
    for a real trace (ElasticFlow): the jobs of the first half of the trace (by arrival, the
    first ``len // 2``) are the history of the second half, which is the run (its arrivals
    shifted to start at slot 0, its horizon its own, the whole trace's cluster). The
    hindsight column is that run priced from its own jobs. What a service started halfway
    through the trace would know.

    python benchmarks/bench_oasis_rp_history.py --scenarios oasis-400,fig5 [--variant oasis-rp]
    nice -n 5 python benchmarks/bench_oasis_rp_history.py --scenarios ef-cluster10,ef-195job \\
        --history split,redraw --seeds 0,1,2,3,4 --rivals rrh,srtf,dorm
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from bench_oasis_rp import parse_variant  # noqa: E402
from policy_table import OPT, RESULTS, fig5_key, fig5_keys, read_cells  # noqa: E402
from rivals_tables import load  # noqa: E402

from psched.core.horizon import trace_horizon  # noqa: E402
from psched.core.model import Cluster, JobSpec  # noqa: E402
from psched.core.promises import broken_promises  # noqa: E402
from psched.core.simulator import simulate  # noqa: E402
from psched.policies import make_policy  # noqa: E402
from psched.traces.synth import fig5_instance  # noqa: E402

#: the history of a cell: the same scenario drawn with this much added to the seed
HISTORY_SEED_OFFSET = 1000


def _run(variant: str, specs: list[JobSpec], cluster: Cluster, horizon: int,
         history: list[JobSpec] | None, seed: int = 0) -> float:
    name, kw = parse_variant(variant)
    kw.setdefault("certificate", False)
    if history is not None:
        kw["price_source"] = "history"
    else:
        kw.setdefault("price_source", "hindsight")
    res = simulate(specs, cluster, make_policy(name, **kw), horizon, seed=seed,
                   history=history or ())
    if broken_promises(res):
        raise SystemExit(f"broken promise in {variant}")
    return float(sum(r.utility for r in res.records.values()))


def split_trace(specs: list[JobSpec]) -> tuple[list[JobSpec], list[JobSpec], int]:
    """The first half of ``specs`` by arrival (ties: trace order) as the history, the second
    half as the run, each with its arrivals shifted to start at slot 0; and the run's
    horizon (1-hour slots)."""
    order = sorted(specs, key=lambda s: s.arrival)
    half = len(order) // 2
    head, tail = order[:half], order[half:]

    def shifted(part: list[JobSpec]) -> list[JobSpec]:
        t0 = part[0].arrival
        return [dataclasses.replace(s, arrival=s.arrival - t0) for s in part]

    run = shifted(tail)
    return shifted(head), run, trace_horizon(run, 3600.0)


def _rival(name: str, specs: list[JobSpec], cluster: Cluster, horizon: int,
           seed: int) -> float:
    """A rival's utility, simulated with the cell's seed as ``policy_table.py`` does (RRH
    and FIFO draw their requests from it)."""
    res = simulate(specs, cluster, make_policy(name), horizon, seed=seed)
    return float(sum(r.utility for r in res.records.values()))


def trace_rows(scenario: str, seeds: list[int], variant: str, how: str,
               rivals: list[str]) -> None:
    for seed in seeds:
        specs, cluster, horizon, _ = load(scenario, seed)
        if how == "split":
            hist, specs, horizon = split_trace(specs)
        else:
            hist, _, _, _ = load(scenario, seed + HISTORY_SEED_OFFSET)
        t0 = time.process_time()
        a = _run(variant, specs, cluster, horizon, None, seed)
        b = _run(variant, specs, cluster, horizon, hist, seed)
        cpu = time.process_time() - t0
        best = max(((_rival(r, specs, cluster, horizon, seed), r) for r in rivals), default=None)
        rival = f"{best[1]} {best[0]:,.0f}" if best else "-"
        print(f"| {scenario} | {how} | {seed} | {len(specs)} | {a:,.0f} | {b:,.0f} | "
              f"{b / a - 1:+.1%} | {rival} | {cpu:.1f} |", flush=True)


def fig5_rows(variant: str, per_cell: int) -> None:
    cells = read_cells(RESULTS / "policy_table_cells.csv")
    ratios: dict[str, list[float]] = {"hindsight": [], "history": []}
    for n, prio, seed in fig5_keys(per_cell):
        key = fig5_key(n, prio, seed)
        opt = cells.get(("fig5", key, OPT))
        if opt is None:
            continue
        specs, cluster = fig5_instance(n, seed=seed, priority=prio)
        hist, _ = fig5_instance(n, seed=seed + HISTORY_SEED_OFFSET, priority=prio)
        for label, h in (("hindsight", None), ("history", hist)):
            got = _run(variant, specs, cluster, 10, h)
            ratios[label].append(opt.utility / got if got > 0 else float("inf"))
    for label, r in ratios.items():
        a = np.array(r)
        print(f"| fig5 ({len(a)} instances) | redraw | {label} | median {np.median(a):.3f} | "
              f"p90 {np.quantile(a, 0.9):.2f} | max {a.max():.2f} | | | |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default="oasis-400,fig5")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--variant", default="oasis-rp")
    ap.add_argument("--fig5-instances", type=int, default=7)
    ap.add_argument("--history", default="redraw",
                    help="redraw and/or split (ElasticFlow traces only), comma-separated")
    ap.add_argument("--rivals", default="",
                    help="policies run on each trace row too (comma-separated); the best shown")
    args = ap.parse_args()
    rivals = [r for r in args.rivals.split(",") if r]
    hows = args.history.split(",")
    if not set(hows) <= {"redraw", "split"}:
        ap.error(f"--history: redraw and/or split, got {args.history!r}")
    print("| scenario | history | seed | jobs run | hindsight | history | history / hindsight "
          "| best rival | CPU s (both) |")
    print("|---|---|---:|---:|---:|---:|---:|---|---:|")
    for sc in args.scenarios.split(","):
        for how in hows:
            if sc == "fig5":
                if how == "redraw":
                    fig5_rows(args.variant, args.fig5_instances)
            elif how == "redraw" or sc.startswith("ef-"):
                trace_rows(sc, [int(s) for s in args.seeds.split(",")], args.variant, how,
                           rivals)


if __name__ == "__main__":
    main()
