"""The executor: applies one slot's plan and reports the progress it made.

The loop (:mod:`psched.core.loop`) does not know which executor it has: the simulated one
below advances progress by the model (one worker-slot of work per worker), the Ray executor
(``ray_cluster.runtime.executor``) trains for real and reports measured progress in the same unit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from psched.core.model import Cluster, Job, SlotPlan

__all__ = ["FATAL", "Executor", "JobNote", "Lookahead", "SimulatedExecutor", "SlotReport"]

#: The plan of a future slot as far as it is known (None: not known), for an executor that
#: starts a slot's new actors a slot early.
Lookahead = Callable[[int], "SlotPlan | None"]

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


@dataclass(frozen=True, kw_only=True)
class JobNote:
    """What an executor can say of a job after a slot, for its owner's journal and views."""

    checkpoint: str = ""  #: path of the job's latest checkpoint ("" if none)
    loss: str = ""  #: the job's last loss figures, one line ("" if none)
    devices: str = ""  #: where each of its workers trains, one line ("" if unknown)


@runtime_checkable
class Executor(Protocol):
    """Carries out plans. ``apply`` returns when slot ``t`` is over.

    Besides running slots, an executor takes what its owner learns between slots: the plan
    of a coming slot (:meth:`set_lookahead`), servers that joined (:meth:`set_cluster`) or
    were lost (:meth:`servers_lost`), the work each job had done before a restart
    (:meth:`seed_progress`); and it says what it knows of each job after a slot
    (:meth:`notes`). :class:`SimulatedExecutor` implements each as the model has it (mostly
    nothing to do); a real executor subclasses nothing and implements all."""

    def apply(self, t: int, plan: SlotPlan, jobs: Mapping[str, Job]) -> SlotReport:
        """Run slot ``t`` with ``plan`` (every job absent from it is stopped)."""
        ...

    def release(self, job_id: str) -> None:
        """Forget a job that completed, was cancelled or was dropped."""
        ...

    def close(self) -> None:
        """Free every resource the executor holds."""
        ...

    def set_lookahead(self, lookahead: Lookahead | None) -> None:
        """Where to read a coming slot's plan from (None: nowhere)."""
        ...

    def set_cluster(self, cluster: Cluster) -> None:
        """Servers joined: ``cluster`` extends the one before (old indices unchanged)."""
        ...

    def servers_lost(self, servers: set[int]) -> None:
        """The nodes under ``servers`` were lost: jobs there restart elsewhere next slot."""
        ...

    def seed_progress(self, done: Mapping[str, float]) -> None:
        """A restart: each job had done ``done[job_id]`` worker-slots before it."""
        ...

    def places_on_nodes(self) -> bool:
        """True if it places actors on the nodes of a server -> node map."""
        ...

    def as_modelled(self) -> bool:
        """True if its jobs train exactly as the model has it (``n`` workers do ``n``
        worker-slots a slot, with no start-up loss): then a slot can be vouched for before
        any was measured. A real executor says False."""
        ...

    def notes(self, job_ids: Iterable[str]) -> dict[str, JobNote]:
        """What it knows of each of ``job_ids`` after the last slot (jobs it knows only)."""
        ...


class SimulatedExecutor:
    """Progress by the model: a job with ``n`` workers in a slot does ``n`` worker-slots.
    Every other part of the :class:`Executor` contract has nothing to do in the model."""

    def apply(self, t: int, plan: SlotPlan, jobs: Mapping[str, Job]) -> SlotReport:
        return SlotReport(
            slot=t, progress={j: float(a.n_workers) for j, a in plan.items() if a.n_workers}
        )

    def release(self, job_id: str) -> None:
        return None

    def close(self) -> None:
        return None

    def set_lookahead(self, lookahead: Lookahead | None) -> None:
        return None

    def set_cluster(self, cluster: Cluster) -> None:
        return None

    def servers_lost(self, servers: set[int]) -> None:
        return None

    def seed_progress(self, done: Mapping[str, float]) -> None:
        return None

    def places_on_nodes(self) -> bool:
        return False

    def as_modelled(self) -> bool:
        return True

    def notes(self, job_ids: Iterable[str]) -> dict[str, JobNote]:
        return {}
