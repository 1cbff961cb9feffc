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

Speed: each job's priority, cap and kind of first worker (:meth:`JobFacts.kind`) are kept in
an :class:`~psched.policies.table.ActiveTable` (recomputed only for jobs that ran or arrived);
the order is one stable numpy sort; a kind that cannot get a first worker is dropped from the
rest of the order in bulk (:func:`~psched.policies.table.live`). Complexity per event:
O(J log J) numpy + O(J) at C speed + O(P (S R + S log N)) for P jobs tried (those placed plus
one per kind).
"""

from __future__ import annotations

import numpy as np

from psched.core.model import Alloc, ceil_eps
from psched.core.policy import JobStatus, View, register_policy
from psched.policies.counts import Builder, work_cap
from psched.policies.replan import ReplanPolicy
from psched.policies.table import ActiveTable, live

__all__ = ["SrtfPolicy"]


@register_policy("srtf")
class SrtfPolicy(ReplanPolicy):
    """Shortest remaining time (at full speed) first, as many workers as fit."""

    name = "srtf"

    def reset(self) -> None:
        self._table = ActiveTable(3, self._numbers)

    def _numbers(self, st: JobStatus) -> tuple[float, float, float]:
        """(slots left at full speed, cap, kind) of one job."""
        job = st.job
        return (ceil_eps(st.remaining / job.max_workers), work_cap(job, st.remaining),
                self.facts.kind(job))

    def replan(self, view: View) -> dict[str, Alloc]:
        _, sts, rows = self._table.sync(view.active)
        order = np.argsort(rows[:, 0], kind="stable")  # ties: earlier arrival
        caps, kinds = rows[:, 1].astype(np.int64).tolist(), rows[:, 2].astype(np.int64)
        build = Builder(self.capacity, self.pools, self.facts)
        for i in live(order, kinds, build.dead):
            if build.grow(sts[i].job, caps[i]) == 0 and caps[i] > 0:
                build.dead.add(int(kinds[i]))
        return build.allocs()
