"""``oasis-rp``'s boundary re-plan when reality departs from the plans: follow it, without
thrashing (:func:`reconcile`).

At each boundary the plans of jobs that left are dropped and every job whose measured work
left differs from its plan (a real executor: start-up, a loaded machine) is re-planned,
within its promise where possible (else up to the end of its window, counted in
``promise_at_risk``). The literal re-plan takes each such job out of the book and searches its
best schedule again; two jobs that share servers would then free and take each other's slots
at every boundary, and on Ray each swap costs a suspend and a resume (actor start-up, about a
slot). The steady rules change only what happens to a job off its plan:

* jobs off their plans are re-planned **tightest promise first** (promise, then job id);
* a job off its plan that ran in the last slot and is planned to run in this one is
  re-planned as a whole within its promise if that plan runs it in this slot; otherwise it
  **keeps running as it runs** (its allocation in this slot is kept) and only the rest of
  its work is re-planned, from the next slot on, within its promise (:func:`keep_now`);
  only if that finds nothing either is it re-planned by the literal rule (within its
  promise, else up to the end of its window). A re-plan thus never stops or resizes a running job
  that can still meet its promise, so two jobs cannot take each other's slots back and
  forth;
* a job off its plan that ran in the last slot but has no plan in this one (its plan ended
  where it should have finished: reality behind) keeps running with its last allocation,
  and the jobs about to start or resume in this slot make room within their promises
  (:func:`continue_now`): a running job is not stopped for one that would pay a start-up;
* a boundary pull (finish earlier) is kept only if it does not stop or resize a running
  job either (:func:`keeps_running`).

With reality as planned no job is ever off its plan, so decisions are those of the literal
re-plan bit for bit (tests/test_rp_steady.py).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

from psched.core.model import Alloc, Job, ceil_eps
from psched.core.policy import View
from psched.policies.oasis_rp.book import PlanLedger
from psched.policies.oasis_rp.search import search
from psched.policies.oasis_rp.state import RunState

__all__ = ["continue_now", "keep_now", "keeps_running", "reconcile", "tightest_first"]


def tightest_first(jobs: list[str], promise: Mapping[str, int]) -> list[str]:
    """``jobs`` ordered by promised slot, then job id (deterministic)."""
    return sorted(jobs, key=lambda j: (promise[j], j))


def keep_now(book: PlanLedger, job: Job, plan: Mapping[int, Alloc], left: int, t: int,
             deadline: int) -> dict[int, Alloc] | None:
    """``plan``'s allocation in slot ``t`` kept (the job keeps running as it runs) and the rest
    of its ``left`` worker-slots re-planned, as its best schedule, in ``t+1 .. deadline``;
    None, with the book unchanged, if the rest does not fit.

    ``plan`` (with slot ``t``) must be in the book; on success the book holds the new plan.
    Complexity: one exact search over ``t+1 .. deadline``.
    """
    now = plan[t]
    later = {s: a for s, a in plan.items() if s != t}
    rest = left - now.n_workers
    book.add(job, later, sign=-1)
    if rest <= 0:
        return {t: now}
    got = search(book, job, start=t + 1, work=rest, deadline=deadline, floor=-math.inf)
    if not got.schedule:
        book.add(job, later)
        return None
    book.add(job, got.schedule)
    return {t: now, **got.schedule}


def keeps_running(old: Mapping[int, Alloc], new: Mapping[int, Alloc], t: int,
                  ran: bool) -> bool:
    """Whether ``new`` may replace ``old`` at slot ``t`` without stopping or resizing a job
    that ran in slot ``t - 1`` (``ran``) and was planned to run in ``t`` as well."""
    if not ran or t not in old:
        return True
    return new.get(t) == old[t]


def continue_now(book: PlanLedger, jobs: Mapping[str, Job], plans: dict[str, dict[int, Alloc]],
                 promise: Mapping[str, int], j: str, alloc: Alloc, left: int, t: int,
                 ran: Collection[str]) -> bool:
    """Job ``j`` ran in slot ``t - 1`` with ``alloc`` and is behind with no plan in ``t``
    (its plan ended where it should have finished, or paused): it keeps running with
    ``alloc`` in ``t`` and the rest of its ``left`` worker-slots is planned from ``t + 1``
    (within its promise, else its window). The jobs planned to start or resume in ``t``
    (not in ``ran``) make room: each keeps its plan if it still fits, else is re-planned
    (tightest promise first) within its promise, or within its window if its plan already
    missed its promise. All or nothing: False, with book and plans unchanged, if any job
    finds no plan. Complexity: one exact search per moved job.
    """
    starters = tightest_first([s for s, p in plans.items()
                               if s != j and t in p and s not in ran], promise)
    saved = {s: plans[s] for s in [j, *starters] if s in plans}
    for s, p in saved.items():
        book.add(jobs[s], p, sign=-1)
        del plans[s]
    placed: list[str] = []
    ok = _place_continuing(book, jobs[j], alloc, left, t, promise[j], plans)
    if ok:
        placed.append(j)
        for s in starters:
            new = _replan(book, jobs[s], saved[s], t, promise[s])
            if new is None:
                ok = False
                break
            plans[s] = new
            placed.append(s)
    if not ok:
        for s in placed:
            book.add(jobs[s], plans.pop(s), sign=-1)
        for s, p in saved.items():
            book.add(jobs[s], p)
            plans[s] = p
        return False
    return True


def _place_continuing(book: PlanLedger, job: Job, alloc: Alloc, left: int, t: int,
                      promise: int, plans: dict[str, dict[int, Alloc]]) -> bool:
    now = {t: alloc}
    if not book.fits(job, now):
        return False
    book.add(job, now)
    rest = left - alloc.n_workers
    later: dict[int, Alloc] = {}
    if rest > 0:
        for deadline in (promise, job.last_slot):
            later = search(book, job, start=t + 1, work=rest, deadline=deadline,
                           floor=-math.inf).schedule
            if later:
                break
        if not later:
            book.add(job, now, sign=-1)
            return False
        book.add(job, later)
    plans[job.job_id] = {**now, **later}
    return True


def _replan(book: PlanLedger, job: Job, old: Mapping[int, Alloc], t: int,
            promise: int) -> dict[int, Alloc] | None:
    """``old`` if it still fits (added to the book), else the job's best schedule of the same
    work within ``promise`` (its window if ``old`` already ends after it); None if none."""
    if book.fits(job, old):
        book.add(job, old)
        return dict(old)
    work = sum(a.n_workers for a in old.values())
    deadlines = (promise, job.last_slot) if max(old) > promise else (promise,)
    for deadline in deadlines:
        got = search(book, job, start=t, work=work, deadline=deadline, floor=-math.inf)
        if got.schedule:
            book.add(job, got.schedule)
            return got.schedule
    return None


def reconcile(st: RunState, view: View) -> None:
    """Follow reality at the boundary of slot ``view.t``: drop the plans of jobs that left,
    re-plan the jobs whose measured work left differs from their plan (tightest promise
    first, by the steady rules of the module docstring, else within the promise, else the
    window). O(jobs off their plans) exact searches."""
    book = st.book
    t = view.t
    for j in [j for j in st.plans if j not in view.active]:
        gone = {s: a for s, a in st.plans[j].items() if s >= t}
        book.add(st.jobs[j], gone, sign=-1)
        del st.plans[j]
    todo = []
    for j, status in view.active.items():
        if (j not in st.plans and j not in st.promise) or j in st.uncommitted \
                or j in st.overdue:
            continue  # an uncommitted job is searched again by the queue
        left = max(0, ceil_eps(status.remaining))
        if left != st.plans.left.get(j, 0):  # the plan holds slots >= t only
            todo.append((j, left))
    rank = {j: i for i, j in enumerate(tightest_first([j for j, _ in todo], st.promise))}
    todo.sort(key=lambda x: rank[x[0]])
    for j, left in todo:
        st.stats["replanned_behind"] += 1
        st.dirty = True
        if _steady_one(st, j, left, t):
            continue
        plan = st.plans.get(j) or {}  # none left: behind after its last planned slot
        jj = st.jobs[j]
        book.add(jj, plan, sign=-1)
        got = search(book, jj, start=t, work=left, deadline=st.promise[j], floor=-math.inf)
        if not got.schedule and left > 0:
            st.stats["promise_at_risk"] += 1
            got = search(book, jj, start=t, work=left, deadline=jj.last_slot, floor=-math.inf)
        book.add(jj, got.schedule)
        if got.schedule:
            st.plans[j] = got.schedule
        elif jj.last_slot < t:  # its window closed unfinished: never dropped, runs on idle room
            st.plans.pop(j, None)
            st.promise.pop(j, None)
            st.overdue.add(j)
        else:  # none left in its window: planned again at the next boundary
            st.plans.pop(j, None)


def _steady_one(st: RunState, j: str, left: int, t: int) -> bool:
    """The steady rule for job ``j`` off its plan (``left`` worker-slots left), if it ran
    in the last slot: planned in ``t``, it takes its best plan within its promise if that
    runs it in ``t``, else keeps its allocation in ``t`` with the rest re-planned
    (:func:`keep_now`); not planned in ``t``, it continues (:func:`continue_now`). True if
    that settled ``j`` (else the literal re-plan follows)."""
    plan = st.plans.get(j)
    if j not in st.ran or left <= 0:
        return False
    if not plan or t not in plan:
        done = continue_now(st.book, st.jobs, st.plans, st.promise, j, st.ran[j], left, t,
                            st.ran)
        st.stats["kept_running"] += done
        return done
    book, jj = st.book, st.jobs[j]
    book.add(jj, plan, sign=-1)  # its best plan, if that keeps it running
    got = search(book, jj, start=t, work=left, deadline=st.promise[j], floor=-math.inf)
    if t in got.schedule:
        book.add(jj, got.schedule)
        st.plans[j] = got.schedule
        return True
    book.add(jj, plan)
    new = keep_now(book, jj, plan, left, t, st.promise[j])
    if new is None:
        return False
    st.stats["kept_running"] += 1
    st.plans[j] = new
    return True
