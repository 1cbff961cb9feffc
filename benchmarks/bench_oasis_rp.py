"""oasis-rp against oasis on the oasis-paper scenario: utility, completions, decision CPU time.

Every policy variant runs the same jobs (``oasis-paper``, T = 300) in the simulator; the CPU
time (``time.process_time``) of every ``on_arrival`` call is recorded (the decision per
arrival, re-packing included), and separately the CPU time of ``plan`` calls (slot
boundaries: pull-forward and reconciliation). ``oasis`` runs in the same process as the
baseline. Variants are ``name[:opt=value...]``, options going to ``make_policy``; ``--levers``
adds oasis-rp with every lever alone and all-but-one.

    python benchmarks/bench_oasis_rp.py --jobs 400 --seeds 0 --levers
    python benchmarks/bench_oasis_rp.py --jobs 100,200,300,400 --seeds 0,1,2,3,4 \\
        --variants oasis,oasis-rp,srtf
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from psched.policies import make_policy  # noqa: E402
from psched.policies.base import Policy  # noqa: E402
from psched.simulator import simulate  # noqa: E402
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs  # noqa: E402

#: oasis-rp's levers (constructor options) measured alone and all-but-one
LEVERS = ("repack", "latest_promise", "pull", "reprice")


def lever_variants() -> list[str]:
    """oasis, oasis-rp with all levers, none, each alone, and each left out."""
    off = ":".join(f"{k}=0" for k in LEVERS) + ":own_price=off:density_floor=0"
    out = ["oasis", "oasis-rp", f"oasis-rp:{off}"]
    for k in LEVERS:
        out.append("oasis-rp:" + ":".join(f"{x}={int(x == k)}" for x in LEVERS))
    for k in LEVERS:
        out.append(f"oasis-rp:{k}=0")
    return out


def _value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_variant(variant: str) -> tuple[str, dict[str, Any]]:
    """``name:opt=value:...`` -> (name, options)."""
    name, *opts = variant.split(":")
    kw = {}
    for o in opts:
        k, v = o.split("=", 1)
        kw[k] = _value(v)
    return name, kw


class _Timed:
    """Wraps a policy; records CPU ms of every arrival's decision and of every ``plan`` call.

    An arrival's decision is its ``on_arrival`` call; when the policy holds the job
    (``Decision.hold``: ``batch``, ``soft``, ``defer``) and decides it at a slot boundary
    (``admit_held``), the whole ``admit_held`` call that decided it is added: the job's
    answer waited for all of it. A held job never decided there counts its ``on_arrival``
    alone."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = inner.name
        self.commits_on_arrival = inner.commits_on_arrival
        self.arrival_ms: list[float] = []
        self.plan_ms: list[float] = []
        self._held_ms: dict[str, float] = {}  # held job -> its on_arrival ms
        if getattr(inner, "admit_held", None) is not None:
            self.admit_held = self._admit_held

    def __getattr__(self, name: str) -> Any:  # every other hook is the policy's own
        return getattr(self.inner, name)

    def start(self, ctx: Any) -> None:
        self.inner.start(ctx)

    def on_arrival(self, job: Any, view: Any) -> Any:
        c0 = time.process_time()
        out = self.inner.on_arrival(job, view)
        ms = (time.process_time() - c0) * 1e3
        if out.hold:
            self._held_ms[job.job_id] = ms
        else:
            self.arrival_ms.append(ms)
        return out

    def _admit_held(self, jobs: Any, view: Any) -> Any:
        c0 = time.process_time()
        out = self.inner.admit_held(jobs, view)
        ms = (time.process_time() - c0) * 1e3
        for job_id, decision in out.items():
            if job_id in self._held_ms and not decision.hold:
                self.arrival_ms.append(self._held_ms.pop(job_id) + ms)
        return out

    def settle(self) -> None:
        """Held jobs never decided at a boundary: their ``on_arrival`` alone."""
        self.arrival_ms.extend(self._held_ms.values())
        self._held_ms.clear()

    def plan(self, view: Any) -> Any:
        c0 = time.process_time()
        out = self.inner.plan(view)
        self.plan_ms.append((time.process_time() - c0) * 1e3)
        return out

    def report(self) -> dict[str, Any]:
        return self.inner.report()


def measure(variant: str, n_jobs: int, seed: int) -> dict[str, Any]:
    """One simulation of ``variant``; utility, completions and CPU times."""
    specs, _ = oasis_paper_jobs(n_jobs, seed=seed, slots=300)
    cluster = oasis_paper_cluster(seed=seed)
    name, kw = parse_variant(variant)
    if name.startswith("oasis"):
        kw.setdefault("certificate", False)
    pol = _Timed(make_policy(name, **kw))
    c0 = time.process_time()
    res = simulate(specs, cluster, pol, 300)  # type: ignore[arg-type]
    cpu = time.process_time() - c0
    pol.settle()
    recs = res.records.values()
    arr = np.array(pol.arrival_ms) if pol.arrival_ms else np.zeros(1)
    plan = np.array(pol.plan_ms) if pol.plan_ms else np.zeros(1)
    broken = sum(1 for r in recs if r.promised is not None
                 and (r.completion is None or r.completion > r.promised))
    return {"variant": variant, "jobs": n_jobs, "seed": seed,
            "utility": sum(r.utility for r in recs),
            "completed": sum(r.completion is not None for r in recs),
            "admitted": sum(r.admitted for r in recs),
            "arr_p50": float(np.percentile(arr, 50)), "arr_p99": float(np.percentile(arr, 99)),
            "plan_p50": float(np.percentile(plan, 50)),
            "plan_p99": float(np.percentile(plan, 99)),
            "cpu_s": cpu, "broken": broken}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="400")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--variants", default="oasis,oasis-rp")
    ap.add_argument("--levers", action="store_true", help="oasis-rp lever by lever")
    args = ap.parse_args()
    variants = lever_variants() if args.levers else args.variants.split(",")
    print(f"load {os.getloadavg()[0]:.2f}")
    print("| variant | jobs | seed | utility | completed | admitted | arrival CPU p50 / p99 ms"
          " | boundary CPU p50 / p99 ms | run CPU s | promises broken |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in (int(x) for x in args.jobs.split(",")):
        for seed in (int(x) for x in args.seeds.split(",")):
            for v in variants:
                m = measure(v, n, seed)
                print(f"| `{v}` | {n} | {seed} | {m['utility']:.1f} | {m['completed']} | "
                      f"{m['admitted']} | {m['arr_p50']:.2f} / {m['arr_p99']:.1f} | "
                      f"{m['plan_p50']:.2f} / {m['plan_p99']:.1f} | {m['cpu_s']:.1f} | "
                      f"{m['broken']} |", flush=True)
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
