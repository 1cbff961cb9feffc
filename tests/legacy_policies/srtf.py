"""SRTF, shortest remaining time first, pre-emptive at events (``baselines.md``).

Admit every job. At each event, order the active jobs by the time they have left at full speed,
``ceil(remaining / N)`` slots (ties: earlier arrival), and give each in that order as many
workers as fit, with the PS they need, up to its cap; placement round-robin from an empty
cluster (:mod:`psched.core.placement`, :class:`~psched.policies.counts.Builder`).

Choices the specification leaves open, made to keep the rival strong:

* **Cap** ``min(N, ceil(remaining))``: more workers than the work left finish nothing sooner.
* **Jobs that get fewer than N** still run: a partly served short job keeps its priority and a
  later job may take what is left (work-conserving), as the specification's "as many as fit".
* **Containers may move** at events (the whole plan is placed afresh, as under DRF).

Complexity per event: O(J log J + J (S R + S log N)).
"""

from __future__ import annotations

from legacy_policies.counts import Builder, work_cap
from legacy_policies.replan import ReplanPolicy
from psched.core.model import Alloc, ceil_eps
from psched.core.policy import View

__all__ = ["SrtfPolicy"]


class SrtfPolicy(ReplanPolicy):
    """Shortest remaining time (at full speed) first, as many workers as fit."""

    name = "srtf"

    def replan(self, view: View) -> dict[str, Alloc]:
        order = sorted(enumerate(view.active.values()),
                       key=lambda p: (ceil_eps(p[1].remaining / p[1].job.max_workers), p[0]))
        build = Builder(self.capacity, self.pools)
        for _, st in order:
            build.grow(st.job, work_cap(st.job, st.remaining))
        return build.allocs()
