"""The one scheduling loop: arrivals -> decisions -> apply plans -> advance -> record.

The same :class:`SchedulerLoop` serves the trace-driven simulator and the live service
(:mod:`ray_cluster.service`, its real-time driver). Everything that differs between them is
injected:

* :class:`ArrivalSource` -- a trace (:class:`TraceArrivals`) or a queue filled while the loop
  runs (:class:`QueueArrivals`);
* :class:`Clock` -- simulated time (:class:`SimClock`) or a wall clock;
* :class:`~psched.executor.Executor` -- modelled or measured progress.

The loop keeps all of its own state in :class:`LoopState`, plain data that a live service can
save and restore. A policy keeps its own state.

The API a live owner uses (between slots, under its own lock): :meth:`SchedulerLoop.admit`
returns an :class:`Admission` per job (decision, payoff, committed schedule, latency);
:meth:`~SchedulerLoop.book` holds a job for a later arrival slot; :meth:`~SchedulerLoop.admit_held`
decides jobs a policy held for deferred admission (each slot, after its arrivals);
:meth:`~SchedulerLoop.replan` re-decides a job's remaining work; :meth:`~SchedulerLoop.release` and
:meth:`~SchedulerLoop.drop`; :meth:`~SchedulerLoop.restore` rebuilds finished slots from a
journal; ``before_slot``/``after_slot``/``on_decision`` hooks; and :meth:`~SchedulerLoop.step`
split into :meth:`~SchedulerLoop.begin_slot`, the executor's ``apply`` and
:meth:`~SchedulerLoop.end_slot`, so that a real-time driver runs the same slot with its own
clock.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import gc
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from psched.checker import PlanChecker
from psched.executor import Executor, SimulatedExecutor, SlotReport
from psched.model import (
    RESOURCES,
    Alloc,
    Cluster,
    Decision,
    Job,
    JobSpec,
    Pool,
    SlotPlan,
    resolve_job,
)
from psched.policies.base import JobStatus, Policy, RunContext, View

__all__ = [
    "HELD",
    "REJECT_CANNOT_FIT",
    "REJECT_PAST_HORIZON",
    "Admission",
    "AfterSlot",
    "AllocationRow",
    "ArrivalSource",
    "BeforeSlot",
    "Clock",
    "JobRecord",
    "LoopState",
    "QueueArrivals",
    "RunResult",
    "SchedulerLoop",
    "SimClock",
    "TraceArrivals",
    "WallClock",
    "cannot_fit",
    "capacity_slots",
    "simulate",
]

log = logging.getLogger(__name__)

REJECT_PAST_HORIZON = "past_horizon"  #: arrives at or after the horizon
REJECT_CANNOT_FIT = "cannot_fit"  #: one worker (or the PS it needs) fits no server
#: Held for deferred admission (``Decision.hold``): not admitted yet, not rejected yet. The
#: record's reason while held; when the window closes (or the run ends) unadmitted, the
#: reason becomes the one the policy gave when it held the job.
HELD = "held"


class ArrivalSource(Protocol):
    """Where jobs come from."""

    def pop(self, t: int) -> list[JobSpec]:
        """Jobs arriving in slot ``t`` (and any earlier one not yet popped), in order."""
        ...

    def pending(self) -> bool:
        """True while more jobs may come."""
        ...


class TraceArrivals:
    """Arrivals replayed from a list of job specs (stably sorted by arrival)."""

    def __init__(self, specs: Iterable[JobSpec]) -> None:
        self._queue = deque(sorted(specs, key=lambda s: s.arrival))

    def pop(self, t: int) -> list[JobSpec]:
        out: list[JobSpec] = []
        while self._queue and self._queue[0].arrival <= t:
            out.append(self._queue.popleft())
        return out

    def pending(self) -> bool:
        return bool(self._queue)


class QueueArrivals:
    """Arrivals pushed while the loop runs (a live service); ``close`` ends the stream."""

    def __init__(self) -> None:
        self._queue: deque[JobSpec] = deque()
        self._closed = False

    def push(self, spec: JobSpec) -> None:
        self._queue.append(spec)

    def close(self) -> None:
        self._closed = True

    def pop(self, t: int) -> list[JobSpec]:
        out = list(self._queue)
        self._queue.clear()
        return out

    def pending(self) -> bool:
        return bool(self._queue) or not self._closed


class Clock(Protocol):
    """When slot ``t`` begins."""

    def wait_until(self, t: int) -> None:
        """Return once slot ``t`` has begun."""
        ...


class SimClock:
    """Simulated time: every slot begins at once."""

    def wait_until(self, t: int) -> None:
        return None


class WallClock:
    """Real time: slot ``t`` begins ``t * slot_seconds`` after ``start`` (``time.time()``)."""

    def __init__(self, slot_seconds: float, start: float | None = None) -> None:
        self.slot_seconds = slot_seconds
        self.start = time.time() if start is None else start

    def slot_now(self) -> int:
        """The slot the wall clock is in now."""
        return int((time.time() - self.start) // self.slot_seconds)

    def wait_until(self, t: int) -> None:
        delay = self.start + t * self.slot_seconds - time.time()
        if delay > 0:
            time.sleep(delay)


@dataclass(kw_only=True)
class JobRecord:
    """Everything the loop learned about one job."""

    job: Job  #: the resolved job
    admitted: bool = False  #: admitted by the policy
    reason: str = ""  #: rejection reason
    payoff: float | None = None  #: the policy's payoff at arrival, if it prices
    done: float = 0.0  #: work done, worker-slots
    first_slot: int | None = None  #: first slot with workers
    completion: int | None = None  #: slot in which the last work was done
    promised: int | None = None  #: completion slot promised on admission, if the policy promises
    #: slot of the admission decision: the arrival slot, a later one for a deferred admission,
    #: the slot a held job's window closed (or the run ended) if it never was; None while held
    decided: int | None = None

    @property
    def duration(self) -> int | None:
        """Slots from arrival through completion, or None if unfinished."""
        return None if self.completion is None else self.completion - self.job.arrival + 1

    @property
    def utility(self) -> float:
        """Utility earned: f(duration) when completed, 0 otherwise."""
        d = self.duration
        return 0.0 if d is None else self.job.utility_at(d)


#: One row of ``allocations.csv``: (slot, job_id, server index, role, count).
AllocationRow = tuple[int, str, int, str, int]


@dataclass(kw_only=True)
class LoopState:
    """All of the loop's own state: plain data, enough to resume."""

    t: int = 0  #: next slot to run
    records: dict[str, JobRecord] = field(default_factory=dict)  #: every job seen, by id
    active: list[str] = field(default_factory=list)  #: admitted, unfinished, arrival order
    completed_last: list[str] = field(default_factory=list)  #: finished in slot t-1
    allocations: list[AllocationRow] = field(default_factory=list)  #: executed schedule
    usage: np.ndarray | None = None  #: pool-summed usage per resource (2 x R), all slots
    decision_ms: list[float] = field(default_factory=list)  #: one entry per decision event
    slots_run: int = 0  #: slots executed
    booked: list[JobSpec] = field(default_factory=list)  #: to be decided in a later slot
    arrived: list[str] = field(default_factory=list)  #: admitted since the last plan
    event_ms: list[float] = field(default_factory=list)  #: their decision times (re-planners)
    #: held for deferred admission, in arrival order: job id -> reason if never admitted
    held: dict[str, str] = field(default_factory=dict)


