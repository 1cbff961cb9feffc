"""Every policy side by side on the oasis-paper scenario and on ElasticFlow traces.

For each trace: total utility, jobs completed, mean and p99 completion time (JCT, slots, over
completed jobs), mean queueing time (slots from arrival to first workers, over jobs that got
any), GPU utilisation of the worker pool, training efficiency (mean fastest/duration over
completed jobs, :func:`psched.results.metrics.training_figures`) and decision time per event (p50,
p99 ms).
Then the elastic MIP allocator against its two greedy baselines on the same trace: queueing
time reduction and training efficiency gain, beside the paper's "up to 32%" and "up to 24%".

Rows are appended to ``--csv`` as they are measured (a long run loses nothing); the markdown
tables of everything in that file (the last row of each trace and policy) go to ``--md``.

    python benchmarks/rivals_tables.py --traces oasis-100,oasis-200,oasis-300,oasis-400,\\
        ef-cluster10,ef-195job --csv benchmarks/results/rivals.csv \\
        --md benchmarks/results/rivals.md
"""

from __future__ import annotations

import argparse
import csv
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from psched.core.horizon import trace_horizon
from psched.core.model import Cluster, JobSpec
from psched.core.simulator import simulate
from psched.policies import available_policies, make_policy
from psched.results.metrics import summarize, training_figures
from psched.traces.clusters import default_cluster_for_trace
from psched.traces.detect import load_any
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

#: the ElasticFlow traces shipped with the repository (``traces/elasticflow``, MIT)
EF_DIR = str(Path(__file__).resolve().parents[1] / "traces" / "elasticflow"
             / "augmented")
COLUMNS = ("trace", "policy", "utility", "completed", "jobs", "jct_mean", "jct_p99",
           "queueing_mean", "gpu_util", "train_eff", "dec_p50_ms", "dec_p99_ms", "wall_s")


def load(trace: str, seed: int) -> tuple[list[JobSpec], Cluster, int, str]:
    """Jobs, cluster, horizon and a description of ``oasis-<n>`` or ``ef-<file>``."""
    if trace.startswith("oasis-"):
        n = int(trace.split("-", 1)[1])
        specs, _ = oasis_paper_jobs(n, seed=seed, slots=300)
        return specs, oasis_paper_cluster(seed=seed), 300, f"oasis-paper, {n} jobs, T = 300"
    name = trace.split("-", 1)[1]
    path = os.path.join(EF_DIR, f"{name}.csv")
    specs = load_any(path, slot_seconds=3600.0, seed=seed)
    cluster = default_cluster_for_trace(specs, slot_seconds=3600.0)
    horizon = trace_horizon(specs, 3600.0, None)
    n_w = sum(s.pool.value == "worker" for s in cluster.servers)
    return specs, cluster, horizon, (f"ElasticFlow {name}.csv, {len(specs)} jobs, T = {horizon}"
                                     f" slots of 1 h, default cluster ({n_w} worker servers)")


def measure(trace: str, policies: Sequence[str], seed: int, out: Any,
            mip_limit: float | None = None) -> list[dict[str, Any]]:
    specs, cluster, horizon, desc = load(trace, seed)
    rows = []
    for name in policies:
        opts: dict[str, Any] = {}
        label = name
        if name == "elastic-mip" and mip_limit is not None:
            opts, label = {"time_limit_s": mip_limit}, f"elastic-mip@{mip_limit:g}s"
        t0 = time.perf_counter()
        res = simulate(specs, cluster, make_policy(name, **opts), horizon, seed=seed)
        s = summarize(res)
        row = {"trace": trace, "policy": label, "utility": s["total_utility"],
               "completed": s["completed"], "jobs": s["jobs"], "jct_mean": s["jct_mean"],
               "jct_p99": s["jct_p99"], "queueing_mean": s["queueing_mean"],
               "gpu_util": s["utilization"].get("worker", {}).get("gpu"),
               "train_eff": training_figures(res)["training_efficiency"],
               "dec_p50_ms": s["decision_ms_p50"], "dec_p99_ms": s["decision_ms_p99"],
               "wall_s": time.perf_counter() - t0, "desc": desc}
        rows.append(row)
        if out is not None:
            out.writerow([row[c] for c in COLUMNS])
    return rows


