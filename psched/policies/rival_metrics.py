"""Training efficiency of a run: the rivals' extra figure for ``summary.json``.

The elastic MIP paper (Hu et al. 2021) reports "training efficiency" without a public
definition; ours is documented here and computed from a run's records alone:

* ``training_efficiency`` -- mean, over completed jobs, of ``fastest / duration``: the
  job's fastest duration ``ceil(W / N)`` over the slots it actually took from arrival to
  completion. 1 means every job ran at full size from the slot it arrived; queueing and
  running on fewer workers both lower it. It is a per-job speed ratio, so a policy cannot raise
  it by finishing only the easy jobs without also finishing them fast.
* ``worker_slot_efficiency`` -- useful work over worker-slots granted (work beyond a job's
  ``W`` in its last slot is waste): 1 when no policy over-allocates.

Both are O(jobs). (The lead merges them into :func:`psched.metrics.summarize` with one line,
``out.update(training_figures(result))``.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from psched.simulator import RunResult

__all__ = ["training_figures"]


def training_figures(result: RunResult) -> dict[str, Any]:
    """``training_efficiency`` and ``worker_slot_efficiency`` of a run (None if undefined)."""
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
