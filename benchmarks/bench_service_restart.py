"""What journaling plan revisions costs the live service, and what a restart costs.

The ``oasis-paper`` scenario (jobs spread over the first ``--slots`` slots, 1-hour model
slots), run through :class:`ray_cluster.service.SchedulerService` on a simulated executor
whose reality runs at ``--rate`` of the model (``< 1``: behind, so ``oasis-rp`` re-plans),
without waiting for the wall clock. Per policy, in the same run: CPU seconds of the whole
run, of the revision captures alone (``PlanRevisions.capture``) and of the policy's own
``plan``; journal rows; then CPU seconds to restart from the journal (replay) halfway, and
whether the restarted service's later journal rows equal the uninterrupted run's (bit for
bit only when every demand is a binary fraction; the scenario's bandwidths are not, so
prices agree to ~1e-14 and near-ties may break otherwise) and how many promises it kept. An
``oasis-rp`` job may complete before its commit point, without a promise: counted apart
(``done, no promise``), as are admitted jobs that never completed.

Usage::

    python benchmarks/bench_service_restart.py --jobs 200 --policies oasis,oasis-rp
    python benchmarks/bench_service_restart.py --rate 0.9 --policies oasis-rp --commit-margin 4
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

from psched.core.executor import Executor
from psched.core.model import JobSpec
from psched.core.reality import Reality
from psched.traces.synth import SCENARIOS
from ray_cluster.service import SchedulerService, ServiceConfig

__all__ = ["drive", "run", "service"]


def service(work: Path, cfg: ServiceConfig | None, cluster: Any, executor: Executor,
            timers: dict[str, float]) -> SchedulerService:
    """The service on ``executor``, not waiting for the wall clock; CPU seconds of the
    revision captures and of the policy's ``plan`` add up in ``timers``."""
    svc = SchedulerService(work, config=cfg, cluster=cluster, executor=executor)
    svc.clock.wait_until = lambda t: None  # type: ignore[method-assign]
    capture, plan = svc.revisions.capture, svc.policy.plan

    def timed_capture(*a: Any, **k: Any) -> Any:
        c0 = time.process_time()
        try:
            return capture(*a, **k)
        finally:
            timers["capture_s"] += time.process_time() - c0

    def timed_plan(view: Any) -> Any:
        c0 = time.process_time()
        try:
            return plan(view)
        finally:
            timers["plan_s"] += time.process_time() - c0

    svc.revisions.capture = timed_capture  # type: ignore[method-assign]
    svc.policy.plan = timed_plan  # type: ignore[method-assign]
    return svc


def drive(svc: SchedulerService, specs: list[JobSpec], until: int) -> None:
    """Submit each of ``specs`` in its arrival slot and run the service to slot ``until``."""
    by_slot: dict[int, list[JobSpec]] = {}
    for s in specs:
        by_slot.setdefault(s.arrival, []).append(s)
    while svc.loop.state.t < until:
        for s in by_slot.get(svc.loop.state.t, []):
            svc.submit(s)
        svc.run_for(1)


def _rows(svc: SchedulerService) -> list[tuple]:
    return [(r.job_id, r.kind, r.slot, r.admitted, r.schedule, r.promised)
            for r in svc.journal.decisions()]


