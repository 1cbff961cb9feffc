"""The one policy interface, what a policy sees, and the name -> factory registry.

Two kinds of policy share :class:`Policy`:

* **commit-on-arrival** (OASiS): ``on_arrival`` decides admission *and* returns the job's
  whole future schedule; ``plan`` then reads the committed schedule for slot ``t``;
* **re-planning** (FIFO, DRF, Dorm, the MIP allocator): ``on_arrival`` admits (or not);
  ``plan`` re-decides what every active job gets whenever ``view.event`` is true and keeps
  the previous allocation otherwise.

The loop calls, in every slot ``t``: ``on_arrival`` once per job arriving in ``t`` (in arrival
order), then ``admit_held`` if the policy has it and holds jobs, then ``plan`` once. A policy
never sees the executor, the CLI or Ray.

Deferred admission (optional). A policy that answers an arrival with
``Decision(admitted=False, hold=True, reason=...)`` and has a method
``admit_held(jobs: Sequence[Job], view: View) -> Mapping[str, Decision]`` keeps the job *held*:
not admitted, not yet rejected (``reason`` "held" in the loop's record). At every slot
boundary while the job's window is open, the loop passes the held jobs (arrival order) to
``admit_held``; the policy returns a decision for each one it decides now -- admitted (with its
promise; it is then an arrival of that slot for ``plan``) or rejected without ``hold`` -- and
the rest stay held. A job whose window closes, or that is still held when the run ends, is
rejected with the reason given when it was held. ``JobRecord.decided`` (``jobs.csv``:
``decided``) is the slot of the final decision. A policy without ``admit_held`` never holds:
``hold`` is then an ordinary rejection.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from psched.core.model import Cluster, Decision, Job, SlotPlan

__all__ = [
    "REGISTRY",
    "JobStatus",
    "Policy",
    "RunContext",
    "View",
    "register_policy",
]


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """What a policy may know before the first slot."""

    cluster: Cluster  #: the servers
    horizon: int  #: slots 0..horizon-1
    known_jobs: Sequence[Job] = ()  #: hindsight (the whole trace) where the setting allows it
    history_jobs: Sequence[Job] = ()  #: a separate history trace (for price estimates)
    seed: int = 0  #: for every random choice of the policy


@dataclass(frozen=True, kw_only=True)
class JobStatus:
    """An admitted, unfinished job as the loop measures it."""

    job: Job  #: the job
    done: float  #: work done so far, worker-slots (measured on a real executor)
    first_slot: int | None  #: first slot it had workers, or None

    @property
    def remaining(self) -> float:
        """Work left, worker-slots."""
        return max(0.0, self.job.work - self.done)


@dataclass(frozen=True, kw_only=True)
class View:
    """What a policy sees in slot ``t``."""

    t: int  #: the current slot
    cluster: Cluster  #: the servers
    horizon: int  #: slots 0..horizon-1
    active: Mapping[str, JobStatus]  #: admitted, unfinished jobs, in arrival order
    arrived: tuple[str, ...] = ()  #: admitted in this slot
    completed: tuple[str, ...] = ()  #: finished at the end of the previous slot
    extra: Mapping[str, Any] = field(default_factory=dict)  #: executor-specific facts

    @property
    def event(self) -> bool:
        """True when something arrived or completed: the slot is a re-planning event."""
        return bool(self.arrived or self.completed)


@runtime_checkable
class Policy(Protocol):
    """Decides, at each event, what every job gets from now on."""

    name: str  #: registry name
    commits_on_arrival: bool  #: True for OASiS-like policies (decision time per arrival)

    def start(self, ctx: RunContext) -> None:
        """Called once before slot 0 (or after a restart)."""
        ...

    def on_arrival(self, job: Job, view: View) -> Decision:
        """Admit or reject ``job``, which arrives in slot ``view.t``."""
        ...

    def plan(self, view: View) -> SlotPlan:
        """What every active job gets in slot ``view.t``."""
        ...

    def report(self) -> dict[str, Any]:
        """Extra figures for ``summary.json`` (a dual bound, solver statistics...)."""
        ...


REGISTRY: dict[str, Callable[..., Policy]] = {}


def register_policy(name: str) -> Callable[[Callable[..., Policy]], Callable[..., Policy]]:
    """Class decorator: make a policy available under ``name`` (``--policies name``)."""

    def deco(factory: Callable[..., Policy]) -> Callable[..., Policy]:
        if name in REGISTRY:
            raise ValueError(f"policy {name!r} registered twice")
        REGISTRY[name] = factory
        return factory

    return deco
