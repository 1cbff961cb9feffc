"""The executor: applies one slot's plan and reports the progress it made.

The loop (:mod:`psched.core.loop`) does not know which executor it has: the simulated one
below advances progress by the model (one worker-slot of work per worker), the Ray executor
(``ray_cluster.runtime.executor``) trains for real and reports measured progress in the same unit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from psched.core.model import Job, SlotPlan

__all__ = ["FATAL", "Executor", "SimulatedExecutor", "SlotReport"]

#: Prefix of a :attr:`SlotReport.failed` reason that retrying cannot cure (a workload that
#: raises every time): the service drops such a job instead of running it again.
FATAL = "fatal: "


@dataclass(frozen=True, kw_only=True)
class SlotReport:
    """What happened in one slot."""

    slot: int  #: the slot that ran
    progress: Mapping[str, float] = field(default_factory=dict)
    """Work done per job in this slot, in worker-slots (the unit of ``Job.work``)."""
    failed: Mapping[str, str] = field(default_factory=dict)
    """Jobs that could not run this slot, with why (a real executor's lost node, say);
    a reason starting with :data:`FATAL` means the job cannot run at all."""


@runtime_checkable
class Executor(Protocol):
    """Carries out plans. ``apply`` returns when slot ``t`` is over."""

    def apply(self, t: int, plan: SlotPlan, jobs: Mapping[str, Job]) -> SlotReport:
        """Run slot ``t`` with ``plan`` (every job absent from it is stopped)."""
        ...

    def release(self, job_id: str) -> None:
        """Forget a job that completed, was cancelled or was dropped."""
        ...

    def close(self) -> None:
        """Free every resource the executor holds."""
        ...


class SimulatedExecutor:
    """Progress by the model: a job with ``n`` workers in a slot does ``n`` worker-slots."""

    def apply(self, t: int, plan: SlotPlan, jobs: Mapping[str, Job]) -> SlotReport:
        return SlotReport(
            slot=t, progress={j: float(a.n_workers) for j, a in plan.items() if a.n_workers}
        )

    def release(self, job_id: str) -> None:
        return None

    def close(self) -> None:
        return None