def run(policy: str, n_jobs: int, *, slots: int, rate: float, seed: int = 0,
        options: dict[str, Any] | None = None) -> dict[str, Any]:
    """One policy (with ``options``, as ``psched serve --policy-option``): the uninterrupted
    run, then a restart at ``slots // 2``."""
    jobs_fn, cluster_fn = SCENARIOS["oasis-paper"]
    specs, _ = jobs_fn(n_jobs, seed=seed, slots=slots, slot_seconds=3600.0, options={})
    specs = [dataclasses.replace(s, workload="softmax", hparams='{"dataset": "digits"}')
             for s in specs]  # what a submission must name (never trained: simulated)
    cluster = cluster_fn(seed=seed, slot_seconds=3600.0)
    horizon = 3 * slots
    cfg = ServiceConfig(policy=policy, slot_seconds=3600.0, horizon=horizon,
                        history=tuple(specs), policy_options=dict(options or {}))
    half = slots // 2
    out: dict[str, Any] = {"policy": policy, "jobs": n_jobs}
    with tempfile.TemporaryDirectory() as tmp:
        timers = {"capture_s": 0.0, "plan_s": 0.0}
        c0 = time.process_time()
        ref = service(Path(tmp) / "ref", cfg, cluster, _executor(rate), timers)
        drive(ref, specs, horizon)
        out["run_cpu_s"] = time.process_time() - c0
        out.update(timers)
        rows = _rows(ref)
        out["rows"] = len(rows)
        out["revise_rows"] = sum(r[1] == "revise" for r in rows)
        out["admitted"] = sum(r.admitted for r in ref.loop.state.records.values())
        out.update(_outcomes(ref, ""))
        ref.close()
        first = service(Path(tmp) / "crash", cfg, cluster, _executor(rate), dict(timers))
        drive(first, specs, half)
        first.journal.close()
        c0 = time.process_time()
        again = service(Path(tmp) / "crash", None, None, _executor(rate), dict(timers))
        out["restart_cpu_s"] = time.process_time() - c0
        out["replayed_rows"] = len(_rows(again))
        drive(again, [s for s in specs if s.arrival >= half], horizon)
        out["same_after_restart"] = _rows(again) == rows
        out.update(_outcomes(again, "_after_restart"))
        again.close()
    return out


def _executor(rate: float) -> Executor:
    """Each worker does ``rate`` worker-slots per slot (:class:`Reality` at that rate)."""
    return Reality(rate=rate).executor()


def _outcomes(svc: SchedulerService, suffix: str) -> dict[str, int]:
    """Admitted jobs by outcome: promised, promise kept, completed without a promise,
    never completed (keys with ``suffix``)."""
    recs = [r for r in svc.loop.state.records.values() if r.admitted]
    out = {"admitted": len(recs), "promised": sum(r.promised is not None for r in recs),
           "kept": sum(r.promised is not None and r.completion is not None
                       and r.completion <= r.promised for r in recs),
           "unpromised_done": sum(r.promised is None and r.completion is not None
                                  for r in recs),
           "not_done": sum(r.completion is None for r in recs)}
    return {k + suffix: v for k, v in out.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--slots", type=int, default=40, help="arrivals spread over these slots")
    p.add_argument("--rate", type=float, default=0.9, help="reality / model training rate")
    p.add_argument("--policies", default="oasis,oasis-rp")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--commit-margin", type=int, default=None,
                   help="oasis-rp's commit_margin (default: the service's, 1)")
    args = p.parse_args()
    print("| policy | jobs | admitted | promised | promise kept | done, no promise | never done | "
          "journal rows | revise rows | run CPU s | capture CPU s | plan CPU s | "
          "restart CPU s (rows replayed) | same rows after restart | "
          "kept / promised after restart |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for policy in args.policies.split(","):
        opts = ({"commit_margin": args.commit_margin}
                if args.commit_margin is not None and policy == "oasis-rp" else {})
        r = run(policy, args.jobs, slots=args.slots, rate=args.rate, seed=args.seed,
                options=opts)
        print(f"| {policy} | {r['jobs']} | {r['admitted']} | {r['promised']} | {r['kept']} | "
              f"{r['unpromised_done']} | {r['not_done']} | {r['rows']} | "
              f"{r['revise_rows']} | {r['run_cpu_s']:.2f} | {r['capture_s']:.3f} | "
              f"{r['plan_s']:.2f} | {r['restart_cpu_s']:.3f} ({r['replayed_rows']}) | "
              f"{r['same_after_restart']} | {r['kept_after_restart']} / "
              f"{r['promised_after_restart']} |", flush=True)


if __name__ == "__main__":
    main()
