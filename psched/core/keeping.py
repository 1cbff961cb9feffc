"""What the scheduling loop does when reality departs from the plans: the same rules for every
policy, in simulation and in the live service alike.

:class:`Keeping` is the part of :class:`~psched.core.loop.SchedulerLoop` that applies them:

* **Learn each job's real speed** (:mod:`psched.core.speed`): after every slot, from the
  work each job did against the workers its plan gave it, in the slots it ran as it ran
  before (a start, resume or resize loses start-up time, which is not its speed: the
  re-plans see that loss as work left). Policies then see every job's work
  left at the speed measured (:attr:`psched.core.policy.JobStatus.remaining`).
* **Decide with what is known.** A job arriving is offered to its policy resolved (work and
  window) at its workload's prior speed, less the share of its work it is expected to lose to
  start-up, as often as this loop's plans have started, resumed or resized its workload's
  jobs (:meth:`Keeping.planned_speed`): a cluster measured slow, or one whose jobs pay for
  every restart, admits as it really is. A policy that commits a schedule on arrival
  commits it at a cautious prior (the promise's quantile of the spread between the
  workload's jobs), so that a job slower than its workload's mean still fits its schedule.
* **Promises sized to what is known.** The promise a policy makes (``Decision.promised``) is
  stated to the user with :meth:`~psched.core.speed.SpeedBook.slack` slots more: what
  covers the speed estimate's uncertainty over the slots to go (0 while nothing is
  uncertain). While a job has not run and its workload runs other than as profiled, or
  none of its workload has run yet on an executor other than the model, no promise names
  its first slot (its own speed is unseen until that slot ends).
* **A promise that can no longer be kept is re-stated as soon as that is known**: at the
  boundary of slot ``t``, once the slot's plan is known, a job that even with the workers
  that plan gives it and every worker it may have from the next slot on (along its committed
  schedule, where its policy commits one), at a cautious speed
  (:meth:`~psched.core.speed.SpeedBook.cautious`: no more than its start slots showed until
  a steady slot tells its speed from start-up) and losing its workload's measured start-up
  cost in each slot it (re)starts or is resized (a resume after a gap included),
  would finish after its promise gets a new one: that finish plus its slack, at least one
  slot (``JobRecord.restated``; the ``on_restate`` hooks see it). Re-stated no later than
  the slot it replaces, the promise counts as kept if the job meets the new one.
* **An admitted job is never lost.** A job of a policy that commits schedules on arrival
  measured slower than its schedule assumes gets the worker-slots it misses reserved on idle
  capacity as soon as that is measured (:meth:`Keeping.top_up`), at no more than the speed
  its own slots allow (the workload's prior may make a plan hopeful, not a reservation); one
  whose schedule ended before it finished is re-decided for its work left at its measured
  speed (the policy's ``on_arrival`` on the residual job); if the policy finds it no payoff,
  the job runs **in the background**: on the capacity of each slot that the plans leave idle,
  until it completes (``JobRecord.background`` counts its worker-slots apart, as it does for
  every job's work after its window). Only the owner drops a job (cancelled, failed).

With reality as planned, every speed is exactly 1.0, every slack 0, no job is ever behind or
re-stated: the loop decides exactly as without these rules, and on the model's executor
promises as well (an executor that is not the model only promises a job whose workload has
not run yet no sooner than the slot after its first).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Iterable, Mapping

from psched.core.eta import WAITS_ENDED, Eta, eta
from psched.core.executor import SlotReport
from psched.core.idle import IdleRoom
from psched.core.model import Alloc, Decision, Job, SlotPlan, ceil_eps, resolve_job
from psched.core.policy import Capabilities, Policy
from psched.core.records import Admission, JobRecord
from psched.core.speed import SPREAD_NOISE, Z_PROMISE

__all__ = ["RESERVED", "Keeping", "Restatement"]

#: reason of a schedule the loop reserved on idle capacity for a job behind
#: (:meth:`Keeping.reserve_idle`), not found by its policy
RESERVED = "reserved_idle"

#: (job id, slot it was made at, the promise before, the new one)
Restatement = tuple[str, int, int, int]


def _first_run(t: int, schedule: Mapping[int, Alloc] | None, now: Alloc | None = None, *,
               planned: bool = False) -> int:
    """The first slot from ``t`` a job runs in: ``t`` where slot ``t``'s plan is known
    (``planned``) and gives it workers (``now``), else its ``schedule``'s first slot from the
    first it may still run in, else that slot."""
    if planned and now is not None and now.n_workers:
        return t
    start = t + 1 if planned else t
    return min((s for s in schedule or () if s >= start), default=start)


class Keeping(IdleRoom):
    """The rules of the module docstring, over the loop's state, policy and cluster (the
    idle-capacity rules in :class:`~psched.core.idle.IdleRoom`)."""

    # state, cluster, horizon, speeds, schedules, background, last_plan: as IdleRoom declares
    policy: Policy
    max_window: int | None
    on_decision: list[Callable[[Admission], None]]
    on_restate: list[Callable[[Restatement], None]]
    #: jobs of a committing policy measured slower than profiled in the last slot
    short: set[str]
    caps: Capabilities
    #: the executor is the model (:meth:`~psched.core.executor.Executor.as_modelled`)
    modelled: bool

    replan: Callable[..., Admission]  #: the loop's re-decision of an active job

    # -- promises ------------------------------------------------------------------------------
    def state_promise(self, rec: JobRecord, promised: int, t: int,
                      schedule: Mapping[int, Alloc] | None = None) -> int:
        """The promise stated for ``rec``'s job when its policy promises ``promised`` in slot
        ``t`` (with the committed ``schedule``, if it commits one): that, or once its
        workload's start-up cost is measured the slot the schedule finishes the job in when
        it loses that cost in each slot it starts or is resized (the later), plus the slack
        its speed's uncertainty needs over the slots to go."""
        job = rec.job
        if schedule and self.speeds.startup(job.spec.workload) > 0.0:
            promised = max(promised, self._earliest_finish(rec, t, None, schedule))
        if self._unseen(rec):
            promised = max(promised, _first_run(t, schedule) + 1)
        return promised + self.speeds.slack(job.job_id, job.spec.workload,
                                            float(promised - t + 1))

    def _unseen(self, rec: JobRecord) -> bool:
        """True while ``rec``'s job has not run and its speed may be other than its profile
        says: its workload ran other than as profiled, or none of its workload was measured
        yet and the executor is not the model (:meth:`~psched.core.executor.Executor.
        as_modelled`). Nothing then tells its own speed before the end of its first slot, so
        no promise names that slot: only the slot after it can be vouched for, or re-stated
        in time."""
        w = rec.job.spec.workload
        if self.speeds.ran(rec.job.job_id):
            return False
        if not self.speeds.exact(w):
            return True
        return not self.speeds.seen(w) and not self.modelled

    def restate(self, t: int, plan: SlotPlan) -> list[Restatement]:
        """Re-state, at the boundary of slot ``t`` with its ``plan`` known, every promise that
        can no longer be kept (module docstring). O(active jobs)."""
        out: list[Restatement] = []
        records = self.state.records
        for job_id in self.state.active:
            rec = records[job_id]
            if rec.promised is None or rec.completion is not None:
                continue
            now = plan.get(job_id)
            finish = self._earliest_finish(rec, t, now, planned=True)
            if self._unseen(rec):  # it can finish no sooner than the slot after its first
                finish = max(finish, _first_run(t, self.schedules.get(job_id), now,
                                                      planned=True) + 1)
            if finish <= rec.promised:
                continue
            job = rec.job
            new = finish + max(1, self.speeds.slack(job_id, job.spec.workload,
                                                    float(finish - t + 1)))
            out.append((job_id, t, rec.promised, new))
            rec.restated.append((t, rec.promised, new))
            rec.promised = new
        for hook in self.on_restate:
            for r in out:
                hook(r)
        return out

    def _earliest_finish(self, rec: JobRecord, t: int, now: Alloc | None,
                         sched: Mapping[int, Alloc] | None = None, *,
                         planned: bool = False, gaps: bool = True) -> int:
        """The slot ``rec``'s job finishes in at the earliest, at a cautious speed: along its
        committed schedule (``sched``, by default the one noted) where the policy commits
        one, else with this slot's workers and then its most workers each slot; past the
        schedule's end, its most workers. ``planned``: slot ``t``'s plan is known and gives
        the job ``now`` (None: nothing), in place of what its schedule committed for ``t``.
        ``gaps``: a resume after a gap in the schedule loses the start-up cost, as the
        executor charges it (False: only a change of workers does)."""
        job_id = rec.job.job_id
        left = max(0.0, rec.job.work - rec.done)
        togo = max(1.0, left / (rec.speed * rec.job.max_workers))
        speed = self.speeds.cautious(job_id, rec.job.spec.workload, togo)
        keep = 1.0 - self.speeds.startup(rec.job.spec.workload)  # of a slot that (re)starts
        if sched is None:
            sched = self.schedules.get(job_id)
        before, prev = self.last_plan.get(job_id), t - 1
        end = t
        if sched is not None:
            steps = [(s, sched[s]) for s in sorted(sched) if s > t or (s == t and not planned)]
            if planned and now is not None and now.n_workers:
                steps.insert(0, (t, now))  # what slot t's plan gives it, not what was committed
            for s, alloc in steps:  # a resume after a gap starts it again, as a resize does
                restart = alloc != before or (gaps and s != prev + 1)
                left -= speed * alloc.n_workers * (keep if restart else 1.0)
                before, prev, end = alloc, s, s + 1
                if left <= 1e-9:
                    return s
        else:
            if now is not None:
                left -= speed * now.n_workers * (keep if now != before else 1.0)
            end = t + 1
            if left <= 1e-9:
                return t
        # past what is known: its most workers each slot, one (re)start first
        return end - 1 + ceil_eps(left / (speed * rec.job.max_workers)) + (keep < 1.0)

    def finish_along(self, job_id: str, t: int, schedule: Mapping[int, Alloc]) -> int:
        """The slot an active job finishes in at the earliest along ``schedule`` from slot
        ``t`` (then its most workers each slot), at a cautious speed and losing its
        workload's start-up cost in each slot that starts or resizes it: what a move into
        freed capacity is weighed by (its resizes, not the gaps it leaves)."""
        return self._earliest_finish(self.state.records[job_id], t, None, schedule,
                                     gaps=False)

    def work_to_ask(self, job_id: str) -> int:
        """The worker-slots an active job is re-decided for: its work left at its measured
        speed, once its workload's start-up cost is measured divided by the fraction of its
        worker-slots a job keeps from start-up under this loop's plans
        (:meth:`~psched.core.speed.SpeedBook.efficiency`)."""
        work = self.work_left(job_id)
        workload = self.state.records[job_id].job.spec.workload
        return max(1, ceil_eps(work / self.speeds.efficiency(workload)))

    def planned_speed(self, workload: str) -> float:
        """The speed a job of ``workload`` is decided at: its prior speed times the fraction
        of its worker-slots it is expected to keep from start-up under this loop's plans
        (:meth:`~psched.core.speed.SpeedBook.efficiency`); exactly 1.0 with reality as
        profiled. For a policy that commits a schedule on arrival, the prior speed is taken
        :data:`~psched.core.speed.Z_PROMISE` spreads of the workload's jobs below their mean
        (``mu exp(-Z sd / mu)``): the schedule covers the job, as a promise does, while its
        own speed is unknown; one that runs faster frees the rest for others."""
        mu, sd = self.speeds.prior(workload)
        if sd > SPREAD_NOISE * mu and self.policy.commits_on_arrival:  # covered, as promised
            mu *= math.exp(-Z_PROMISE * sd / mu)
        return mu * self.speeds.efficiency(workload)

    def etas(self) -> dict[str, Eta]:
        """When each held or active job is expected to start and finish under the plans as
        they stand, and why it waits (:mod:`psched.core.eta`); past the horizon, that the run
        ended. O(plan entries)."""
        st = self.state
        unfinished = {j: True for j in st.held}
        unfinished.update({j: False for j in st.active})
        if st.t >= self.horizon:
            return {j: Eta(waits=WAITS_ENDED) for j in unfinished}
        plans: Mapping[str, Mapping[int, Alloc]] = (
            self.caps.revises.current_plans() if self.caps.revises is not None
            else self.schedules)
        background = set(self.background)
        return {j: eta(st.t, plans.get(j), held=held, background=j in background,
                       running=j in self.last_plan) for j, held in unfinished.items()}

    def as_planned(self, job: Job, speed: float | None = None) -> Job:
        """``job`` as its policy decides it: resolved (work and window) at ``speed`` against
        its profile, by default its workload's planned speed (:meth:`planned_speed`; a
        journal gives the one used); ``job`` itself at 1.0."""
        if speed is None:
            speed = self.planned_speed(job.spec.workload)
        if speed == 1.0:
            return job
        spec = dataclasses.replace(job.spec, tau_s=job.spec.minibatch_seconds() / speed,
                                   tau_includes_comm=True)
        got = resolve_job(spec, self.cluster.slot_seconds, self.horizon, self.max_window)
        return dataclasses.replace(got, spec=job.spec)

    # -- learning ------------------------------------------------------------------------------
    def believe_prior(self, rec: JobRecord) -> None:
        """A job admitted now that has not run: its workload's prior speed."""
        if not self.speeds.measured(rec.job.job_id):
            rec.speed, rec.speed_sd = self.speeds.prior(rec.job.spec.workload)

    def learn(self, t: int, plan: SlotPlan, report: SlotReport) -> set[str]:
        """Slot ``t`` ran ``plan`` and made ``report``'s progress: each job that ran in it and
        did not finish in it, nor fail, is one slot of measurement, *steady* if it ran as it
        ran in the slot before, else a start (its start-up loss measured apart:
        :meth:`~psched.core.speed.SpeedBook.observe_start`); every record's speed is brought
        up to date. Returns the jobs whose
        records changed. O(jobs that ran + active jobs not yet measured when a prior
        moved)."""
        done = {j for j in plan if self.state.records[j].completion is not None}
        return self._learn(plan, report.progress, set(report.failed) | done)

    def relearn(self, slots: Iterable[tuple[int, SlotPlan, Mapping[str, float],
                                             Collection[str]]],
                completed: Mapping[str, int]) -> None:
        """Rebuild the speed estimates from a journal: each slot's plan, progress and failed
        jobs, in order, and the slot each completed job completed in (as :meth:`learn` saw
        them). Every active job's record then has its estimate. O(plan entries)."""
        for t, plan, progress, failed in slots:
            done = {j for j in plan if completed.get(j) == t}
            self.short = set()  # as the live loop: only the last slot's are pending
            self._learn(plan, progress, set(failed) | done)
        for job_id in self.state.active:
            rec = self.state.records[job_id]
            w = rec.job.spec.workload
            rec.speed, rec.speed_sd = self.speeds.speed(job_id, w), self.speeds.spread(job_id, w)

    def _learn(self, plan: SlotPlan, progress: Mapping[str, float],
               skip: Collection[str]) -> set[str]:
        records, book = self.state.records, self.speeds
        workloads: set[str] = set()
        ran: list[str] = []
        last, self.last_plan = self.last_plan, dict(plan)
        for job_id, alloc in plan.items():
            rec = records[job_id]
            if not alloc.n_workers or job_id in skip:
                continue
            workload = rec.job.spec.workload
            if last.get(job_id) != alloc:
                book.observe_start(job_id, workload, alloc.n_workers,
                                   progress.get(job_id, 0.0))
            else:
                book.observe(job_id, workload, alloc.n_workers, progress.get(job_id, 0.0))
            workloads.add(workload)
            ran.append(job_id)
        touched = set(ran)
        for job_id in ran:
            rec = records[job_id]
            rec.speed = book.speed(job_id)
            rec.speed_sd = book.spread(job_id)
            if job_id in self.schedules and (rec.speed < 1.0 or book.startup(
                    rec.job.spec.workload) > 0.0):
                self.short.add(job_id)
        moved = {w for w in workloads if not book.exact(w)}
        if moved:  # every estimate of the workload leans on the others' (its prior)
            for job_id in self.state.active:
                rec = records[job_id]
                w = rec.job.spec.workload
                if w in moved and rec.completion is None:
                    now = (book.speed(job_id, w), book.spread(job_id, w))
                    if now != (rec.speed, rec.speed_sd):
                        rec.speed, rec.speed_sd = now
                        touched.add(job_id)
        return touched

    # -- never lose an admitted job ------------------------------------------------------------
    def note_schedule(self, adm: Admission) -> None:
        """A committing policy's decision: its job's schedule from ``adm.slot`` on replaces
        what it had from then (a first admission, a re-plan)."""
        if adm.admitted and adm.schedule:
            old = self.schedules.get(adm.job_id, {})
            self.schedules[adm.job_id] = {**{s: a for s, a in old.items() if s < adm.slot},
                                          **adm.schedule}
            if adm.job_id in self.background:
                self.background.remove(adm.job_id)
            if self.speeds.startup(self.state.records[adm.job_id].job.spec.workload) > 0.0:
                self.short.add(adm.job_id)  # its starts' loss topped up at the next boundary

    def behind(self, t: int) -> list[Admission]:
        """At the boundary of slot ``t``, for a policy that commits schedules on arrival:
        each active job whose schedule ended before ``t`` unfinished is re-decided for its
        work left at its measured speed (the policy's own decision); if the policy finds it
        no payoff, a policy that restores decisions is given, as a decision it restores,
        the earliest schedule of that work (at the speed a reservation may assume) on the
        capacity no schedule holds
        (:meth:`reserve_idle`); else, or if none fits before the horizon, the job runs in the
        background. One :class:`Admission` per job (``behind`` set), the final one, passed to
        the ``on_decision`` hooks. O(active jobs) + O(schedule entries) per job behind."""
        if not self.policy.commits_on_arrival:
            return []
        out: list[Admission] = []
        for job_id in sorted(self.short & set(self.schedules)):
            top = self.top_up(job_id, t)
            if top is not None:
                out.append(top)
        self.short = set()
        for job_id in list(self.state.active):
            sched = self.schedules.get(job_id)
            if not sched or max(sched) >= t or job_id in self.background:
                continue
            rec = self.state.records[job_id]
            work = self.work_left(job_id, self.speeds.guarded(job_id))
            adm = self.replan(job_id, t, work=self.work_to_ask(job_id), behind=True,
                              emit=False)
            if not (adm.admitted and adm.schedule) and self.caps.restores is not None:
                reserved = self.reserve_idle(rec.job, work, t)
                if reserved:
                    adm = self.replan(job_id, t, work=work, behind=True, emit=False,
                                      forced=Decision(admitted=True, payoff=0.0,
                                                      schedule=reserved, reason=RESERVED,
                                                      promised=max(reserved)))
            if not (adm.admitted and adm.schedule):
                self.schedules.pop(job_id, None)
                self.to_background(job_id)
            for hook in self.on_decision:
                hook(adm)
            out.append(adm)
        return out

    def top_up(self, job_id: str, t: int) -> Admission | None:
        """A committing policy's job measured slower than its schedule assumes (its schedule
        from ``t`` on does fewer worker-slots than it has left at the speed a reservation may
        assume, :meth:`~psched.core.speed.SpeedBook.guarded`, less what the schedule's starts
        and resizes lose to its workload's start-up cost): the missing
        worker-slots are reserved on idle capacity, in slots its schedule leaves free
        (:meth:`reserve_idle`), while its window and the horizon still have room; its
        schedule from ``t`` on plus them is committed in its place (a decision the policy
        restores). None if it is not short, or nothing fits. O(schedule entries)."""
        rec = self.state.records[job_id]
        sched = self.schedules[job_id]
        if self.caps.restores is None or job_id in self.background:
            return None
        ahead = {s: a for s, a in sched.items() if s >= t}
        if not ahead:
            return None  # its schedule ended: :meth:`behind` re-decides it
        need = max(0.0, rec.job.work - rec.done) / self.speeds.guarded(job_id)
        keep = 1.0 - self.speeds.startup(rec.job.spec.workload)
        new = dict(ahead)
        for _ in range(3):  # the slots reserved (re)start it too: top up what they lose
            missing = ceil_eps(need - self._effective(job_id, new, keep, t))
            if missing <= 0:
                break
            extra = self.reserve_idle(rec.job, missing, t, around=new)
            if not extra:
                break
            new.update(extra)
        if new == ahead:
            return None
        new = dict(sorted(new.items()))
        return self.replan(job_id, t, work=sum(a.n_workers for a in new.values()),
                           behind=True, release=True,
                           forced=Decision(admitted=True, payoff=0.0, schedule=new,
                                           reason=RESERVED, promised=max(new)))

    def _effective(self, job_id: str, sched: Mapping[int, Alloc], keep: float,
                   t: int) -> float:
        """The worker-slots ``sched`` does at the job's speed, less what it loses to
        start-up (``1 - keep`` of a slot) in each slot it starts, resumes or is resized."""
        before = self.last_plan.get(job_id)
        total = 0.0
        for s in sorted(sched):
            alloc = sched[s]
            prev = before if s == t else sched.get(s - 1)
            total += alloc.n_workers * (1.0 if alloc == prev else keep)
        return total

    def to_background(self, job_id: str) -> bool:
        """Run an active job on idle capacity from now on, until it completes. False if it is
        not active or already there."""
        if job_id not in self.state.active or job_id in self.background:
            return False
        self.background.append(job_id)
        return True
