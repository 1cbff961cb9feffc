"""Plan revisions of a policy that revises plans (``oasis-rp``), journaled and replayed.

Such a policy offers :class:`~psched.core.policy.RevisesPlans`: ``current_plans()`` (each
job's plan, slots not yet run), ``boundary_state()`` (JSON), and for a restart
``restore_plan(job_id, t, schedule)`` and ``resume(t, state)`` (with ``restore(job, decision)``
of :class:`~psched.core.policy.RestoresDecisions`: its promise and first plan).
Its plans change at arrivals (a re-pack moves admitted jobs) and at slot boundaries (a job
behind or ahead of plan, a pull); a revised plan is a resize at the next boundary.

:class:`PlanRevisions` compares the policy's plans with the service's record
(:class:`~ray_cluster.service.rules.Commitments`) after every decision and every slot's
plan, and returns what changed as journal rows of kind ``revise`` (the job's plan from that
slot on; empty when none is left); the service journals them with the policy's boundary
state in one transaction. On a restart :func:`ray_cluster.service.replay.restore_loop`
re-applies them in order, so every admitted job keeps its promise and its current plan, and
prices are rebuilt from the plans.

Complexity: O(plan entries of the active jobs) per decision and per slot.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psched.core.model import SlotPlan
from psched.core.policy import RevisesPlans
from ray_cluster.service.journal import DecisionRow
from ray_cluster.service.rules import Commitments

__all__ = ["REVISE", "PlanRevisions"]

#: The journal's decision kind of a plan revision.
REVISE = "revise"


class PlanRevisions:
    """What a plan-revising policy changed since the service last recorded its plans."""

    def __init__(self, revises: RevisesPlans | None, commitments: Commitments) -> None:
        """``revises``: the policy's :class:`~psched.core.policy.RevisesPlans`
        capability, None for a policy that does not revise plans."""
        self._revises = revises
        self.commitments = commitments
        self._last_state: Mapping[str, Any] | None = None

    @property
    def enabled(self) -> bool:
        """True if the policy revises plans."""
        return self._revises is not None

    def capture(self, t: int, executed: SlotPlan | None = None
                ) -> tuple[list[DecisionRow], tuple[int, Mapping[str, Any]] | None]:
        """The revisions since the last capture, from slot ``t`` on (``executed``: slot
        ``t``'s plan, just taken from the policy, is part of each plan), recorded in the
        commitments; and the policy's boundary state if it changed. Jobs without a recorded
        decision yet (their arrival row comes first) are left for a later capture."""
        if self._revises is None:
            return [], None
        plans = self._revises.current_plans()
        for job_id, alloc in (executed or {}).items():
            plans[job_id] = {t: alloc, **plans.get(job_id, {})}
        known = self.commitments.schedules
        ends = self.commitments.planned_end
        rows: list[DecisionRow] = []
        for job_id in sorted({j for j in plans if j in known}
                             | {j for j, end in ends.items() if end >= t}):
            new = plans.get(job_id, {})
            old = {s: a for s, a in known[job_id].items() if s >= t}
            if new == old:
                continue
            self.commitments.revise(job_id, t, new)
            rows.append(DecisionRow(job_id=job_id, kind=REVISE, slot=t, admitted=True,
                                    reason="", payoff=None,
                                    work=sum(a.n_workers for a in new.values()),
                                    schedule=dict(sorted(new.items())), latency_ms=0.0))
        state = None
        now = dict(self._revises.boundary_state())
        if now != self._last_state:
            self._last_state = now
            state = (t, now)
        return rows, state

    def replayed(self, row: DecisionRow) -> None:
        """A journaled revision, re-applied: recorded in the commitments."""
        self.commitments.revise(row.job_id, row.slot, row.schedule)
