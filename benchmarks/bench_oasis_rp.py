"""oasis-rp against oasis on the oasis-paper scenario: utility, completions, decision CPU time.

Every policy variant runs the same jobs (``oasis-paper``, T = 300) in the simulator; the CPU
time (``time.process_time``) of every decision is recorded, re-packing included: per job, its
``on_arrival`` call and, for a job held and decided with its slot's batch, its own decision
in ``admit_held`` plus its share of that call's common work (the per-decision figure), and
the whole ``admit_held`` call that decided it (the answer-wait figure); see :class:`_Timed`.
Separately the CPU time of ``plan`` calls (slot boundaries: pull-forward and
reconciliation). Each row checks that the per-decision figures (plus any boundary work
decided for no job) add up to the CPU of all decision calls. ``oasis`` runs in the same
process as the baseline. Variants are ``name[:opt=value...]``, options going to
``make_policy``; ``--levers`` runs oasis-rp with each option that changes decisions moved
off its default.

    nice -n 5 python benchmarks/bench_oasis_rp.py --jobs 400 --seeds 0,1,2 \\
        --variants oasis,oasis-rp,oasis-rp:price_source=hindsight
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

from psched.core.policy import Policy  # noqa: E402
from psched.core.simulator import simulate  # noqa: E402
from psched.policies import make_policy  # noqa: E402
from psched.policies.oasis_rp import OasisRpPolicy  # noqa: E402
from psched.policies.oasis_rp.observer import Observer  # noqa: E402
from psched.policies.options import policy_variant  # noqa: E402
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs  # noqa: E402

#: oasis-rp's options that change decisions, each moved off its default
LEVERS = ("price_source=hindsight", "density_floor=0", "commit_margin=1", "promise_rtol=0",
          "repack_gap=1")


def lever_variants() -> list[str]:
    """oasis, oasis-rp with its defaults, and oasis-rp with each of :data:`LEVERS`."""
    return ["oasis", "oasis-rp", *(f"oasis-rp:{k}" for k in LEVERS)]


def parse_variant(variant: str) -> tuple[str, dict[str, Any]]:
    """``name:opt=value:...`` -> (name, options), typed and checked by the policy's signature
    (:func:`psched.policies.options.policy_variant`)."""
    return policy_variant(variant, field="--variants")


class _Timed:
    """Wraps a policy; records CPU ms of every arrival's decision and of every ``plan`` call.

    Two figures per job. **Per decision** (the issue's metric): its ``on_arrival`` call, plus,
    when the policy holds it (``Decision.hold``: ``batch``, ``soft``) and decides it at a slot
    boundary (``admit_held``), its own decision there (its search, re-pack, promise: the
    policy's ``observer``) and an even share of that call's common work (the call's CPU
    less the decisions probed in it: ordering, reservations upkeep), shared by the jobs the
    call decided (probed) or answered. **Answer wait**: its ``on_arrival`` call plus the whole
    ``admit_held`` calls that decided or answered it (its answer waited for all of them: a
    ``soft`` reservation is decided with its batch and answered when it starts). A call that
    decides and answers no job is ``unshared``; so the per-decision figures plus ``unshared``
    add up to the CPU of every ``on_arrival`` and ``admit_held`` call (:meth:`conserved`)."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = inner.name
        self.commits_on_arrival = inner.commits_on_arrival
        self.plan_ms: list[float] = []
        self.per_ms: dict[str, float] = {}  # job -> per-decision CPU ms
        self.wait_ms: dict[str, float] = {}  # job -> answer-wait CPU ms
        self.calls_ms = 0.0  # every on_arrival and admit_held call
        self.unshared_ms = 0.0
        self._own: dict[str, float] = {}  # this admit_held call: job -> own decision ms
        if getattr(inner, "admit_held", None) is not None:
            self.admit_held = self._admit_held
        if isinstance(inner, OasisRpPolicy):
            probe = self._probe

            class Seen(Observer):
                def decided(self, job_id: str, cpu_s: float) -> None:
                    probe(job_id, cpu_s)

            inner.observer = Seen()

    def __getattr__(self, name: str) -> Any:  # every other hook is the policy's own
        return getattr(self.inner, name)

    def start(self, ctx: Any) -> None:
        self.inner.start(ctx)

    def _probe(self, job_id: str, cpu_s: float) -> None:
        self._own[job_id] = self._own.get(job_id, 0.0) + cpu_s * 1e3

    def on_arrival(self, job: Any, view: Any) -> Any:
        c0 = time.process_time()
        out = self.inner.on_arrival(job, view)
        ms = (time.process_time() - c0) * 1e3
        self.calls_ms += ms
        self.per_ms[job.job_id] = ms
        self.wait_ms[job.job_id] = ms
        return out

    def _admit_held(self, jobs: Any, view: Any) -> Any:
        self._own = {}
        c0 = time.process_time()
        out = self.inner.admit_held(jobs, view)  # type: ignore[attr-defined]
        ms = (time.process_time() - c0) * 1e3
        self.calls_ms += ms
        own, self._own = self._own, {}
        answered = [j for j, d in out.items() if not d.hold]
        shared = list(own) + [j for j in answered if j not in own]
        if not shared:
            self.unshared_ms += ms
            return out
        share = (ms - sum(own.values())) / len(shared)
        for j in shared:
            self.per_ms[j] += own.get(j, 0.0) + share
            self.wait_ms[j] += ms
        return out

    def conserved(self) -> float:
        """Per-decision ms plus unshared ms, less the CPU of every call (0 up to rounding)."""
        return sum(self.per_ms.values()) + self.unshared_ms - self.calls_ms

    def plan(self, view: Any) -> Any:
        c0 = time.process_time()
        out = self.inner.plan(view)
        self.plan_ms.append((time.process_time() - c0) * 1e3)
        return out

    def report(self) -> dict[str, Any]:
        return self.inner.report()


def _pct(values: Any, q: float) -> float:
    return float(np.percentile(np.fromiter(values, float), q)) if values else 0.0


def measure(variant: str, n_jobs: int, seed: int) -> dict[str, Any]:
    """One simulation of ``variant``; utility, completions and CPU times."""
    specs, _ = oasis_paper_jobs(n_jobs, seed=seed, slots=300)
    cluster = oasis_paper_cluster(seed=seed)
    name, kw = parse_variant(variant)
    if name.startswith("oasis"):
        kw.setdefault("certificate", False)
    pol = _Timed(make_policy(name, **kw))
    c0 = time.process_time()
    res = simulate(specs, cluster, pol, 300)
    cpu = time.process_time() - c0
    recs = res.records.values()
    per, wait, plan = pol.per_ms.values(), pol.wait_ms.values(), pol.plan_ms
    broken = sum(1 for r in recs if r.promised is not None
                 and (r.completion is None or r.completion > r.promised))
    return {"variant": variant, "jobs": n_jobs, "seed": seed,
            "utility": sum(r.utility for r in recs),
            "completed": sum(r.completion is not None for r in recs),
            "admitted": sum(r.admitted for r in recs),
            "arr_p50": _pct(per, 50), "arr_p99": _pct(per, 99),
            "wait_p50": _pct(wait, 50), "wait_p99": _pct(wait, 99),
            "plan_p50": _pct(plan, 50), "plan_p99": _pct(plan, 99),
            "decide_s": sum(per) / 1e3, "unshared_s": pol.unshared_ms / 1e3,
            "calls_s": pol.calls_ms / 1e3, "plan_s": sum(plan) / 1e3,
            "conserved_ms": pol.conserved(), "cpu_s": cpu, "broken": broken}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="400")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--variants", default="oasis,oasis-rp")
    ap.add_argument("--levers", action="store_true", help="oasis-rp option by option")
    args = ap.parse_args()
    variants = lever_variants() if args.levers else args.variants.split(",")
    print(f"load {os.getloadavg()[0]:.2f}")
    print("| variant | jobs | seed | utility | completed | admitted"
          " | per-decision CPU p50 / p99 ms | answer-wait CPU p50 / p99 ms"
          " | boundary plan CPU p50 / p99 ms | decisions + unshared = calls s"
          " | plan s | run CPU s | promises broken |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in (int(x) for x in args.jobs.split(",")):
        for seed in (int(x) for x in args.seeds.split(",")):
            for v in variants:
                m = measure(v, n, seed)
                assert abs(m["conserved_ms"]) < 1e-6 * max(1.0, m["calls_s"] * 1e3), m
                print(f"| `{v}` | {n} | {seed} | {m['utility']:.1f} | {m['completed']} | "
                      f"{m['admitted']} | {m['arr_p50']:.2f} / {m['arr_p99']:.1f} | "
                      f"{m['wait_p50']:.2f} / {m['wait_p99']:.1f} | "
                      f"{m['plan_p50']:.2f} / {m['plan_p99']:.1f} | "
                      f"{m['decide_s']:.3f} + {m['unshared_s']:.3f} = {m['calls_s']:.3f} | "
                      f"{m['plan_s']:.3f} | {m['cpu_s']:.2f} | {m['broken']} |", flush=True)
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
