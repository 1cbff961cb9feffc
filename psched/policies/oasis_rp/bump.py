"""Bumps of reservations, and their admission when they start: the held plans of
``oasis-rp`` (:mod:`psched.policies.oasis_rp.reservations`) in action.

An arrival that finds no schedule, even after a re-pack, may take the reservations of lower
density in its window out of its way (:func:`bump`): it searches again without them, then each
of them searches again (densest first) around it. This is kept only if the planned utility
rises (the newcomer's, minus what the moved reservations lose, counting a reservation that
finds no room again as lost: that job is then rejected at the next boundary). At each
boundary the reservations that start now are admitted with their promises and the lost ones
rejected (:func:`due`).
"""

from __future__ import annotations

from dataclasses import replace

from psched.model import Decision, Job
from psched.policies.oasis_rp.effort import Ranked
from psched.policies.oasis_rp.plans import Found
from psched.policies.oasis_rp.promises import REJECT_PAYOFF, completion_utility, promise_for
from psched.policies.oasis_rp.repack import good_end
from psched.policies.oasis_rp.reservations import Reservation
from psched.policies.oasis_rp.state import NONE_FOUND, RunState

__all__ = ["bump", "due"]


def bump(st: RunState, job: Job, t: int, gap: float) -> Found:
    """Take the reservations of lower density in ``job``'s window out of its way, search
    again, then re-place them (densest first); kept, with ``job`` placed, only if the planned
    utility rises. Else nothing changes (:data:`~psched.policies.oasis_rp.state.NONE_FOUND`).
    ``gap`` is ``repack_gap`` (the newcomer's good slots, for the slot bank).
    O(reservations moved) exact searches."""
    victims = st.soft.below(st.density(job), job.last_slot)
    if not victims:
        return NONE_FOUND
    if st.slot_bank is not None:  # one search each over its window, the newcomer once more
        cost = {r.job.job_id: float(r.job.last_slot - t + 1) for r in victims}
        ids = [r.job.job_id for r in victims]
        plans = {r.job.job_id: r.plan for r in victims}
        keep = set(st.slot_bank.afford(ids, cost, float(job.last_slot - t + 1),
                                       Ranked(ids, plans, t, good_end(job, t, gap))))
        victims = [r for r in victims if r.job.job_id in keep]
        if not victims:
            return NONE_FOUND
    return st.banked(lambda: _bump(st, job, t, victims))


def _bump(st: RunState, job: Job, t: int, victims: list[Reservation]) -> Found:
    """:func:`bump` with its ``victims`` chosen: the searches and the bookkeeping."""
    book = st.book
    for r in victims:
        book.add(r.job, r.plan, sign=-1)
    got = st.search_new(job, t)
    if got.schedule:
        book.add(job, got.schedule)
        again = {}
        gain = completion_utility(job, got.completion)
        for r in victims:
            new = st.search_new(r.job, t)
            if new.schedule:
                book.add(r.job, new.schedule)
                again[r.job.job_id] = new
                gain += completion_utility(r.job, new.completion)
            gain -= r.utility
        if gain > 0:
            for r in victims:
                moved = again.get(r.job.job_id)
                if moved is None:
                    del st.soft[r.job.job_id]
                    st.soft.dropped.append(r.job)
                else:
                    st.soft[r.job.job_id] = replace(r, plan=moved.schedule, payoff=moved.payoff)
            st.plans[job.job_id] = dict(got.schedule)
            st.stats["soft_bumps"] += 1
            st.stats["soft_dropped"] += len(victims) - len(again)
            st.freed = True
            return got
        book.add(job, got.schedule, sign=-1)
        for r in victims:
            if r.job.job_id in again:
                book.add(r.job, again[r.job.job_id].schedule, sign=-1)
    for r in victims:
        book.add(r.job, r.plan)
    return NONE_FOUND


def due(st: RunState, t: int, rtol: float) -> dict[str, Decision]:
    """At the boundary of slot ``t``: admit, with a promise (``rtol``: ``promise_rtol``),
    each held job whose reservation starts now; reject each that lost its reservation.
    O(reservations)."""
    out: dict[str, Decision] = {}
    for job in st.soft.dropped:
        st.decided.append((job, 0.0))
        out[job.job_id] = Decision(admitted=False, reason=REJECT_PAYOFF, payoff=0.0)
    st.soft.dropped = []
    for r in st.soft.due(t):
        st.plans[r.job.job_id] = r.plan  # its usage is in the book already
        st.decided.append((r.job, r.payoff))
        out[r.job.job_id] = promise_for(st, r.job, Found(payoff=r.payoff, schedule=r.plan), rtol)
    return out