@dataclass(kw_only=True)
class RunResult:
    """The outcome of a run: what the metrics and the output files are computed from."""

    policy: str  #: policy name
    cluster: Cluster  #: the servers
    horizon: int  #: slots 0..horizon-1
    records: dict[str, JobRecord]  #: per job, in arrival order
    allocations: list[AllocationRow]  #: executed schedule
    usage: np.ndarray  #: total usage per pool (worker, ps) and resource over the run
    decision_ms: list[float]  #: one entry per decision event
    report: dict[str, Any]  #: the policy's extra figures
    wall_s: float = 0.0  #: wall time of the run
    #: capacity per pool (worker, ps) and resource summed over slots 0..horizon-1, counting
    #: servers that joined during the run from their slot on; None: ``cluster`` all along
    capacity_slots: np.ndarray | None = None


def capacity_slots(clusters: Sequence[tuple[int, Cluster]], horizon: int) -> np.ndarray:
    """Capacity per pool (rows worker, ps) and resource summed over slots ``0..horizon-1``,
    for a cluster that was ``clusters[i][1]`` from slot ``clusters[i][0]`` on. O(servers)."""
    out = np.zeros((2, len(RESOURCES)))
    for i, (start, cluster) in enumerate(clusters):
        end = clusters[i + 1][0] if i + 1 < len(clusters) else horizon
        span = max(0, min(end, horizon) - min(start, horizon))
        cap = cluster.capacity
        for row, pool in enumerate((Pool.WORKER, Pool.PS)):
            out[row] += cap[cluster.indices(pool)].sum(axis=0) * span
    return out


