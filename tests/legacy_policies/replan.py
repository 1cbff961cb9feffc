"""A small base for re-planning policies (FIFO, DRF, SRTF, ...).

A re-planning policy admits on arrival and re-decides, at each event (a slot in which
something arrived or completed, ``View.event``), what every active job gets; between events
it keeps the previous allocation, placement included. Subclasses write :meth:`replan`; the
base keeps the allocation between events and the cluster facts every policy needs.

A new re-planning policy is a subclass with a ``name``, registered, whose ``replan`` returns
``{job_id: Alloc}`` for slot ``view.t`` (jobs left out get nothing until the next event)::

    @register_policy("lifo")
    class LifoPolicy(ReplanPolicy):
        name = "lifo"

        def replan(self, view):
            free, cursor, plan = self.capacity.copy(), Cursor(), {}
            for job_id, st in reversed(view.active.items()):
                w, s = self.demands(st.job)
                n = most_workers(free, self.pools, st.job, st.job.max_workers)
                placed = place(free, self.pools, worker_demand=w, ps_demand=s, workers=n,
                               ps=st.job.ps_needed(n), cursor=cursor)
                if n and placed:
                    plan[job_id], free, cursor = placed.alloc, placed.free, placed.cursor
            return plan
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from legacy_policies.placement import Pools
from psched.core.model import Alloc, Cluster, Decision, Job
from psched.core.policy import RunContext, View

__all__ = ["REJECT_NO_PS_RULE", "ReplanPolicy"]

#: Rejection reason: ``b > B``, so no worker count meets ``ceil(b/B * n) <= n``.
REJECT_NO_PS_RULE = "ps_rule_unsatisfiable"


class ReplanPolicy:
    """Admit every job that can ever run; re-plan at events; hold the plan in between."""

    name = "replan"
    commits_on_arrival = False

    def __init__(self) -> None:
        self.ctx: RunContext | None = None
        self.cluster: Cluster | None = None
        self.capacity = np.zeros((0, 0))  #: servers x resources
        self.pools = Pools(worker=np.zeros(0, dtype=int), ps=np.zeros(0, dtype=int))
        self.current: dict[str, Alloc] = {}  #: the allocation in force
        self._planned_once = False

    # -- Policy protocol ----------------------------------------------------------------
    def start(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.cluster = ctx.cluster
        self.capacity = ctx.cluster.capacity
        self.pools = Pools.of(ctx.cluster)
        self.current = {}
        self._planned_once = False
        self.reset()

    def on_cluster_change(self, cluster: Cluster) -> None:
        """Servers joined (``cluster`` extends the old one): re-plan at the next slot."""
        if self.ctx is not None:
            self.ctx = dataclasses.replace(self.ctx, cluster=cluster)
        self.cluster = cluster
        self.capacity = cluster.capacity
        self.pools = Pools.of(cluster)
        self._planned_once = False

    def on_arrival(self, job: Job, view: View) -> Decision:
        if job.ps_needed(1) > 1:
            return Decision(admitted=False, reason=REJECT_NO_PS_RULE)
        return Decision(admitted=True)

    def plan(self, view: View) -> dict[str, Alloc]:
        """Re-plan at an event (or on the first call after ``start``); else hold."""
        if view.event or not self._planned_once:
            self.current = {j: a for j, a in self.replan(view).items() if j in view.active}
            self._planned_once = True
        else:
            self.current = {j: a for j, a in self.current.items() if j in view.active}
        return dict(self.current)

    def report(self) -> dict[str, Any]:
        return {}

    # -- for subclasses ------------------------------------------------------------------
    def reset(self) -> None:
        """Clear subclass state (called by :meth:`start`)."""

    def replan(self, view: View) -> dict[str, Alloc]:
        """What every active job gets from slot ``view.t`` until the next event."""
        raise NotImplementedError

    @staticmethod
    def demands(job: Job) -> tuple[np.ndarray, np.ndarray]:
        """One worker's and one PS's demand as arrays."""
        return job.spec.worker_demand.as_array(), job.spec.ps_demand.as_array()
