"""A live service's restart of ``oasis-rp``: the boundary state it journals, and the replay
that takes a run back to where it stopped.

The service journals every arrival decision, every deferred decision, every revised plan
(:meth:`~psched.policies.oasis_rp.OasisRpPolicy.current_plans`) and, after each boundary,
:func:`boundary_state`. A restarted service replays them in order (:func:`restore`,
:func:`restore_held`, :func:`restore_plan`) and ends with :func:`resume`: with the plans of
every revision re-applied, later decisions are those of an uninterrupted run (prices are
rebuilt from the plans: bit-identical when every demand is a small binary fraction, such as
whole cores and GB).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from psched.core.model import Alloc, Decision, Job
from psched.policies.oasis_rp.plans import Schedule
from psched.policies.oasis_rp.promises import record_promise
from psched.policies.oasis_rp.reservations import Reservations
from psched.policies.oasis_rp.state import RunState

__all__ = ["boundary_state", "restore", "restore_held", "restore_plan", "resume"]


def boundary_state(st: RunState) -> dict[str, Any]:
    """What a restarted service needs besides the promises and plans (JSON): whether the
    next boundary pulls, the report's counters, the jobs that ran in the last slot and the
    held jobs (the slot's undecided arrivals, the reservations).
    O(jobs + new reservation entries)."""
    ran = {j: [list(a.workers), list(a.ps)] for j, a in sorted(st.ran.items())}
    out: dict[str, Any] = {"dirty": st.dirty, "stats": dict(st.stats),
                           "ran": ran, "batch": list(st.batch)}
    if st.overdue:
        out["overdue"] = sorted(st.overdue)
    out.update(st.soft.to_json())  # reservations (their usage is in the book), jobs that lost one
    return out


def restore(st: RunState, job: Job, decision: Decision) -> None:
    """Re-apply an arrival decision made before: the promise ``decision.promised`` (the
    planned completion if the journal has none) and ``decision.schedule`` as the plan,
    whatever deciding again would give. A held job is kept for :func:`resume`.
    O(schedule entries)."""
    if not decision.admitted or not decision.schedule:
        st.decided[job.job_id] = (job, 0.0)
        if decision.hold:  # a batch or a reservation may hold it: see resume
            st.restored[job.job_id] = job
        return
    payoff = decision.payoff or 0.0
    st.decided[job.job_id] = (
        job, math.exp(math.log(payoff) - st.book.log_scale) if payoff > 0 else 0.0)
    _admit(st, job, decision)


def restore_held(st: RunState, job: Job, decision: Decision) -> None:
    """Re-apply a deferred decision made before at a slot boundary: admitted, ``job`` (held
    since its arrival, restored by :func:`restore` as a rejection) gets the promise (if any)
    and the plan of ``decision``; an uncommitted job promised at its commit point gets that
    promise (its plan is restored by the revisions); a rejection changes nothing here.
    O(schedule entries)."""
    if job.job_id in st.uncommitted:
        if decision.promised is not None:
            st.uncommitted.discard(job.job_id)
            record_promise(st, job, decision.promised)
        return
    if decision.admitted and decision.schedule:
        _admit(st, job, decision)


def _admit(st: RunState, job: Job, decision: Decision) -> None:
    """Admitted with ``decision``'s plan: its promise, or uncommitted without one (bound by
    the plan's completion until the queue searches it again)."""
    schedule = dict(decision.schedule or {})
    st.jobs[job.job_id] = job
    if decision.promised is None:
        st.promise[job.job_id] = max(schedule)
        st.uncommitted.add(job.job_id)
    else:
        record_promise(st, job, decision.promised)
    st.place(job, schedule)


def restore_plan(st: RunState, job_id: str, t: int, schedule: Mapping[int, Alloc]) -> None:
    """Re-apply a revision made before: from slot ``t`` on, ``job_id`` (restored) runs
    ``schedule`` (empty: no plan left). O(plan entries)."""
    job = st.jobs[job_id]
    old = st.plans.get(job_id, {})
    st.book.add(job, {s: a for s, a in old.items() if s >= t}, sign=-1)
    st.book.add(job, schedule)
    new = {**{s: a for s, a in old.items() if s < t}, **schedule}
    if new:
        st.plans[job_id] = new
    else:
        st.plans.pop(job_id, None)


def resume(st: RunState, t: int, state: Mapping[str, Any] | None = None) -> None:
    """End of a journal replay, the loop at slot ``t``: plans keep their slots from ``t`` on
    (earlier ones ran; their usage stays in the book, as in an uninterrupted run) and
    ``state`` (the last :func:`boundary_state` journaled) is taken back. O(plan entries)."""
    for j in list(st.plans):
        rest = {s: a for s, a in st.plans[j].items() if s >= t}
        if rest:
            st.plans[j] = rest
        else:
            del st.plans[j]
    if state:
        st.dirty = bool(state.get("dirty", st.dirty))
        st.stats.update(state.get("stats", {}))
        st.ran = {j: Alloc.of(dict(w), dict(p)) for j, (w, p) in state.get("ran", {}).items()}
        st.overdue = {j for j in state.get("overdue", ()) if j in st.jobs}
        _resume_held(st, state)
    st.restored = {}


def _resume_held(st: RunState, state: Mapping[str, Any]) -> None:
    """The held jobs' part of :func:`resume`: the slot's arrivals not decided yet, the
    reservations with their usage back in the book. O(reservation entries)."""
    st.batch = [j for j in state.get("batch", ()) if j in st.restored]
    st.soft = Reservations.from_json(state, st.restored)
    for r in list(st.soft.values()):
        plan = Schedule(r.plan)
        st.soft[r.job.job_id] = replace(r, plan=plan)
        st.book.add(r.job, plan)