def fmt(x: Any, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def table(rows: list[dict[str, Any]]) -> str:
    lines = [f"**{rows[0]['desc']}**", "",
             "| policy | utility | done | JCT mean | JCT p99 | queue mean | GPU util | "
             "train eff | dec p50 ms | dec p99 ms |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['policy']} | {fmt(r['utility'])} | {r['completed']}/{r['jobs']} | "
                     f"{fmt(r['jct_mean'])} | {fmt(r['jct_p99'])} | {fmt(r['queueing_mean'])}"
                     f" | {fmt(r['gpu_util'], '.2f')} | {fmt(r['train_eff'], '.3f')} | "
                     f"{fmt(r['dec_p50_ms'])} | {fmt(r['dec_p99_ms'])} |")
    return "\n".join(lines)


def mip_vs_greedy(all_rows: dict[str, list[dict[str, Any]]]) -> str:
    lines = ["| trace | MIP queue | fill queue | gain queue | queue cut vs stronger greedy | "
             "MIP eff | fill eff | gain eff | eff gain vs stronger greedy |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for trace, rows in all_rows.items():
        by = {r["policy"]: r for r in rows}
        if not {"elastic-mip", "greedy-fill", "greedy-gain"} <= set(by):
            continue
        mip, fill, gain = by["elastic-mip"], by["greedy-fill"], by["greedy-gain"]
        strong = max((fill, gain), key=lambda r: r["train_eff"] or 0.0)
        q_cut = (1 - mip["queueing_mean"] / strong["queueing_mean"]
                 if strong["queueing_mean"] else None)
        e_gain = mip["train_eff"] / strong["train_eff"] - 1 if strong["train_eff"] else None
        lines.append(f"| {trace} | {fmt(mip['queueing_mean'], '.2f')} | "
                     f"{fmt(fill['queueing_mean'], '.2f')} | {fmt(gain['queueing_mean'], '.2f')}"
                     f" | {fmt(q_cut and 100 * q_cut, '+.0f')}% ({strong['policy']}) | "
                     f"{fmt(mip['train_eff'], '.3f')} | {fmt(fill['train_eff'], '.3f')} | "
                     f"{fmt(gain['train_eff'], '.3f')} | {fmt(e_gain and 100 * e_gain, '+.0f')}% |")
    lines.append("| paper (Hu et al. 2021, best case) | | | | up to 32% | | | | up to 24% |")
    return "\n".join(lines)


def from_csv(path: str, seed: int) -> dict[str, list[dict[str, Any]]]:
    """Rows of a results file by trace, the last measurement of each (trace, policy) kept."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    with open(path, newline="") as f:
        for raw in csv.DictReader(f):
            row: dict[str, Any] = {k: (None if v == "" else v) for k, v in raw.items()}
            for k in COLUMNS[2:]:
                if row[k] is not None:
                    row[k] = float(row[k]) if k not in ("completed", "jobs") else int(row[k])
            latest[row["trace"], row["policy"]] = row
    out: dict[str, list[dict[str, Any]]] = {}
    for (trace, _), row in latest.items():
        out.setdefault(trace, []).append(row)
    for trace, rows in out.items():
        desc = load(trace, seed)[3]
        for row in rows:
            row["desc"] = desc
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="oasis-100,oasis-200,oasis-300,oasis-400,"
                    "ef-cluster10,ef-195job")
    ap.add_argument("--policies", default="all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--csv", help="append rows here as they are measured")
    ap.add_argument("--md", help="write the markdown tables here")
    ap.add_argument("--mip-time-limit", type=float,
                    help="elastic-mip decision budget, s (rows labelled elastic-mip@<s>s)")
    args = ap.parse_args()
    policies = available_policies() if args.policies == "all" else args.policies.split(",")
    handle = open(args.csv, "a", newline="") if args.csv else None  # noqa: SIM115
    writer = csv.writer(handle) if handle else None
    if writer is not None and handle is not None and handle.tell() == 0:
        writer.writerow(COLUMNS)
    results: dict[str, list[dict[str, Any]]] = {}
    for trace in args.traces.split(","):
        results[trace] = measure(trace, policies, args.seed, writer, args.mip_time_limit)
        if handle is not None:
            handle.flush()
        print(table(results[trace]) + "\n", flush=True)
    if handle is not None:
        handle.close()
        results = from_csv(args.csv, args.seed)  # every trace in the file, last row wins
    text = "\n\n".join(table(r) for r in results.values()) + "\n\n" + mip_vs_greedy(results)
    print(mip_vs_greedy(results))
    if args.md:
        with open(args.md, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