def cannot_fit(job: Job, cluster: Cluster) -> bool:
    """True if one worker fits no worker server or the PS it needs fit no PS server."""
    cap = cluster.capacity
    spec = job.spec
    w = spec.worker_demand.as_array()
    s = spec.ps_demand.as_array()
    wi, ki = cluster.indices(Pool.WORKER), cluster.indices(Pool.PS)
    fits_w = wi.size > 0 and bool(np.any(np.all(cap[wi] >= w - 1e-9, axis=1)))
    # b <= B, so one worker needs exactly one PS
    fits_ps = ki.size > 0 and bool(np.any(np.all(cap[ki] >= s - 1e-9, axis=1)))
    return not (fits_w and fits_ps)


def _pool_rows(cluster: Cluster) -> np.ndarray:
    """Row of the loop's per-pool usage (0 worker, 1 PS) for every server."""
    return np.array([0 if s.pool == Pool.WORKER else 1 for s in cluster.servers])


@dataclass(frozen=True, kw_only=True)
class Admission:
    """The loop's answer to one arrival (or re-plan): what the owner of the loop journals."""

    job_id: str  #: the job
    slot: int  #: the slot the decision was made for
    admitted: bool  #: admitted (or, for a re-plan, a new schedule found)
    reason: str = ""  #: why not: a screening reason or the policy's
    payoff: float | None = None  #: the policy's payoff, if it prices
    work: int = 0  #: worker-slots decided for (the remaining work of a re-plan)
    #: the committed schedule by slot (policies that commit on arrival), else empty
    schedule: Mapping[int, Alloc] = field(default_factory=dict)
    latency_ms: float | None = None  #: the policy's decision time; None if screened out
    promised: int | None = None  #: the completion slot promised on admission, if any


#: A before-slot hook: called with slot ``t`` once it has begun, before its arrivals.
BeforeSlot = Callable[[int], None]
#: An after-slot hook: called with the slot, its executed plan and the executor's report,
#: once the loop recorded the slot.
AfterSlot = Callable[[int, SlotPlan, SlotReport], None]
class _ActiveStatuses:
    """The ``View.active`` mapping, kept between slots: a job's :class:`JobStatus` is rebuilt
    only when the loop touched its record (it ran or made progress) or it is new; finished
    jobs leave. Each slot then costs O(jobs touched) plus a C-level copy and key comparison of
    the active list, instead of one object per active job. Any mismatch with the loop's
    state (a restored state, jobs dropped or re-admitted) rebuilds it from the records."""

    def __init__(self) -> None:
        self._state: LoopState | None = None
        self._by_job: dict[str, JobStatus] = {}  # in the order of ``state.active``
        self._touched: set[str] = set()

    def touch(self, *job_sets: Iterable[str]) -> None:
        """Jobs whose records the slot changed."""
        for jobs in job_sets:
            self._touched.update(jobs)

    def of(self, st: LoopState) -> dict[str, JobStatus]:
        """A fresh dict of every active job's status, in arrival order."""
        records, cache = st.records, self._by_job
        if self._state is not st:
            self._state, cache = st, {}
        else:
            for j in self._touched:
                if j in cache:
                    cache[j] = _status(records[j])
            for j in st.completed_last:
                cache.pop(j, None)
            for j in st.active[len(cache):]:
                cache[j] = _status(records[j])
        self._touched = set()
        if list(cache) != st.active:
            cache = {j: _status(records[j]) for j in st.active}
        self._by_job = cache
        return dict(cache)


def _status(rec: JobRecord) -> JobStatus:
    return JobStatus(job=rec.job, done=rec.done, first_slot=rec.first_slot)


