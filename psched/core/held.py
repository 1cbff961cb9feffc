"""Deferred decisions in the scheduling loop: jobs a policy held (``Decision.hold``) are
decided at a later slot boundary, after that slot's arrivals, or rejected for good when their
window closes; jobs a policy admitted without a promise may be promised at a later boundary
(a deferred promise). :class:`HeldAdmission` is the part of
:class:`~psched.core.loop.SchedulerLoop` that does it (the loop's state, policy, cluster and
hooks are its own)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from psched.core.model import Cluster, Decision, Job
from psched.core.policy import Capabilities, HoldsJobs, Policy, View
from psched.core.records import (
    ActiveStatuses,
    Admission,
    JobRecord,
    LoopState,
)

__all__ = ["HeldAdmission"]

log = logging.getLogger("psched.core.loop")


class HeldAdmission:
    """:meth:`admit_held` and :meth:`expire_held` of :class:`~psched.core.loop.SchedulerLoop`."""

    state: LoopState
    policy: Policy
    caps: Capabilities
    cluster: Cluster
    horizon: int
    on_decision: list[Callable[[Admission], None]]
    _statuses: ActiveStatuses
    state_promise: Callable[..., int]  #: (record, promised, slot[, schedule]) -> stated
    believe_prior: Callable[[JobRecord], None]
    planned_jobs: dict[str, Job]
    held_speeds: dict[str, float]  #: the speed each held job was decided at (its arrival's)

    def admit_held(self, t: int, *,
                   forced: Mapping[str, Decision] | None = None) -> list[Admission]:
        """Deferred admission at the boundary of slot ``t``: the jobs held
        (``Decision.hold``) whose window closed before ``t`` are rejected for good, with the
        reason the policy gave when it held them; the others go, in arrival order, to the
        policy's ``admit_held(jobs, view)`` (see :class:`~psched.core.policy.Policy`), which
        returns a :class:`~psched.core.model.Decision` for each job it decides now (the view holds
        the active jobs as measured, as for ``plan``; admitted: the
        job becomes active, with its promise if it has one, as an arrival of this slot;
        rejected without ``hold``: rejected for good now) and leaves the others held. The
        policy may also answer for an active job admitted without a promise: ``admitted`` with
        ``promised`` set is its promise, made now (a *deferred promise*; the job is not
        admitted again). Called by :meth:`begin_slot` after the slot's arrivals, while any job
        is held or active; one :class:`Admission` per job decided (slot ``t``; a deferred
        promise has ``deferred_promise`` set), also passed to the ``on_decision`` hooks.
        O(held) plus the policy.

        ``forced``: the decisions made at this boundary before (a journal), by job id, for
        held jobs and deferred promises only. A policy that restores them
        (:class:`~psched.core.policy.RestoresHeld`) re-applies each as it was; any other
        policy is offered those jobs again (``admit_held``) and the forced decision wins where
        they differ (logged)."""
        st = self.state
        self.expire_held(t)
        holder = self.caps.holds
        if holder is None or not (st.held or st.active):
            return []
        if forced is not None:
            decisions, ms = self._forced_held(t, forced, holder)
        else:
            jobs = [self.planned_jobs.get(j, st.records[j].job) for j in st.held]
            t0 = time.perf_counter()
            decisions = dict(holder.admit_held(jobs, self._held_view(t)))
            ms = (time.perf_counter() - t0) * 1e3
        out: list[Admission] = []
        for job_id, decision in decisions.items():
            rec = st.records.get(job_id)
            if rec is None:
                raise ValueError(f"admit_held decided {job_id!r}, which never arrived")
            if job_id not in st.held:
                if not self._awaits_promise(job_id) or decision.promised is None:
                    raise ValueError(f"admit_held decided {job_id!r}, which is neither held "
                                     "nor admitted without a promise")
                rec.promised = self.state_promise(rec, decision.promised, t)
                rec.promised_at = t
                out.append(Admission(job_id=job_id, slot=t, admitted=True, payoff=rec.payoff,
                                     work=rec.job.work,
                                     schedule=dict(decision.schedule or {}), latency_ms=ms,
                                     promised=decision.promised, deferred_promise=True,
                                     stated=rec.promised))
                continue
            if decision.admitted:
                del st.held[job_id]
                self.planned_jobs.pop(job_id, None)
                rec.admitted, rec.payoff, rec.reason = True, decision.payoff, ""
                rec.decided = t
                self.believe_prior(rec)
                rec.promised = (None if decision.promised is None
                                else self.state_promise(rec, decision.promised, t))
                rec.promised_at = None if rec.promised is None else t
                st.active.append(job_id)
                st.arrived.append(job_id)
            elif not decision.hold:
                self._settle_held(job_id, t, decision.reason)
            else:
                continue
            out.append(Admission(job_id=job_id, slot=t, admitted=decision.admitted,
                                 reason=rec.reason, payoff=decision.payoff,
                                 work=rec.job.work, schedule=dict(decision.schedule or {}),
                                 latency_ms=ms, promised=decision.promised if
                                 decision.admitted else None, stated=rec.promised,
                                 planned_speed=self.held_speeds.pop(job_id, 1.0)))
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

    def _awaits_promise(self, job_id: str) -> bool:
        """``job_id`` is active and was admitted without a promise."""
        rec = self.state.records.get(job_id)
        return (rec is not None and rec.admitted and rec.promised is None
                and job_id in self.state.active)

    def _held_view(self, t: int) -> View:
        st = self.state
        return View(t=t, cluster=self.cluster, horizon=self.horizon,
                    active=self._statuses.of(st), completed=tuple(st.completed_last))

    def _forced_held(self, t: int, forced: Mapping[str, Decision], holder: HoldsJobs
                     ) -> tuple[dict[str, Decision], float]:
        """The decisions of :meth:`admit_held` replayed from a journal (see there)."""
        st = self.state
        jobs = [self.planned_jobs.get(j, st.records[j].job) for j in forced
                if j in st.held or self._awaits_promise(j)]
        restore = self.caps.restores_held
        t0 = time.perf_counter()
        if restore is not None:
            for job in jobs:
                restore.restore_held(job, forced[job.job_id])
        else:
            again = holder.admit_held(jobs, self._held_view(t))
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
        self.planned_jobs.pop(job_id, None)
        self.held_speeds.pop(job_id, None)
        rec = self.state.records[job_id]
        rec.reason, rec.decided = reason or held_reason, t
