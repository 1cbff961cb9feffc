"""The one scheduling loop: arrivals -> decisions -> apply plans -> advance -> record.

The same :class:`SchedulerLoop` serves the trace-driven simulator and the live service
(:mod:`ray_cluster.service`, its real-time driver). Everything that differs between them is
injected:

* :class:`~psched.core.arrivals.ArrivalSource` -- a trace or a queue filled while the loop runs;
* :class:`~psched.core.arrivals.Clock` -- simulated time or a wall clock;
* :class:`~psched.core.executor.Executor` -- modelled or measured progress.

The loop keeps all of its own state in :class:`~psched.core.records.LoopState`, plain data that
a live service can save and restore. A policy keeps its own state.

The API a live owner uses (between slots, under its own lock): :meth:`SchedulerLoop.admit`
returns an :class:`~psched.core.records.Admission` per job (decision, payoff, committed
schedule, latency); :meth:`~SchedulerLoop.book` holds a job for a later arrival slot;
:meth:`~SchedulerLoop.admit_held` decides jobs a policy held for deferred admission (each slot,
after its arrivals); :meth:`~SchedulerLoop.replan` re-decides a job's remaining work;
:meth:`~SchedulerLoop.release` and :meth:`~SchedulerLoop.drop`; :meth:`~SchedulerLoop.restore`
rebuilds finished slots from a journal; ``before_slot``/``after_slot``/``on_decision`` hooks;
and :meth:`~SchedulerLoop.step` split into :meth:`~SchedulerLoop.begin_slot`, the executor's
``apply`` and :meth:`~SchedulerLoop.end_slot`, so that a real-time driver runs the same slot
with its own clock.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from psched.core.arrivals import ArrivalSource, Clock, SimClock
from psched.core.checker import PlanChecker
from psched.core.executor import Executor, SimulatedExecutor, SlotReport
from psched.core.held import HeldAdmission
from psched.core.keeping import Keeping, Restatement
from psched.core.model import (
    RESOURCES,
    Alloc,
    Cluster,
    Decision,
    Job,
    JobSpec,
    SlotPlan,
    resolve_job,
)
from psched.core.policy import Capabilities, Policy, RunContext, View, capabilities
from psched.core.records import (
    HELD,
    REJECT_CANNOT_FIT,
    REJECT_PAST_HORIZON,
    ActiveStatuses,
    Admission,
    AfterSlot,
    BeforeSlot,
    JobRecord,
    LoopState,
    RunResult,
    cannot_fit,
    capacity_slots,
    pool_rows,
)
from psched.core.restore import Restoring
from psched.core.speed import SpeedBook

__all__ = ["SchedulerLoop"]

log = logging.getLogger(__name__)


class SchedulerLoop(HeldAdmission, Keeping, Restoring):
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
        #: the policy's optional capabilities, checked once here (raises ``TypeError`` on a
        #: capability offered in part or with other parameters)
        self.caps: Capabilities = capabilities(policy)
        self.horizon = horizon
        self.arrivals = arrivals
        self.executor: Executor = executor or SimulatedExecutor()
        #: an executor that does not say it is the model (one with only ``apply``,
        #: ``release`` and ``close``, all the loop calls) is taken as a real one
        as_modelled = getattr(self.executor, "as_modelled", None)
        self.modelled = bool(as_modelled()) if as_modelled is not None else False
        self.clock: Clock = clock or SimClock()
        self.max_window = max_window
        self.check = check
        self.state = state or LoopState(usage=np.zeros((2, len(RESOURCES))))
        self.before_slot: list[BeforeSlot] = list(before_slot)
        self.after_slot: list[AfterSlot] = list(after_slot)
        #: called with every :class:`Admission` the loop makes (``admit``, ``replan``,
        #: and arrivals decided when a slot begins)
        self.on_decision: list[Callable[[Admission], None]] = []
        #: called with every promise re-stated (:mod:`psched.core.keeping`)
        self.on_restate: list[Callable[[Restatement], None]] = []
        #: each job's measured speed (:mod:`psched.core.speed`)
        self.speeds = SpeedBook()
        #: each job's committed schedule (policies committing on arrival)
        self.schedules: dict[str, dict[int, Alloc]] = {}
        self.short: set[str] = set()  # measured slower than their schedules assume
        #: held jobs as their policy was offered them (work at their prior speed)
        self.planned_jobs: dict[str, Job] = {}
        self.held_speeds: dict[str, float] = {}
        #: jobs running on idle capacity until they complete (:mod:`psched.core.keeping`)
        self.background: list[str] = []
        self.last_plan: dict[str, Alloc] = {}  # the last slot's, for the speed estimates
        self._pool_rows = pool_rows(cluster)
        self._checker = PlanChecker()  # check and usage, recomputed only where plans changed
        self._statuses = ActiveStatuses()  # the View's JobStatus objects, kept between slots
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
        utilisation counts each server's capacity from then). The policy must take it
        (:class:`~psched.core.policy.TakesClusterChanges`); raises ``ValueError`` if it
        cannot or the new cluster does not extend the old one."""
        old = self.cluster.servers
        if cluster.servers[:len(old)] != old:
            raise ValueError("the new cluster must keep the old servers first, in order")
        hook = self.caps.cluster_changes
        if hook is None:
            raise ValueError(f"policy {self.policy.name!r} cannot take new servers while it runs")
        hook.on_cluster_change(cluster)
        self.cluster = cluster
        self._pool_rows = pool_rows(cluster)
        self._clusters.append((self.state.t if at is None else at, cluster))

    def resolve(self, spec: JobSpec) -> Job:
        """``spec`` resolved on the loop's slot length, horizon and window cap
        (:func:`~psched.core.model.resolve_job`); a known job (``known_jobs``) is taken from the
        resolution made when the loop started, if it is the same spec object on the same
        three (the same job: :func:`~psched.core.model.resolve_job` is a function of them)."""
        got = self._known.pop(id(spec), None)
        if got is not None and got[0] is spec and got[2] == self._resolve_key():
            return got[1]
        return resolve_job(spec, self.cluster.slot_seconds, self.horizon, self.max_window)

    def _resolve_key(self) -> tuple[float, int, int | None]:
        """What :func:`~psched.core.model.resolve_job` reads besides the spec."""
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
        self.behind(t)
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
        if self.last_plan:
            planned = plan
            plan = self.stay_put(plan, active_jobs, lambda: self._checker.usage(
                planned, self.cluster, active_jobs))
        if self.background:
            plan = self.fill_background(plan, active_jobs,
                                        self._checker.usage(plan, self.cluster, active_jobs))
        if self.check:
            self._checker.check(t, plan, self.cluster, active_jobs)
        self.restate(t, plan)
        return plan, active_jobs

    def end_slot(self, t: int, plan: SlotPlan, jobs: Mapping[str, Job],
                 report: SlotReport) -> None:
        """Slot ``t`` ran ``plan``: record it, add the reported progress, complete and release
        finished jobs, move to slot ``t + 1`` and run the after-slot hooks."""
        st = self.state
        self.record(t, plan, jobs)
        self._advance(t, report.progress)
        self._statuses.touch(plan, report.progress, self.learn(t, plan, report))
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
              forced: Mapping[str, Decision] | None = None,
              speed: Mapping[str, float] | None = None) -> list[Admission]:
        """Screen and decide each arrival in slot ``t`` now (a live service calls it as jobs
        are submitted); one :class:`Admission` per spec, in order.

        ``speed``: the speed each job was decided at before (a journal), by job id; by
        default its workload's planned speed (:meth:`planned_speed`).

        ``forced``: decisions made before (a journal), by job id. A policy that restores
        decisions (:class:`~psched.core.policy.RestoresDecisions`) re-applies each as it was;
        any other policy decides again, and the forced decision wins where they differ
        (logged).

        Raises
        ------
        ValueError
            A job with this id arrived before.
        """
        out = [self._admit_one(t, spec, None if forced is None else forced.get(spec.job_id),
                               None if speed is None else speed.get(spec.job_id))
               for spec in specs]
        for hook in self.on_decision:
            for adm in out:
                hook(adm)
        return out

    def _admit_one(self, t: int, spec: JobSpec, forced: Decision | None,
                   speed: float | None) -> Admission:
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
        used = self.planned_speed(job.spec.workload) if speed is None else speed
        planned = self.as_planned(job, used)
        decision, ms = self._decide(planned, t, forced)
        if self.policy.commits_on_arrival:
            st.decision_ms.append(ms)
        else:
            st.event_ms.append(ms)
        rec.admitted, rec.payoff = decision.admitted, decision.payoff
        promised = decision.promised if decision.admitted else None
        if decision.admitted:
            self.believe_prior(rec)
            if promised is not None:
                rec.promised = self.state_promise(
                    rec, promised, t,
                    decision.schedule if self.policy.commits_on_arrival else None)
                rec.promised_at = t
            st.active.append(spec.job_id)
            st.arrived.append(spec.job_id)
        else:
            rec.reason = decision.reason or "rejected"
            if decision.hold and t < job.last_slot and self.caps.holds is not None:
                st.held[spec.job_id] = rec.reason
                rec.reason, rec.decided = HELD, None
                self.held_speeds[spec.job_id] = used
                if planned is not job:
                    self.planned_jobs[spec.job_id] = planned
        adm = Admission(job_id=spec.job_id, slot=t, admitted=decision.admitted,
                        reason=rec.reason, payoff=decision.payoff, work=planned.work,
                        schedule=dict(decision.schedule or {}), latency_ms=ms,
                        promised=promised, stated=rec.promised,
                        planned_speed=used)
        if self.policy.commits_on_arrival:
            self.note_schedule(adm)
        return adm

    def _decide(self, job: Job, t: int, forced: Decision | None) -> tuple[Decision, float]:
        view = View(t=t, cluster=self.cluster, horizon=self.horizon, active={})
        restore = None if forced is None else self.caps.restores
        t0 = time.perf_counter()
        if forced is not None and restore is not None:
            restore.restore(job, forced)
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
               forced: Decision | None = None, release: bool = False,
               behind: bool = False, emit: bool = True) -> Admission:
        """Re-decide an active job for its remaining work (``work``, default
        ``ceil(W - done)``) from slot ``t``, its utility still counted from its arrival: the
        policy's ``on_arrival`` on the residual job (``forced`` as in :meth:`admit`).
        ``release``: first let the policy forget the job's commitments from ``t`` on (if it
        releases jobs: :class:`~psched.core.policy.ReleasesJobs`). The job stays active
        either way; the owner drops it if it wants to. One policy decision."""
        st = self.state
        rec = st.records[job_id]
        left = work if work is not None else self.work_left(job_id)
        residual = Job(spec=rec.job.spec, work=left, window=rec.job.window)
        if release:
            self.release(job_id, t)
        decision, ms = self._decide(residual, t, forced)
        st.decision_ms.append(ms)
        adm = Admission(job_id=job_id, slot=t, admitted=decision.admitted,
                        reason=decision.reason, payoff=decision.payoff, work=left,
                        schedule=dict(decision.schedule or {}) if decision.admitted else {},
                        latency_ms=ms, behind=behind)
        if self.policy.commits_on_arrival:
            self.note_schedule(adm)
        for hook in self.on_decision if emit else ():
            hook(adm)
        return adm

    def release(self, job_id: str, t: int) -> bool:
        """Let the policy forget a job's commitments from slot ``t`` on (a job that finished
        early, or one re-planned into freed capacity). False if the policy does not release
        jobs (:class:`~psched.core.policy.ReleasesJobs`)."""
        hook = self.caps.releases
        if hook is None:
            return False
        hook.release(job_id, t)
        if job_id in self.schedules:
            self.schedules[job_id] = {s: a for s, a in self.schedules[job_id].items() if s < t}
        return True

    def drop(self, job_id: str, reason: str) -> bool:
        """Stop an active job for good (cancelled, failed, dropped): it leaves the active
        set with ``reason`` and the executor releases it. False if it was not active."""
        st = self.state
        if job_id not in st.active:
            return False
        st.active.remove(job_id)
        st.records[job_id].reason = reason
        self.schedules.pop(job_id, None)
        if job_id in self.background:
            self.background.remove(job_id)
        self.executor.release(job_id)
        return True

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
            if t > rec.job.last_slot or job_id in self.background:
                rec.background += amount
            if rec.done >= rec.job.work - 1e-9 and rec.completion is None:
                rec.completion = t
                finished.append(job_id)
        for job_id in finished:
            st.active.remove(job_id)
            self.schedules.pop(job_id, None)
            if job_id in self.background:
                self.background.remove(job_id)
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
            etas=self.etas(),
        )


