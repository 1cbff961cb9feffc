"""A restarted service rebuilds its loop from the journal, through the loop's own API.

:func:`restore_loop` replays every journaled decision in order through
:meth:`psched.core.loop.SchedulerLoop.admit` and
:meth:`~psched.core.loop.SchedulerLoop.replan`
with the journaled decision ``forced``: a policy with a ``restore`` method (OASiS) re-applies
each as it was -- the same commitments, prices and certificate, even where deciding again would
differ; any other policy decides again (they are deterministic; a mismatch is logged and the
journal wins). A ``release`` row lets the policy forget a job's commitments from its slot
on (a job that finished early); an ``advance`` row releases a job's future commitments before
its decision is re-applied. A ``revise`` row (a policy that revises plans, ``oasis-rp``:
:mod:`ray_cluster.service.revisions`) re-applies the job's plan from its slot on (the
policy's ``restore_plan``); at the end the policy's ``resume(t, state)`` keeps the plans
from slot ``t`` on and takes back its journaled boundary state, so every admitted job keeps
its promise and its current plan. A ``hold`` row holds the job again (deferred admission:
:meth:`~psched.core.loop.SchedulerLoop.admit_held`); a ``deferred`` row re-applies the
decision made on a held job at a boundary, or the promise made then to a job admitted
without one (``admit_held`` with it ``forced``: the policy's ``restore_held(job, decision)``,
else the job is offered to it again and the journal wins);
a job still held after the replay is offered to the policy again at the next boundary, and
one whose window closed before it is rejected with its held reason (the loop's ``restore``).
Jobs submitted for a later slot and not yet decided are booked again. Then
:meth:`~psched.core.loop.SchedulerLoop.restore` takes the finished slots
(executed plans, progress, completions, cancellations, failures); running jobs resume from
their latest checkpoints. Slots are counted in service time: slot ``t`` (the first not
journaled) begins when the restarted service starts.

Complexity: O(journal size) plus one policy decision per journaled decision.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Mapping, Sequence

from psched.core.executor import FATAL
from psched.core.loop import SchedulerLoop
from psched.core.model import Decision, SlotPlan
from ray_cluster.service.config import CANCELLED, DROPPED_BEHIND, FAILED
from ray_cluster.service.journal import DecisionRow, Journal
from ray_cluster.service.revisions import REVISE

__all__ = ["BACKGROUND", "DEFERRED", "HOLD", "PRIOR", "RESTATED", "STATED",
           "forced_decision", "restore_loop"]

#: The journal's decision kinds of deferred admission: an arrival held (``Decision.hold``;
#: its reason is the policy's rejection reason if it is never admitted), and the decision of
#: a held job made later at a slot boundary (admitted with its promise, or rejected).
HOLD, DEFERRED = "hold", "deferred"

#: The journal's events of the reality rules (:mod:`psched.core.keeping`): a promise stated
#: with slack on top of the policy's (info: JSON ``promised``, ``stated``), a promise
#: re-stated (info: JSON ``old``, ``new``), a job running in the background from then on.
STATED, RESTATED, BACKGROUND = "stated", "restated", "background"
#: The journal's event of the speed a job was decided at, where it was not its profile's
#: (its workload's prior; info: the float's repr).
PRIOR = "prior"

log = logging.getLogger("ray_cluster.service")


def forced_decision(row: DecisionRow) -> Decision:
    """The decision a journal row records (a ``hold`` row: held again)."""
    return Decision(admitted=row.admitted, reason=row.reason, payoff=row.payoff,
                    schedule=row.schedule or None, promised=row.promised,
                    hold=row.kind == HOLD)


def restore_loop(loop: SchedulerLoop, journal: Journal,
                 on_revision: Callable[[DecisionRow], None] | None = None) -> None:
    """Rebuild ``loop`` (a fresh one, its policy started) from ``journal`` (module
    docstring); the loop's ``on_decision`` hooks see every re-applied decision and
    ``on_revision`` every re-applied plan revision."""
    subs = journal.submissions()
    priors = {j: float(info) for j, _t, kind, info in journal.events() if kind == PRIOR}
    revises = loop.caps.revises
    for row in journal.decisions():
        spec = subs[row.job_id]
        forced = forced_decision(row)
        if row.kind == DEFERRED:
            loop.admit_held(row.slot, forced={row.job_id: forced})
        elif row.kind == REVISE:
            if revises is not None:
                revises.restore_plan(row.job_id, row.slot, row.schedule)
            if on_revision is not None:
                on_revision(row)
        elif row.kind == "release":
            loop.release(row.job_id, row.slot)
        elif row.kind in ("arrival", HOLD):
            spec = dataclasses.replace(spec, arrival=max(spec.arrival, row.slot))
            loop.admit(row.slot, [spec], forced={row.job_id: forced},
                       speed={row.job_id: priors.get(row.job_id, 1.0)})
        else:
            loop.replan(row.job_id, row.slot, work=row.work, forced=forced,
                        release=row.kind in ("advance", "replan"),  # a top-up released
                        behind=row.kind == "replan")
            if row.kind == "replan" and not row.admitted:
                loop.to_background(row.job_id)
    for job_id, spec in subs.items():
        if job_id not in loop.state.records:
            loop.book(spec)
    completed: dict[str, int] = {}
    dropped: dict[str, str] = {}
    for job_id, slot, kind, info in journal.events():
        if job_id not in loop.state.records:
            continue
        if kind == "complete":
            completed[job_id] = slot
        elif kind == "cancel":
            dropped[job_id] = CANCELLED
        elif kind == "failed" and info.startswith(FATAL):
            dropped[job_id] = FAILED
        elif kind == DROPPED_BEHIND:  # a journal of a version that dropped such jobs
            dropped[job_id] = DROPPED_BEHIND
    done = {job_id: amount for _t, job_id, _, amount, _, _ in journal.progress()}
    slots = [(t, plan) for t, _, _, plan in journal.slots()]
    relearn(loop, journal, slots, completed)
    loop.restore(slots=slots, done=done, completed=completed, dropped=dropped)
    restate(loop, journal)
    st = loop.state
    if revises is not None:
        revises.resume(st.t, journal.policy_state())
    log.info("restored from the journal: slot %d, %d jobs, %d active", st.t,
             len(st.records), len(st.active))


def relearn(loop: SchedulerLoop, journal: Journal, slots: Sequence[tuple[int, SlotPlan]],
            completed: Mapping[str, int]) -> None:
    """Rebuild every job's speed estimate from the journaled slots and the progress measured
    in each (as :meth:`~psched.core.keeping.Keeping.learn` made them). O(progress rows)."""
    progress: dict[int, dict[str, float]] = {}
    for t, job_id, amount, _, _, _ in journal.progress():
        progress.setdefault(t, {})[job_id] = amount
    failed: dict[int, set[str]] = {}
    for job_id, t, kind, _ in journal.events():
        if kind == "failed":
            failed.setdefault(t, set()).add(job_id)
    loop.relearn([(t, plan, progress.get(t, {}), failed.get(t, set())) for t, plan in slots],
                 completed)


def restate(loop: SchedulerLoop, journal: Journal) -> None:
    """Re-apply the journaled stated and re-stated promises, and the jobs sent to the
    background, after the decisions. O(events)."""
    records = loop.state.records
    for job_id, t, kind, info in journal.events():
        rec = records.get(job_id)
        if rec is None:
            continue
        if kind == STATED:
            rec.promised = int(json.loads(info)["stated"])
        elif kind == RESTATED:
            d = json.loads(info)
            rec.restated.append((t, int(d["old"]), int(d["new"])))
            rec.promised = int(d["new"])
        elif kind == BACKGROUND:
            loop.to_background(job_id)
