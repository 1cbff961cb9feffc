"""The one policy interface, what a policy sees, and the name -> factory registry.

Two kinds of policy share :class:`Policy`:

* **commit-on-arrival** (OASiS): ``on_arrival`` decides admission *and* returns the job's
  whole future schedule; ``plan`` then reads the committed schedule for slot ``t``;
* **re-planning** (FIFO, DRF, Dorm, the MIP allocator): ``on_arrival`` admits (or not);
  ``plan`` re-decides what every active job gets whenever ``view.event`` is true and keeps
  the previous allocation otherwise.

The loop calls, in every slot ``t``: ``on_arrival`` once per job arriving in ``t`` (in arrival
order), then ``admit_held`` if the policy holds jobs, then ``plan`` once. A policy never sees
the executor, the CLI or Ray.

What a policy must and may provide. :class:`Policy` is what every policy implements. Each
optional behaviour is a small runtime-checkable Protocol below, a *capability*; a policy
implements any subset, by defining its methods. :func:`capabilities` checks a policy once
(the loop calls it when it is built): a capability whose methods are only partly there, or
whose signature differs from the Protocol's, fails there with the policy and the method
named; callers then use the :class:`Capabilities` it returns, never ``getattr`` on a policy.

* :class:`HoldsJobs` -- deferred admission (``admit_held``), below;
* :class:`TakesClusterChanges` -- servers may join while it runs (``on_cluster_change``);
* :class:`ReleasesJobs` -- forgets a job's commitments from a slot on (``release``);
* :class:`RestoresDecisions` -- re-applies a journaled arrival decision (``restore``);
* :class:`RestoresHeld` -- re-applies a journaled deferred decision (``restore_held``);
* :class:`RevisesPlans` -- plans change after admission; a live service journals and
  replays them (``current_plans``, ``boundary_state``, ``restore_plan``, ``resume``);
* :class:`PricedPolicy` -- prices resources with OASiS' bounds U and L (``price_bounds``;
  :func:`takes_price_bounds` tells it of a factory before a policy is made).

``docs/library.md`` has a complete minimal policy.

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

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from psched.core.model import Alloc, Cluster, Decision, Job, SlotPlan

__all__ = [
    "CAPABILITIES",
    "REGISTRY",
    "Capabilities",
    "HoldsJobs",
    "JobStatus",
    "Policy",
    "PricedPolicy",
    "ReleasesJobs",
    "RestoresDecisions",
    "RestoresHeld",
    "RevisesPlans",
    "RunContext",
    "TakesClusterChanges",
    "View",
    "capabilities",
    "register_policy",
    "takes_price_bounds",
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
    #: its measured speed against its profile (:mod:`psched.core.speed`; 1.0: as profiled)
    speed: float = 1.0

    @property
    def remaining(self) -> float:
        """Work left in *planned* worker-slots: what is left of its profiled work, at the
        speed measured (``(W - done) / speed``: a job running at half its profiled speed
        needs twice the worker-slots a plan gives it)."""
        return max(0.0, self.job.work - self.done) / self.speed


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


@runtime_checkable
class HoldsJobs(Protocol):
    """Deferred admission (module docstring): decides held jobs at a later boundary, and
    may promise an admitted job that has no promise yet."""

    def admit_held(self, jobs: Sequence[Job], view: View) -> Mapping[str, Decision]:
        """A decision for each held job (arrival order) decided now; the rest stay held."""
        ...


@runtime_checkable
class TakesClusterChanges(Protocol):
    """Servers may join while the policy runs."""

    def on_cluster_change(self, cluster: Cluster) -> None:
        """``cluster`` is the current one with servers appended (old indices unchanged)."""
        ...


@runtime_checkable
class ReleasesJobs(Protocol):
    """Forgets a job's commitments from a slot on (it finished early, or is re-decided)."""

    def release(self, job_id: str, t: int) -> None:
        """Free what ``job_id`` holds from slot ``t`` on."""
        ...


@runtime_checkable
class RestoresDecisions(Protocol):
    """Re-applies an arrival decision made before (a restarted service's journal)."""

    def restore(self, job: Job, decision: Decision) -> None:
        """Take ``decision`` for ``job`` as it was, whatever deciding again would give."""
        ...


@runtime_checkable
class RestoresHeld(Protocol):
    """Re-applies a deferred decision made before at a slot boundary."""

    def restore_held(self, job: Job, decision: Decision) -> None:
        """Take the deferred ``decision`` for ``job`` as it was."""
        ...


@runtime_checkable
class RevisesPlans(Protocol):
    """Plans change after admission; a live service journals each change and replays it."""

    def current_plans(self) -> dict[str, dict[int, Alloc]]:
        """Each job's plan (slot -> allocation, slots not yet run), a copy."""
        ...

    def boundary_state(self) -> dict[str, Any]:
        """The policy's state after a boundary that a replay needs, as JSON."""
        ...

    def restore_plan(self, job_id: str, t: int, schedule: Mapping[int, Alloc]) -> None:
        """Re-apply a revision: from slot ``t`` on, ``job_id`` runs ``schedule``."""
        ...

    def resume(self, t: int, state: Mapping[str, Any] | None = None) -> None:
        """End of a journal replay at slot ``t``; ``state`` the last boundary state."""
        ...


