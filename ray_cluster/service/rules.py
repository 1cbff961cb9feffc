"""The live rules: what the service does when reality departs from the plan.

:class:`Commitments` is the service's record of each job's committed schedule, kept from the
loop's decisions (its ``on_decision`` hook). :class:`LiveRules` runs after every slot (an
after-slot hook of the loop) and applies, in order:

* the slot is journaled (executed plan, measured progress, completions, failures);
* *a job whose workload raises every time* (:data:`ray_cluster.runtime.MAX_STRIKES`) is
  dropped (reason ``failed``) and released; its future commitments stay, as for a cancel;
* *behind plan* and *past its window*: the loop's own rules, the same in simulation
  (:mod:`psched.core.keeping`): a job behind its committed schedule is re-decided for its work
  left at its measured speed (journaled ``replan``); one its policy does not take, or one
  past its window, runs in the background on idle capacity until it completes (journaled
  as an event ``background``): no admitted job is dropped but by the owner (cancelled,
  failed); a promise that can no longer be kept is re-stated as soon as that is known
  (journaled as an event ``restated``);
* *ahead of plan* (``ServiceConfig.reuse_freed``, a policy that can ``release`` and
  ``restore`` commitments): a job that finished before its committed schedule ended frees
  the rest of it (journaled ``release``), and every other active job is offered the freed
  capacity: its future commitments are released and it is re-decided from the next slot; the
  new schedule is kept if it completes strictly earlier, else the old one is committed again
  (both journaled ``advance``, so a restart re-applies them). Once the job's workload has a
  measured start-up cost it is asked for its work left over the share of it its jobs keep
  (:meth:`~psched.core.keeping.Keeping.work_to_ask`), and both schedules are compared by
  when they finish losing that cost in each slot that starts or resizes it
  (:meth:`~psched.core.keeping.Keeping.finish_along`): a choppier schedule that ends a slot
  earlier on paper but later in fact is not taken. No job completes later than
  promised.

Each rule is one policy decision per job it touches: O(active jobs) decisions after a slot
in which a job finished early, none otherwise.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from psched.core.executor import FATAL, JobNote, SlotReport
from psched.core.loop import SchedulerLoop
from psched.core.model import Alloc, Decision, SlotPlan
from psched.core.records import Admission
from ray_cluster.service.config import FAILED, ServiceConfig
from ray_cluster.service.journal import DecisionRow, Journal

__all__ = ["Commitments", "LiveRules", "decision_row"]

log = logging.getLogger("ray_cluster.service")


def decision_row(adm: Admission, kind: str, latency_ms: float) -> DecisionRow:
    """The journal row of a decision of the loop."""
    return DecisionRow(job_id=adm.job_id, kind=kind, slot=adm.slot, admitted=adm.admitted,
                       reason=adm.reason, payoff=adm.payoff, work=adm.work,
                       schedule=dict(adm.schedule), latency_ms=latency_ms,
                       promised=adm.promised)


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


class Commitments:
    """Each job's committed schedule, as the loop's decisions report it."""

    def __init__(self) -> None:
        self.schedules: dict[str, dict[int, Alloc]] = {}  #: slot -> allocation, per job
        self.planned_end: dict[str, int] = {}  #: last slot of each job's schedule

    def record(self, adm: Admission) -> None:
        """A decision of the loop: a new schedule replaces the job's from its slot on."""
        if not adm.schedule:
            return
        kept = {s: a for s, a in self.schedules.get(adm.job_id, {}).items() if s < adm.slot}
        self.schedules[adm.job_id] = {**kept, **adm.schedule}
        self.planned_end[adm.job_id] = max(adm.schedule)

    def revise(self, job_id: str, slot: int, schedule: Mapping[int, Alloc]) -> None:
        """A plan revision: ``schedule`` (possibly empty) replaces the job's from ``slot``."""
        kept = {s: a for s, a in self.schedules.get(job_id, {}).items() if s < slot}
        self.schedules[job_id] = {**kept, **schedule}
        if self.schedules[job_id]:
            self.planned_end[job_id] = max(self.schedules[job_id])
        else:
            self.planned_end.pop(job_id, None)

    def plan_at(self, t: int, jobs: list[str]) -> SlotPlan:
        """The committed plan of slot ``t`` for ``jobs``."""
        return {j: self.schedules[j][t] for j in jobs if t in self.schedules.get(j, {})}


class LiveRules:
    """The after-slot rules of the module docstring, on the service's loop and journal."""

    def __init__(self, loop: SchedulerLoop, journal: Journal, config: ServiceConfig,
                 commitments: Commitments) -> None:
        self.loop, self.journal, self.config = loop, journal, config
        self.commitments = commitments

    def after_slot(self, t: int, plan: SlotPlan, report: SlotReport, *, started: float,
                   info: Mapping[str, JobNote]) -> None:
        """Slot ``t`` ran ``plan`` (wall start ``started``; per job its checkpoint and loss
        line ``info``): journal it and apply the rules."""
        st = self.loop.state
        progress = {}
        for job_id, amount in report.progress.items():
            note = info.get(job_id, JobNote())
            ckpt, line = note.checkpoint, note.loss
            progress[job_id] = (amount, st.records[job_id].done, ckpt, line)
        events = [(j, "complete", "") for j in st.completed_last]
        events += [(j, "failed", why) for j, why in report.failed.items()]
        for job_id, why in report.failed.items():
            if why.startswith(FATAL) and self.loop.drop(job_id, FAILED):
                log.warning("slot %d: job %s failed for good: %s", t, job_id, why)
        self.journal.slot_done(t, started, plan, progress, events)
        policy, caps = self.loop.policy, self.loop.caps
        planned_end = self.commitments.planned_end
        early = [j for j in st.completed_last if planned_end.get(j, -1) > t]
        if early and self.config.reuse_freed and policy.commits_on_arrival and \
                caps.releases is not None and caps.restores is not None:
            self.reuse_freed(early, st.t)

    def reuse_freed(self, finished: list[str], t: int) -> None:
        """``finished`` ended before their schedules did: release the rest of those and
        re-decide every other active job into the freed capacity from slot ``t``."""
        for job_id in finished:
            self.loop.release(job_id, t)
            self.journal.decide(DecisionRow(job_id=job_id, kind="release", slot=t,
                                            admitted=False, reason="", payoff=None, work=0,
                                            schedule={}, latency_ms=0.0))
        st = self.loop.state
        for job_id in list(st.active):
            old_end = self.commitments.planned_end.get(job_id)
            if old_end is None or old_end <= t:
                continue
            old = {s: a for s, a in self.commitments.schedules[job_id].items() if s >= t}
            costs = self.loop.speeds.startup(st.records[job_id].job.spec.workload) > 0.0
            t0 = time.perf_counter()
            adm = self.loop.replan(job_id, t, release=True, work=self.loop.work_to_ask(job_id))
            self.journal.decide(decision_row(adm, "advance", _ms(t0)))
            if adm.admitted and adm.schedule and (
                    self.loop.finish_along(job_id, t, adm.schedule)
                    < self.loop.finish_along(job_id, t, old) if costs
                    else max(adm.schedule) < old_end):
                log.info("slot %d: job %s moves into freed capacity: done by %d, not %d", t,
                         job_id, max(adm.schedule), old_end)
                continue
            back = Decision(admitted=True, payoff=adm.payoff, schedule=old)
            t0 = time.perf_counter()
            again = self.loop.replan(job_id, t, release=True, forced=back,
                                     work=sum(a.n_workers for a in old.values()))
            self.journal.decide(decision_row(again, "advance", _ms(t0)))
