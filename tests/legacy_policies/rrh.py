"""RRH, the risk-reward heuristic (Irwin, Grit, Chase, HPDC 2004), as ``baselines.md`` specifies.

Every job asks for FIFO's fixed worker count ``r`` (drawn once per job, :class:`FifoPolicy`)
and its PS. Its *dominant share* ``s`` is the largest share of any resource (both pools' totals)
that ``r`` workers and their PS take; ``k = ceil(remaining / r)`` slots finish it, so its
dominant resource-time is ``s k``.

**Estimates** (a fluid model: the cluster serves one unit of every resource's total per slot).
Jobs are taken in rank order; a job starts once the resource-time of the jobs ranked before it
is served far enough for its own shares ``u`` to fit: start delay
``max(0, ceil(max_r (sum_before u_r k + u_r) - 1))``; its expected duration is
``t - a + delay + k`` and its expected utility ``f`` of that. (Per resource rather than by
dominant share alone: jobs bound by different resources overlap, and the cruder estimate
rejected most of the oasis-paper trace.)

**Admission**: admit a job iff its expected utility, at its rank (it starts "when the queue
ahead clears", the queue ahead being the admitted jobs of higher value density), minus the
utility the admitted jobs ranked below it would lose, each delayed by its dominant
resource-time ``s k`` slots, exceeds ``threshold`` (theta, default 0).

**Scheduling** at each event: rank admitted jobs by expected utility per unit of dominant
resource-time remaining, ``f(t - a + k) / (s k)`` (ties: earlier arrival); run them in that order
with their fixed counts, pausing (no containers this time) the ones that no longer fit.

Choices the specification leaves open, made to keep the rival strong:

* A running job's count is capped at ``ceil(remaining)`` (it finishes in the same slot).
* Lower-ranked jobs that fit still run when a higher one is paused (backfill).
* Placement round-robin from an empty cluster at each event (:class:`Builder`).

Complexity: O(J log J) per arrival, O(J (log J + S R)) per event.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from legacy_policies.counts import Builder
from legacy_policies.fifo import FifoPolicy
from psched.core.model import Alloc, Decision, Job, ceil_eps
from psched.core.policy import View

__all__ = ["REJECT_RISK", "RrhPolicy"]

#: Rejection reason: expected utility minus the loss it causes is at most the threshold.
REJECT_RISK = "risk_reward"


def _delay(ahead: np.ndarray, use: np.ndarray) -> int:
    """Slots until ``use`` fits once ``ahead`` resource-time is served (fluid, per resource)."""
    return max(0, math.ceil(float(np.max(ahead + use)) - 1 - 1e-9))


class RrhPolicy(FifoPolicy):
    """Risk-reward admission, value-density scheduling, fixed counts."""

    name = "rrh"

    def __init__(self, threshold: float = 0.0, **fifo: Any) -> None:
        super().__init__(**fifo)
        self.threshold = threshold  #: theta: admit iff expected net gain > theta
        self._jobs: dict[str, Job] = {}  #: admitted, not known to be finished
        self._left: dict[str, float] = {}  #: remaining work after the last planned slot
        self._rejected = 0

    def reset(self) -> None:
        super().reset()
        self._jobs, self._left, self._rejected = {}, {}, 0

    def _use(self, job: Job, n: int) -> np.ndarray:
        """Shares of every resource (both pools' totals) that ``n`` workers and their PS take."""
        use = n * job.spec.worker_demand.as_array() + job.ps_needed(n) * \
            job.spec.ps_demand.as_array()
        tot = self.capacity.sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(tot > 0, use / tot, 0.0)

    def _profile(self, job: Job, left: float, t: int) -> tuple[np.ndarray, int, float]:
        """(resource shares, slots left at the fixed count, value density now)."""
        r = max(1, self.request(job))
        k = max(1, ceil_eps(left / r))
        u = self._use(job, min(r, max(1, ceil_eps(left))))
        density = job.utility_at(t - job.arrival + k) / max(float(u.max()) * k, 1e-12)
        return u, k, density

    def _ranked(self, t: int) -> list[tuple[str, np.ndarray, int, float]]:
        prof = [(j, *self._profile(self._jobs[j], self._left[j], t)) for j in self._jobs]
        arrival = {j: i for i, j in enumerate(self._jobs)}
        return sorted(prof, key=lambda p: (-p[3], arrival[p[0]]))

    def on_arrival(self, job: Job, view: View) -> Decision:
        decision = super().on_arrival(job, view)
        if not decision.admitted:
            return decision
        t = view.t
        u_new, k_new, dens_new = self._profile(job, job.work, t)
        before = np.zeros_like(u_new)  # resource-time of the jobs ranked before, in order
        ahead = None  # ... before the new job: the jobs of higher value density
        loss = 0.0
        for j, u, k, dens in self._ranked(t):
            other = self._jobs[j]
            if dens < dens_new:
                if ahead is None:
                    ahead = before.copy()
                # ranked below it: delayed by its dominant resource-time
                d = t - other.arrival + _delay(before, u) + k
                late = float(other.spec.utility(d + float(u_new.max()) * k_new))
                loss += other.utility_at(d) - late
            before += u * k
        ahead = before if ahead is None else ahead
        gain = job.utility_at(t - job.arrival + _delay(ahead, u_new) + k_new)
        if gain - loss <= self.threshold:
            self._rejected += 1
            return Decision(admitted=False, reason=REJECT_RISK, payoff=gain - loss)
        self._jobs[job.job_id] = job
        self._left[job.job_id] = float(job.work)
        return Decision(admitted=True, payoff=gain - loss)

    def replan(self, view: View) -> dict[str, Alloc]:
        for j in list(self._jobs):
            if j not in view.active:
                del self._jobs[j], self._left[j]
        for j, st in view.active.items():
            self._left[j] = st.remaining
        build = Builder(self.capacity, self.pools)
        for j, _, _, _ in self._ranked(view.t):
            job = self._jobs[j]
            n = min(self.request(job), ceil_eps(self._left[j]))
            if n > 0:
                build.add(job, n, job.ps_needed(n))  # all or nothing: paused if it fails
        return build.allocs()

    def plan(self, view: View) -> dict[str, Alloc]:
        out = super().plan(view)
        for j, a in out.items():
            if j in self._left:
                self._left[j] = max(0.0, self._left[j] - a.n_workers)
        return out

    def report(self) -> dict[str, Any]:
        return {**super().report(), "rrh_rejected": self._rejected}