@runtime_checkable
class PricedPolicy(Protocol):
    """Prices resources with OASiS' bounds U and L; such a policy takes ``price_source``
    and the bounds as options (see ``docs/policies.md``)."""

    def price_bounds(self) -> dict[str, Any] | None:
        """``U_worker`` (per resource), ``L_worker``, ``U_ps``, ``L_ps`` in force, or None
        before :meth:`Policy.start`."""
        ...


#: Every capability, by the name :class:`Capabilities` gives it.
CAPABILITIES: dict[str, type] = {
    "holds": HoldsJobs,
    "cluster_changes": TakesClusterChanges,
    "releases": ReleasesJobs,
    "restores": RestoresDecisions,
    "restores_held": RestoresHeld,
    "revises": RevisesPlans,
    "priced": PricedPolicy,
}


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """A policy's optional capabilities, checked once (:func:`capabilities`): each is the
    policy itself, typed as that capability, or None where it does not offer it."""

    holds: HoldsJobs | None = None  #: deferred admission
    cluster_changes: TakesClusterChanges | None = None  #: servers may join
    releases: ReleasesJobs | None = None  #: forgets commitments from a slot on
    restores: RestoresDecisions | None = None  #: re-applies arrival decisions
    restores_held: RestoresHeld | None = None  #: re-applies deferred decisions
    revises: RevisesPlans | None = None  #: plans change after admission
    priced: PricedPolicy | None = None  #: prices with U and L

    def offered(self) -> tuple[str, ...]:
        """The names of the capabilities offered, in :data:`CAPABILITIES` order."""
        return tuple(name for name in CAPABILITIES if getattr(self, name) is not None)


def _protocol_methods(proto: type) -> list[str]:
    return [n for n, v in vars(proto).items()
            if callable(v) and not n.startswith("_")]


def _check_signature(obj: Any, proto: type, method: str) -> None:
    """Raise if ``obj.method`` cannot be called as ``proto.method`` is (same parameter
    names, in order, after ``self``; extra parameters must have defaults)."""
    want = list(inspect.signature(getattr(proto, method)).parameters.values())[1:]
    have = list(inspect.signature(getattr(obj, method)).parameters.values())
    name = getattr(obj, "name", type(obj).__name__)
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in have):
        return
    head = [p.name for p in have[:len(want)]]
    if head != [p.name for p in want] or any(p.default is p.empty
                                             for p in have[len(want):]):
        raise TypeError(f"policy {name!r}: {method}{inspect.signature(getattr(obj, method))}"
                        f" does not match {proto.__name__}.{method}"
                        f"{inspect.signature(getattr(proto, method))}")


def capabilities(obj: Policy) -> Capabilities:
    """The optional capabilities the policy ``obj`` offers, checked: a capability is offered when
    the policy defines any of its methods, and then it must define all of them, with the
    Protocol's parameters.

    Raises
    ------
    TypeError
        ``obj`` is not a :class:`Policy`, offers a capability in part, or one of its
        methods' parameters differ from the capability's.
    """
    name = getattr(obj, "name", type(obj).__name__)
    if not isinstance(obj, Policy):
        missing = [m for m in ("name", "commits_on_arrival", *_protocol_methods(Policy))
                   if not hasattr(obj, m)]
        raise TypeError(f"policy {name!r} is not a Policy: it lacks {', '.join(missing)}")
    got: dict[str, Any] = {}
    for key, proto in CAPABILITIES.items():
        methods = _protocol_methods(proto)
        have = [m for m in methods if callable(getattr(obj, m, None))]
        if not have:
            continue
        if len(have) < len(methods):
            lacking = sorted(set(methods) - set(have))
            raise TypeError(f"policy {name!r} offers {proto.__name__} in part: it has "
                            f"{', '.join(have)} but not {', '.join(lacking)}")
        for m in methods:
            _check_signature(obj, proto, m)
        got[key] = obj
    return Capabilities(**got)


def takes_price_bounds(factory: Callable[..., Policy]) -> bool:
    """True if the policies ``factory`` makes price with U and L: it is a class that is a
    :class:`PricedPolicy`; known before one is made."""
    return isinstance(factory, type) and issubclass(factory, PricedPolicy)


REGISTRY: dict[str, Callable[..., Policy]] = {}


def register_policy(name: str) -> Callable[[Callable[..., Policy]], Callable[..., Policy]]:
    """Class decorator: make a policy available under ``name`` (``--policies name``)."""

    def deco(factory: Callable[..., Policy]) -> Callable[..., Policy]:
        if name in REGISTRY:
            raise ValueError(f"policy {name!r} registered twice")
        REGISTRY[name] = factory
        return factory

    return deco
