"""Per-job and per-policy figures of a run (the ``summary.json`` schema).

Durations, completion times, lateness and queueing delay are in slots; decision times in
milliseconds, measured as section 7 defines (one entry per decision event).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from psched.core.model import RESOURCES, Pool
from psched.core.records import JobRecord, RunResult, capacity_slots

__all__ = ["PROMISE_KEYS", "SUMMARY_KEYS", "dual_per_utility", "lateness", "promise_figures",
           "summarize", "training_figures"]

#: Keys every policy's entry in ``summary.json`` has (policies may add more, e.g. a dual bound).
SUMMARY_KEYS: tuple[str, ...] = (
    "total_utility", "jobs", "admitted", "rejected", "rejected_reasons", "completed",
    "unfinished", "jct_mean", "jct_p50", "jct_p99", "lateness_mean", "queueing_mean",
    "utilization", "decision_ms_p50", "decision_ms_p99", "decision_events", "wall_s",
    "training_efficiency", "worker_slot_efficiency", "promised", "kept", "restated", "missed",
    "dropped", "wasted_ws", "background_ws",
)

#: The keys of :func:`promise_figures`.
PROMISE_KEYS: tuple[str, ...] = ("promised", "kept", "restated", "missed", "dropped",
                                 "wasted_ws", "background_ws")


def lateness(rec: JobRecord) -> float | None:
    """Duration minus target (``d - gamma3``) for a completed job whose utility has a target."""
    u = rec.job.spec.utility
    if rec.duration is None or u.kind == "constant" or (u.kind == "sigmoid" and u.decay == 0):
        return None
    return float(rec.duration - u.target)


def _stats(values: list[float]) -> tuple[float | None, float | None, float | None]:
    if not values:
        return None, None, None
    a = np.asarray(values, dtype=float)
    return float(a.mean()), float(np.percentile(a, 50)), float(np.percentile(a, 99))


def training_figures(result: RunResult) -> dict[str, Any]:
    """``training_efficiency`` and ``worker_slot_efficiency`` of a run (None if undefined).

    * ``training_efficiency`` -- mean, over completed jobs, of ``fastest / duration``: the
      fastest duration ``ceil(W / N)`` over the slots the job took from arrival to completion;
      1 means every job ran at full size from its arrival (our definition: the elastic MIP
      paper gives none).
    * ``worker_slot_efficiency`` -- useful work over worker-slots granted (work beyond a job's
      ``W`` in its last slot is waste).

    O(jobs).
    """
    ratios, useful, granted = [], 0.0, 0.0
    for rec in result.records.values():
        if rec.duration is not None:
            ratios.append(rec.job.fastest / rec.duration)
        useful += min(rec.done, float(rec.job.work))
        granted += rec.done
    return {
        "training_efficiency": sum(ratios) / len(ratios) if ratios else None,
        "worker_slot_efficiency": useful / granted if granted > 0 else None,
    }


def promise_figures(result: RunResult) -> dict[str, Any]:
    """What became of promises and of the work spent on jobs that never completed.

    * ``promised`` -- jobs with a promise (:attr:`JobRecord.promised`);
    * ``kept`` -- of those, completed by their latest promise with every re-statement made no
      later than the slot it replaced (:attr:`JobRecord.promise_kept`);
    * ``restated`` -- jobs whose promise was re-stated at least once;
    * ``missed`` -- jobs with a promise not kept (late, re-stated too late, or unfinished);
    * ``dropped`` -- admitted jobs taken out before completing (cancelled, failed, dropped:
      a reason set on an admitted job), a part of ``unfinished``;
    * ``wasted_ws`` -- worker-slots done by jobs that never completed: admitted ones still
      running at the end or dropped, and any a held or rejected job ran;
    * ``background_ws`` -- worker-slots run on capacity no plan used, after the policy left
      the job (:attr:`JobRecord.background`).

    O(jobs).
    """
    recs = list(result.records.values())
    return {
        "promised": sum(r.promised is not None for r in recs),
        "kept": sum(r.promise_kept is True for r in recs),
        "restated": sum(bool(r.restated) for r in recs),
        "missed": sum(r.promise_kept is False for r in recs),
        "dropped": sum(r.admitted and r.completion is None and r.reason != "" for r in recs),
        "wasted_ws": float(sum(r.done for r in recs if r.completion is None)),
        "background_ws": float(sum(r.background for r in recs)),
    }


def summarize(result: RunResult) -> dict[str, Any]:
    """The ``summary.json`` entry of one policy's run."""
    recs = list(result.records.values())
    admitted = [r for r in recs if r.admitted]
    done = [r for r in admitted if r.completion is not None]
    jct_mean, jct_p50, jct_p99 = _stats([float(r.duration or 0) for r in done])
    late = [x for x in (lateness(r) for r in done) if x is not None]
    queue = [float(r.first_slot - r.job.arrival) for r in admitted if r.first_slot is not None]
    _, dec_p50, dec_p99 = _stats(result.decision_ms)
    cap_slots = (result.capacity_slots if result.capacity_slots is not None
                 else capacity_slots([(0, result.cluster)], result.horizon))
    util: dict[str, dict[str, float]] = {}
    for row, pool in enumerate((Pool.WORKER, Pool.PS)):
        total = cap_slots[row]
        util[pool.value] = {
            r: float(result.usage[row, i] / total[i])
            for i, r in enumerate(RESOURCES) if total[i] > 0
        }
    out: dict[str, Any] = {
        "total_utility": float(sum(r.utility for r in done)),
        "jobs": len(recs),
        "admitted": len(admitted),
        "rejected": len(recs) - len(admitted),
        "rejected_reasons": dict(Counter(r.reason for r in recs if not r.admitted)),
        "completed": len(done),
        "unfinished": len(admitted) - len(done),
        "jct_mean": jct_mean,
        "jct_p50": jct_p50,
        "jct_p99": jct_p99,
        "lateness_mean": float(np.mean(late)) if late else None,
        "queueing_mean": float(np.mean(queue)) if queue else None,
        "utilization": util,
        "decision_ms_p50": dec_p50,
        "decision_ms_p99": dec_p99,
        "decision_events": len(result.decision_ms),
        "wall_s": result.wall_s,
    }
    out.update(training_figures(result))
    out.update(promise_figures(result))
    for key, value in result.report.items():
        out.setdefault(key, value)
    if out.get("dual_bound") is not None:
        out["dual_per_utility"] = dual_per_utility(out["dual_bound"], out["total_utility"])
    return out


def dual_per_utility(dual_bound: float, total_utility: float) -> float | None:
    """The ``dual/util`` column: ``dual_bound`` over the utility the run earned.

    One meaning for every policy that reports a dual bound: the denominator is
    ``total_utility`` (``f(duration)`` summed over completed jobs, as every policy's utility
    is counted), not what the policy committed or promised, so a job that completes without a
    promise counts, and one admitted but unfinished does not. ``dual_bound`` >= OPT, so the
    ratio is an upper bound on OPT / ALG. None when nothing was earned.
    """
    return float(dual_bound) / total_utility if total_utility > 0 else None