class SchedulerLoop:
    """Runs a policy slot by slot over an executor. ``step`` runs one slot.

    A slot is :meth:`begin_slot` (hooks, due arrivals, the policy's plan, the check), the
    executor's ``apply``, then :meth:`end_slot` (record, progress, completions, hooks);
    :meth:`step` runs the three after waiting for the clock. A real-time driver (the live
    service) runs the same three with its own clock and lock, as SimPy's
    ``RealtimeEnvironment`` only overrides ``step``. Between slots the owner may
    :meth:`admit` (decide at once), :meth:`book` (decide when a later slot begins),
    :meth:`replan`, :meth:`drop` and :meth:`restore` (rebuild the state from a journal).
    """

    def __init__(
        self,
        *,
        cluster: Cluster,
        policy: Policy,
        horizon: int,
        arrivals: ArrivalSource,
        executor: Executor | None = None,
        clock: Clock | None = None,
        known_jobs: Sequence[JobSpec] = (),
        history_jobs: Sequence[JobSpec] = (),
        max_window: int | None = None,
        seed: int = 0,
        check: bool = True,
        state: LoopState | None = None,
        before_slot: Sequence[BeforeSlot] = (),
        after_slot: Sequence[AfterSlot] = (),
    ) -> None:
        """``state``: resume from a saved :class:`LoopState` (the policy restores its own).
        ``before_slot``/``after_slot``: hooks run around every slot (:data:`BeforeSlot`,
        :data:`AfterSlot`)."""
        self.cluster = cluster
        self.policy = policy
        self.horizon = horizon
        self.arrivals = arrivals
        self.executor: Executor = executor or SimulatedExecutor()
        self.clock: Clock = clock or SimClock()
        self.max_window = max_window
        self.check = check
        self.state = state or LoopState(usage=np.zeros((2, len(RESOURCES))))
        self.before_slot: list[BeforeSlot] = list(before_slot)
        self.after_slot: list[AfterSlot] = list(after_slot)
        #: called with every :class:`Admission` the loop makes (``admit``, ``replan``,
        #: and arrivals decided when a slot begins)
        self.on_decision: list[Callable[[Admission], None]] = []
        self._pool_rows = _pool_rows(cluster)
        self._checker = PlanChecker()  # check and usage, recomputed only where plans changed
        self._statuses = _ActiveStatuses()  # the View's JobStatus objects, kept between slots
        self._clusters: list[tuple[int, Cluster]] = [(0, cluster)]  # (from slot, cluster)
        #: the known jobs as resolved for the policy, by the identity of their spec, each
        #: taken (once) by :meth:`resolve` when it arrives instead of resolved again
        self._known: dict[int, tuple[JobSpec, Job, tuple[float, int, int | None]]] = {}
        known = tuple(self.resolve(s) for s in known_jobs)
        self._known = {id(job.spec): (job.spec, job, self._resolve_key()) for job in known}
        ctx = RunContext(
            cluster=cluster,
            horizon=horizon,
            known_jobs=known,
            history_jobs=tuple(self.resolve(s) for s in history_jobs),
            seed=seed,
        )
        policy.start(ctx)

    def set_cluster(self, cluster: Cluster, at: int | None = None) -> None:
        """Servers joined: ``cluster`` is the current one with servers appended (indices of
        the old servers unchanged), there from slot ``at`` on (default: the current slot;
        utilisation counts each server's capacity from then). The policy must accept it
        through an ``on_cluster_change(cluster)`` method; raises ``ValueError`` if it has none
        or the new cluster does not extend the old one."""
        old = self.cluster.servers
        if cluster.servers[:len(old)] != old:
            raise ValueError("the new cluster must keep the old servers first, in order")
        hook = getattr(self.policy, "on_cluster_change", None)
        if hook is None:
            raise ValueError(f"policy {self.policy.name!r} cannot take new servers while it runs")
        hook(cluster)
        self.cluster = cluster
        self._pool_rows = _pool_rows(cluster)
        self._clusters.append((self.state.t if at is None else at, cluster))

    def resolve(self, spec: JobSpec) -> Job:
        """``spec`` resolved on the loop's slot length, horizon and window cap
        (:func:`~psched.model.resolve_job`); a known job (``known_jobs``) is taken from the
        resolution made when the loop started, if it is the same spec object on the same
        three (the same job: :func:`~psched.model.resolve_job` is a function of them)."""
        got = self._known.pop(id(spec), None)
        if got is not None and got[0] is spec and got[2] == self._resolve_key():
            return got[1]
        return resolve_job(spec, self.cluster.slot_seconds, self.horizon, self.max_window)

    def _resolve_key(self) -> tuple[float, int, int | None]:
        """What :func:`~psched.model.resolve_job` reads besides the spec."""
        return (self.cluster.slot_seconds, self.horizon, self.max_window)

    # -- the loop ---------------------------------------------------------------------------
    def step(self) -> SlotReport:
        """Run one slot: arrivals -> decisions -> plan -> check -> apply -> advance -> record."""
        t = self.state.t
        self.clock.wait_until(t)
        plan, jobs = self.begin_slot(t)
        report = self.executor.apply(t, plan, jobs)
        self.end_slot(t, plan, jobs, report)
        return report

    def begin_slot(self, t: int) -> tuple[SlotPlan, dict[str, Job]]:
        """Slot ``t`` has begun: run the before-slot hooks, decide the arrivals due, ask the
        policy for the slot's plan and check it. Returns the plan and the active jobs (what
        the executor's ``apply`` takes)."""
        st = self.state
        for hook in self.before_slot:
            hook(t)
        self.admit(t, self._due(t))
        self.admit_held(t)
        records = st.records
        view = View(
            t=t,
            cluster=self.cluster,
            horizon=self.horizon,
            active=self._statuses.of(st),
            arrived=tuple(st.arrived),
            completed=tuple(st.completed_last),
        )
        t0 = time.perf_counter()
        plan = {j: a for j, a in self.policy.plan(view).items() if a.n_workers or a.n_ps}
        plan_ms = (time.perf_counter() - t0) * 1e3
        if not self.policy.commits_on_arrival and view.event:
            st.decision_ms.append(sum(st.event_ms) + plan_ms)
        st.arrived.clear()
        st.event_ms.clear()
        active_jobs = {j: records[j].job for j in st.active}
        if self.check:
            self._checker.check(t, plan, self.cluster, active_jobs)
        return plan, active_jobs

    def end_slot(self, t: int, plan: SlotPlan, jobs: Mapping[str, Job],
                 report: SlotReport) -> None:
        """Slot ``t`` ran ``plan``: record it, add the reported progress, complete and release
        finished jobs, move to slot ``t + 1`` and run the after-slot hooks."""
        st = self.state
        self.record(t, plan, jobs)
        self._advance(t, report.progress)
        self._statuses.touch(plan, report.progress)
        st.t += 1
        st.slots_run += 1
        for hook in self.after_slot:
            hook(t, plan, report)

    def _due(self, t: int) -> list[JobSpec]:
        """Booked jobs whose slot has come (their arrival made ``t`` if it was earlier: a
        restarted service), then the arrival source's."""
        st = self.state
        due: list[JobSpec] = []
        if st.booked:
            due = [dataclasses.replace(s, arrival=max(s.arrival, t))
                   for s in st.booked if s.arrival <= t]
            st.booked = [s for s in st.booked if s.arrival > t]
        return due + self.arrivals.pop(t)

    # -- what the owner of a running loop may do between slots ------------------------------
    def known(self, job_id: str) -> bool:
        """True if a job with this id arrived or is booked."""
        return job_id in self.state.records or any(s.job_id == job_id
                                                   for s in self.state.booked)

    def idle(self) -> bool:
        """No job is active or booked."""
        return not self.state.active and not self.state.booked

    def book(self, spec: JobSpec) -> None:
        """Hold ``spec`` until slot ``spec.arrival`` begins; it is decided then.

        Raises
        ------
        ValueError
            A job with this id arrived or was booked before.
        """
        if self.known(spec.job_id):
            raise ValueError(f"job id {spec.job_id!r} arrived twice")
        bisect.insort_right(self.state.booked, spec, key=lambda s: s.arrival)

    def admit(self, t: int, specs: Sequence[JobSpec], *,
              forced: Mapping[str, Decision] | None = None) -> list[Admission]:
        """Screen and decide each arrival in slot ``t`` now (a live service calls it as jobs
        are submitted); one :class:`Admission` per spec, in order.

        ``forced``: decisions made before (a journal), by job id. A policy with a
        ``restore(job, decision)`` method re-applies each as it was; any other policy decides
        again, and the forced decision wins where they differ (logged).

        Raises
        ------
        ValueError
            A job with this id arrived before.
        """
        out = [self._admit_one(t, spec, None if forced is None else forced.get(spec.job_id))
               for spec in specs]
        for hook in self.on_decision:
            for adm in out:
                hook(adm)
        return out

    def _admit_one(self, t: int, spec: JobSpec, forced: Decision | None) -> Admission:
        st = self.state
        if spec.job_id in st.records:
            raise ValueError(f"job id {spec.job_id!r} arrived twice")
        job = self.resolve(spec)
        rec = JobRecord(job=job)
        st.records[spec.job_id] = rec
        if spec.arrival >= self.horizon:
            rec.reason = REJECT_PAST_HORIZON
        elif cannot_fit(job, self.cluster):
            rec.reason = REJECT_CANNOT_FIT
        rec.decided = t
        if rec.reason:
            return Admission(job_id=spec.job_id, slot=t, admitted=False, reason=rec.reason,
                             work=job.work)
        decision, ms = self._decide(job, t, forced)
        if self.policy.commits_on_arrival:
            st.decision_ms.append(ms)
        else:
            st.event_ms.append(ms)
        rec.admitted, rec.payoff = decision.admitted, decision.payoff
        rec.promised = decision.promised if decision.admitted else None
        if decision.admitted:
            st.active.append(spec.job_id)
            st.arrived.append(spec.job_id)
        else:
            rec.reason = decision.reason or "rejected"
            if (decision.hold and t < job.last_slot
                    and getattr(self.policy, "admit_held", None) is not None):
                st.held[spec.job_id] = rec.reason
                rec.reason, rec.decided = HELD, None
        return Admission(job_id=spec.job_id, slot=t, admitted=decision.admitted,
                         reason=rec.reason, payoff=decision.payoff, work=job.work,
                         schedule=dict(decision.schedule or {}), latency_ms=ms,
                         promised=rec.promised)

    def admit_held(self, t: int, *,
                   forced: Mapping[str, Decision] | None = None) -> list[Admission]:
        """Deferred admission at the boundary of slot ``t``: the jobs held
        (``Decision.hold``) whose window closed before ``t`` are rejected for good, with the
        reason the policy gave when it held them; the others go, in arrival order, to the
        policy's ``admit_held(jobs, view)`` (see :class:`~psched.policies.base.Policy`), which
        returns a :class:`~psched.model.Decision` for each job it decides now (the view holds
        the active jobs as measured, as for ``plan``; admitted: the
        job becomes active, with its promise, as an arrival of this slot; rejected without
        ``hold``: rejected for good now) and leaves the others held. Called by
        :meth:`begin_slot` after the slot's arrivals; one :class:`Admission` per job decided
        (slot ``t``), also passed to the ``on_decision`` hooks. O(held) plus the policy.

        ``forced``: the decisions made at this boundary before (a journal), by job id, for
        held jobs only. A policy with a ``restore_held(job, decision)`` method re-applies each
        as it was; any other policy is offered those jobs again (``admit_held``) and the
        forced decision wins where they differ (logged)."""
        st = self.state
        self.expire_held(t)
        hook = getattr(self.policy, "admit_held", None)
        if not st.held or hook is None:
            return []
        if forced is not None:
            decisions, ms = self._forced_held(t, forced)
        else:
            jobs = [st.records[j].job for j in st.held]
            t0 = time.perf_counter()
            decisions = hook(jobs, self._held_view(t))
            ms = (time.perf_counter() - t0) * 1e3
        out: list[Admission] = []
        for job_id, decision in decisions.items():
            if job_id not in st.held:
                raise ValueError(f"admit_held decided {job_id!r}, which is not held")
            rec = st.records[job_id]
            if decision.admitted:
                del st.held[job_id]
                rec.admitted, rec.payoff, rec.reason = True, decision.payoff, ""
                rec.promised, rec.decided = decision.promised, t
                st.active.append(job_id)
                st.arrived.append(job_id)
            elif not decision.hold:
                self._settle_held(job_id, t, decision.reason)
            else:
                continue
            out.append(Admission(job_id=job_id, slot=t, admitted=decision.admitted,
                                 reason=rec.reason, payoff=decision.payoff,
                                 work=rec.job.work, schedule=dict(decision.schedule or {}),
                                 latency_ms=ms, promised=rec.promised))
        if not self.policy.commits_on_arrival:
            st.event_ms.append(ms)  # counted with the slot's event, if it is one
        elif out:
            st.decision_ms.append(ms)
        for hook_ in self.on_decision:
            for adm in out:
                hook_(adm)
        return out

    def expire_held(self, t: int) -> list[str]:
        """Reject for good, in slot ``t``, the held jobs whose window closed before ``t``
        (with the reason the policy gave when it held them); their ids, in arrival order.
        :meth:`admit_held` starts with it; a restarted service calls it through
        :meth:`restore`. O(held)."""
        gone = [j for j in self.state.held if self.state.records[j].job.last_slot < t]
        for job_id in gone:
            self._settle_held(job_id, t)
        return gone

    def _held_view(self, t: int) -> View:
        st = self.state
        return View(t=t, cluster=self.cluster, horizon=self.horizon,
                    active=self._statuses.of(st), completed=tuple(st.completed_last))

    def _forced_held(self, t: int, forced: Mapping[str, Decision]
                     ) -> tuple[dict[str, Decision], float]:
        """The decisions of :meth:`admit_held` replayed from a journal (see there)."""
        st = self.state
        jobs = [st.records[j].job for j in forced if j in st.held]
        restore = getattr(self.policy, "restore_held", None)
        t0 = time.perf_counter()
        if restore is not None:
            for job in jobs:
                restore(job, forced[job.job_id])
        else:
            again = self.policy.admit_held(jobs, self._held_view(t))  # type: ignore[attr-defined]
            for job in jobs:
                mine, theirs = forced[job.job_id], again.get(job.job_id)
                if theirs is None or (theirs.admitted, theirs.hold, dict(theirs.schedule or {})
                                      ) != (mine.admitted, mine.hold, dict(mine.schedule or {})):
                    log.warning("held job %s decided again differs from its record; the "
                                "record wins", job.job_id)
        ms = (time.perf_counter() - t0) * 1e3
        return {job.job_id: forced[job.job_id] for job in jobs}, ms

    def _settle_held(self, job_id: str, t: int, reason: str = "") -> None:
        """A held job is rejected for good in slot ``t`` (its held reason unless given)."""
        held_reason = self.state.held.pop(job_id)
        rec = self.state.records[job_id]
        rec.reason, rec.decided = reason or held_reason, t

    def _decide(self, job: Job, t: int, forced: Decision | None) -> tuple[Decision, float]:
        view = View(t=t, cluster=self.cluster, horizon=self.horizon, active={})
        restore = None if forced is None else getattr(self.policy, "restore", None)
        t0 = time.perf_counter()
        if forced is not None and restore is not None:
            restore(job, forced)
            decision = forced
        else:
            decision = self.policy.on_arrival(job, view)
        ms = (time.perf_counter() - t0) * 1e3
        if forced is not None and (decision.admitted != forced.admitted
                                   or decision.hold != forced.hold
                                   or dict(decision.schedule or {})
                                   != dict(forced.schedule or {})):
            log.warning("job %s decided again differs from its record; the record wins",
                        job.job_id)
            decision = forced
        return decision, ms

    def replan(self, job_id: str, t: int, *, work: int | None = None,
               forced: Decision | None = None, release: bool = False) -> Admission:
        """Re-decide an active job for its remaining work (``work``, default
        ``ceil(W - done)``) from slot ``t``, its utility still counted from its arrival: the
        policy's ``on_arrival`` on the residual job (``forced`` as in :meth:`admit`).
        ``release``: first let the policy forget the job's commitments from ``t`` on (its
        ``release(job_id, t)`` method, if it has one). The job stays active either way; the
        owner drops it if it wants to. One policy decision."""
        st = self.state
        rec = st.records[job_id]
        left = work if work is not None else max(1, math.ceil(rec.job.work - rec.done - 1e-9))
        residual = Job(spec=rec.job.spec, work=left, window=rec.job.window)
        if release:
            self.release(job_id, t)
        decision, ms = self._decide(residual, t, forced)
        st.decision_ms.append(ms)
        adm = Admission(job_id=job_id, slot=t, admitted=decision.admitted,
                        reason=decision.reason, payoff=decision.payoff, work=left,
                        schedule=dict(decision.schedule or {}) if decision.admitted else {},
                        latency_ms=ms)
        for hook in self.on_decision:
            hook(adm)
        return adm

    def release(self, job_id: str, t: int) -> bool:
        """Let the policy forget a job's commitments from slot ``t`` on (its
        ``release(job_id, t)`` method: a job that finished early, or one re-planned into
        freed capacity). False if the policy has no such method."""
        hook = getattr(self.policy, "release", None)
        if hook is None:
            return False
        hook(job_id, t)
        return True

    def drop(self, job_id: str, reason: str) -> bool:
        """Stop an active job for good (cancelled, failed, dropped): it leaves the active
        set with ``reason`` and the executor releases it. False if it was not active."""
        st = self.state
        if job_id not in st.active:
            return False
        st.active.remove(job_id)
        st.records[job_id].reason = reason
        self.executor.release(job_id)
        return True

    def restore(self, *, slots: Iterable[tuple[int, SlotPlan]] = (),
                done: Mapping[str, float] | None = None,
                completed: Mapping[str, int] | None = None,
                dropped: Mapping[str, str] | None = None) -> None:
        """Rebuild the state of finished slots from a journal, after its decisions were
        re-applied with :meth:`admit` (and :meth:`replan`): the executed ``slots`` (slot,
        plan) in order, each job's work ``done``, ``completed`` jobs (their slot) and
        ``dropped`` ones (their reason). The next slot is the one after the last executed;
        held jobs whose window closed before it are rejected now (:meth:`expire_held`), as
        that slot's boundary would have."""
        st = self.state
        for t, plan in slots:
            self.record(t, plan, {j: st.records[j].job for j in plan})
            st.t = t + 1
            st.slots_run += 1
        for job_id, amount in (done or {}).items():
            st.records[job_id].done = amount
        for job_id, slot in (completed or {}).items():
            st.records[job_id].completion = slot
            if job_id in st.active:
                st.active.remove(job_id)
        for job_id, reason in (dropped or {}).items():
            st.records[job_id].reason = reason
            if job_id in st.active:
                st.active.remove(job_id)
        st.arrived.clear()
        st.completed_last = []
        self.expire_held(st.t)
        self._statuses = _ActiveStatuses()  # records changed wholesale: rebuild the View

    def record(self, t: int, plan: SlotPlan, jobs: Mapping[str, Job]) -> None:
        """Record an executed plan of slot ``t`` (a restarted service replays its journal)."""
        st = self.state
        for job_id, alloc in plan.items():
            for h, n in alloc.workers:
                st.allocations.append((t, job_id, h, "worker", n))
            for k, n in alloc.ps:
                st.allocations.append((t, job_id, k, "ps", n))
            rec = st.records[job_id]
            if rec.first_slot is None and alloc.n_workers > 0:
                rec.first_slot = t
        if plan:
            usage = self._checker.usage(plan, self.cluster, jobs)
            assert st.usage is not None
            np.add.at(st.usage, self._pool_rows, usage)

    def _advance(self, t: int, progress: Mapping[str, float]) -> None:
        st = self.state
        finished: list[str] = []
        for job_id, amount in progress.items():
            rec = st.records[job_id]
            rec.done += amount
            if rec.done >= rec.job.work - 1e-9 and rec.completion is None:
                rec.completion = t
                finished.append(job_id)
        for job_id in finished:
            st.active.remove(job_id)
            self.executor.release(job_id)
        st.completed_last = finished

    def run(self, until: int | None = None,
            on_slot: Callable[[int], None] | None = None) -> RunResult:
        """Run slots until ``until`` (default the horizon), then collect the result."""
        end = self.horizon if until is None else until
        t0 = time.perf_counter()
        while self.state.t < end:
            self.step()
            if on_slot is not None:
                on_slot(self.state.t)
        # jobs that never arrived within the horizon; jobs still held are rejected now
        for spec in self.arrivals.pop(1 << 62) if end >= self.horizon else []:
            rec = JobRecord(job=self.resolve(spec), reason=REJECT_PAST_HORIZON,
                            decided=self.state.t)
            self.state.records.setdefault(spec.job_id, rec)
        for job_id in list(self.state.held) if end >= self.horizon else []:
            self._settle_held(job_id, self.state.t)
        return self.result(wall_s=time.perf_counter() - t0)

    def result(self, wall_s: float = 0.0) -> RunResult:
        st = self.state
        assert st.usage is not None
        records = dict(sorted(st.records.items(), key=lambda kv: kv[1].job.arrival))
        return RunResult(
            policy=self.policy.name,
            cluster=self.cluster,
            horizon=self.horizon,
            records=records,
            allocations=st.allocations,
            usage=st.usage.copy(),
            decision_ms=list(st.decision_ms),
            report=dict(self.policy.report()),
            wall_s=wall_s,
            capacity_slots=capacity_slots(self._clusters, self.horizon),
        )


