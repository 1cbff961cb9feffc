"""``oasis-rp``'s steady boundary re-plan: when reality runs behind, no thrashing.

A real executor's jobs run behind their plans (start-up, a loaded machine). The literal
boundary re-plan of :class:`~psched.policies.oasis_rp.OasisRpPolicy` takes each job that is
off its plan out of the book and searches its best schedule again, one job at a time in
arrival order; two jobs that share servers then free and take each other's slots at every
boundary, and on Ray each swap costs a suspend and a resume (actor start-up, about a slot).
The steady rules (``steady=True``, the default) change only what happens to a job whose
measured work left differs from its plan:

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
rule bit for bit (tests/test_rp_steady.py).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

from psched.model import Alloc, Job
from psched.policies.rp_book import PlanLedger, search

__all__ = ["continue_now", "keep_now", "keeps_running", "tightest_first"]


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
    book.raise_prices(got.schedule)
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
    book.raise_prices({u for s in placed for u in plans[s]})
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
