"""Optimus (Peng et al., EuroSys 2018) under the OASiS speed model (``baselines.md``).

Admit every job. At each event: seed the active jobs in arrival order with one worker and the
PS it needs while they fit (the rest wait); then repeatedly give one more worker (with the PS it
then needs) to the job whose estimated remaining time falls most per unit of dominant resource
added, until nothing more fits. Under the linear speed model a job with ``R`` worker-slots left
on ``n`` workers needs ``R / n`` slots, so one more worker saves ``R / (n (n + 1))`` slots; the
added dominant share is that of one worker plus any PS it brings, over both pools' totals. Extra
PS beyond the ratio do not speed a job up under this model, so the greedy never adds one.

Choices the specification leaves open, made to keep the rival strong:

* **Cap** ``min(N, ceil(remaining))`` workers: more finish nothing sooner.
* **Seeding** skips a job whose first worker does not fit and goes on with the next (a later,
  smaller job may still get its seed): work-conserving, never worse for the later jobs.
* **Placement**: each container round-robin on servers with room, from an empty cluster at each
  event (:class:`~psched.policies.counts.Builder`); a job whose next worker does not fit is
  frozen for the event. Ties go to the earlier arrival.
* **Speed model**: linear (OASiS's, the one the simulator runs). Optimus's fitted model
  ``f(w, p) = (theta0 + theta1 w/p + theta2 w + theta3 p)^-1`` is *not* built: with linear
  progress in the executor its estimates would not match what happens.

Complexity per event: O(J + I (S R + log J)) for I workers added.
"""

from __future__ import annotations

import heapq

import numpy as np

from legacy_policies.counts import Builder, work_cap
from legacy_policies.replan import ReplanPolicy
from psched.core.model import Alloc, Job
from psched.core.policy import View

__all__ = ["OptimusPolicy", "saving_per_share"]


def saving_per_share(job: Job, remaining: float, n: int, totals: np.ndarray) -> float:
    """Slots saved by the ``n+1``-th worker per unit of dominant share it (and its PS) adds."""
    extra_ps = job.ps_needed(n + 1) - job.ps_needed(n)
    use = job.spec.worker_demand.as_array() + extra_ps * job.spec.ps_demand.as_array()
    with np.errstate(divide="ignore", invalid="ignore"):
        share = float(np.max(np.where(totals > 0, use / totals, 0.0)))
    saving = remaining / (n * (n + 1))
    return saving / share if share > 0 else float("inf")


class OptimusPolicy(ReplanPolicy):
    """Seed one worker per job in arrival order, then marginal gain by remaining time."""

    name = "optimus"

    def replan(self, view: View) -> dict[str, Alloc]:
        totals = self.capacity.sum(axis=0)
        build = Builder(self.capacity, self.pools)
        heap: list[tuple[float, int]] = []
        statuses = list(view.active.values())
        caps = [work_cap(st.job, st.remaining) for st in statuses]
        for i, st in enumerate(statuses):
            if caps[i] > 0 and build.grow(st.job, 1) == 1 and caps[i] > 1:
                heap.append((-saving_per_share(st.job, st.remaining, 1, totals), i))
        heapq.heapify(heap)
        while heap:
            _, i = heapq.heappop(heap)
            st = statuses[i]
            n = build.workers(st.job.job_id)
            if build.grow(st.job, n + 1) == n + 1 and n + 1 < caps[i]:
                heapq.heappush(heap, (-saving_per_share(st.job, st.remaining, n + 1, totals), i))
        return build.allocs()