def simulate(
    specs: Sequence[JobSpec],
    cluster: Cluster,
    policy: Policy,
    horizon: int,
    *,
    hindsight: bool = True,
    history: Sequence[JobSpec] = (),
    max_window: int | None = None,
    seed: int = 0,
    check: bool = True,
    on_slot: Callable[[int], None] | None = None,
) -> RunResult:
    """Replay ``specs`` through ``policy`` on the simulated executor for ``horizon`` slots.

    The objects alive when the run starts (the trace's jobs, the cluster: long-lived, never
    garbage during the run) are moved out of the cyclic collector's reach for the run
    (``gc.freeze``, undone at the end; skipped if the caller froze objects itself): a full
    collection then rescans only what the run allocated, instead of pausing one decision for
    tens of milliseconds per 100k trace objects."""
    with _frozen_heap():
        return _simulate(specs, cluster, policy, horizon, hindsight=hindsight, history=history,
                         max_window=max_window, seed=seed, check=check, on_slot=on_slot)


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """``gc.freeze()`` for the block, unless something is frozen already."""
    mine = gc.get_freeze_count() == 0
    if mine:
        gc.freeze()
    try:
        yield
    finally:
        if mine:
            gc.unfreeze()


def _simulate(specs: Sequence[JobSpec], cluster: Cluster, policy: Policy, horizon: int, *,
              hindsight: bool, history: Sequence[JobSpec], max_window: int | None, seed: int,
              check: bool, on_slot: Callable[[int], None] | None) -> RunResult:
    loop = SchedulerLoop(
        cluster=cluster,
        policy=policy,
        horizon=horizon,
        arrivals=TraceArrivals(specs),
        known_jobs=specs if hindsight else (),
        history_jobs=history,
        max_window=max_window,
        seed=seed,
        check=check,
    )
    return loop.run(on_slot=on_slot)
