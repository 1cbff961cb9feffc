"""Work ahead into idle capacity: ``oasis-rp``'s boundary hands idle capacity to admitted jobs.

OASiS's exact search prices every slot of a job's window; when a job's utility is the same
at every completion it may reach (a deadline job finishing anywhere before its deadline),
the search picks the *cheapest* slots, and with exponential prices those are the emptiest
ones, usually later than now. So plans leave capacity idle now and book it later, and a job
admitted with slack loses it before it starts. When a burst of short, dense jobs arrives,
the slots they need are booked by long jobs whose plans now end at their promises: nothing
can move and the burst is rejected (ElasticFlow cluster04: 1,796 jobs that SRTF completes in
time, 50,044 of utility, most of them 1- and 2-worker jobs with deadlines 2-6 slots away,
rejected in slots where the parameter-server pool was booked to the last container; in
slots 24-34 of the same run a third of the PS pool stood idle, BENCHMARKS section 11).

At each slot boundary, after the slot's decisions and before it runs,
the capacity of the slot that no plan uses is handed to admitted jobs: each job, in order of
least slack (its promise minus its planned completion), grows its allocation in this slot
(up to ``N`` workers, with the parameter servers that need) as far as the free containers
allow, and the same number of worker-slots is taken from the **end** of its plan (its last
planned slots first, their parameter servers reduced to what the workers left need). A plan
only ever completes earlier, so every promise still holds; the later slots it frees are
priced lower again and are there for the next arrivals. This is the work-conserving move
SRTF makes, within promises. Nothing is searched: one pass over the jobs, each O(S R).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from psched.core.model import Alloc, Job, ceil_eps
from psched.core.placement import room
from psched.core.policy import View
from psched.policies.oasis_rp.book import PlanLedger
from psched.policies.oasis_rp.plans import Schedule
from psched.policies.oasis_rp.queue import now_density
from psched.policies.oasis_rp.state import RunState

#: no cap on how many containers a server may take (:func:`psched.core.placement.room`)
_NO_CAP = 1 << 30

__all__ = ["grow", "grow_alloc", "grow_now", "place", "trim_tail", "work_ahead"]


def place(old: Mapping[int, int], extra: int, spare: np.ndarray,
          servers: np.ndarray) -> dict[int, int] | None:
    """``old`` ({server: count}) plus ``extra`` containers: on the servers already used
    first, then in pool order, each server taking at most ``spare`` more (per position in
    the pool, ``servers`` its server indices). None if they do not fit. O(H)."""
    got = dict(old)
    pos = {int(h): i for i, h in enumerate(servers)}
    order = [h for h in old if h in pos] + [int(h) for h in servers if int(h) not in old]
    for h in order:
        if extra <= 0:
            break
        k = min(extra, int(spare[pos[h]]))
        if k > 0:
            got[h] = got.get(h, 0) + k
            extra -= k
    return got if extra <= 0 else None


def trim_tail(job: Job, plan: Mapping[int, Alloc], t: int, work: int) -> dict[int, Alloc]:
    """``plan`` without ``work`` worker-slots taken from its latest slots after ``t`` (the
    last pairs of a slot first); each slot trimmed keeps the PS its workers need
    (``ps_needed``), a slot left with no worker goes. O(entries)."""
    out = dict(plan)
    for s in sorted((s for s in plan if s > t), reverse=True):
        if work <= 0:
            break
        a = plan[s]
        take = min(work, a.n_workers)
        work -= take
        keep = a.n_workers - take
        if keep == 0:
            del out[s]
            continue
        out[s] = Alloc(workers=_drop(a.workers, take),
                       ps=_drop(a.ps, a.n_ps - min(a.n_ps, job.ps_needed(keep))))
    return out


def _drop(pairs: tuple[tuple[int, int], ...], n: int) -> tuple[tuple[int, int], ...]:
    """``pairs`` ((server, count), ...) with ``n`` containers fewer, the last ones first."""
    out = list(pairs)
    while n > 0 and out:
        h, c = out[-1]
        k = min(n, c)
        n -= k
        if k == c:
            out.pop()
        else:
            out[-1] = (h, c - k)
    return tuple(out)


def grow_now(book: PlanLedger, job: Job, plan: Mapping[int, Alloc],
             t: int) -> dict[int, Alloc] | None:
    """``job``'s plan (slots ``>= t``; its usage in the book) with as much of its
    later work as fits moved into slot ``t``: the most workers in ``t`` (at most ``N``,
    at most its work) for which they and their PS fit the capacity left in ``t``, the extra
    worker-slots taken from the end of the plan (:func:`trim_tail`); the free capacity of
    ``t`` is what the book leaves. None if nothing moves.
    O(S R + entries)."""
    now = plan.get(t)
    n_now = now.n_workers if now is not None else 0
    later = sum(a.n_workers for s, a in plan.items() if s > t)
    if later <= 0:
        return None
    grown = grow_alloc(book, job, now, min(job.max_workers, n_now + later), t)
    if grown is None:
        return None
    out = trim_tail(job, plan, t, grown.n_workers - n_now)
    out[t] = grown
    return out


def grow_alloc(book: PlanLedger, job: Job, now: Alloc | None, cap_n: int,
               t: int) -> Alloc | None:
    """``job``'s allocation ``now`` in slot ``t`` (None: nothing yet) grown to the most
    workers, at most ``cap_n``, for which they and their PS fit the capacity the book leaves
    in ``t`` (the new containers on the servers already used first, then in pool order);
    None if it cannot grow. O(S R)."""
    n_now = now.n_workers if now is not None else 0
    if cap_n <= n_now:
        return None
    w_dem, p_dem = book.demands_of(job)
    room_w = room(book.capacity[0] - book.usage[0][t], w_dem, _NO_CAP)
    room_p = room(book.capacity[1] - book.usage[1][t], p_dem, _NO_CAP)
    old_w = dict(now.workers) if now is not None else {}
    old_p = dict(now.ps) if now is not None else {}
    n = min(cap_n, n_now + int(room_w.sum()))
    while n > n_now and job.ps_needed(n) - sum(old_p.values()) > int(room_p.sum()):
        n -= 1
    if n <= n_now:
        return None
    workers = place(old_w, n - n_now, room_w, book.servers[0])
    ps = place(old_p, max(0, job.ps_needed(n) - sum(old_p.values())), room_p, book.servers[1])
    if workers is None or ps is None:
        return None
    return Alloc.of(workers, ps)


def work_ahead(st: RunState, t: int, view: View) -> None:
    """Hand the capacity of slot ``t`` that no plan uses to the admitted jobs that are still
    active: first the planned ones, least slack first, each taking the worker-slots from the
    end of its plan (it completes no later); then the uncommitted ones the queue left without
    a plan (none of positive payoff), densest first, each running in ``t`` as large as the
    room left allows; last the overdue ones (past their window, never dropped), least work
    left first. O(jobs (S R + plan entries))."""
    order = sorted((j for j in st.plans if j in view.active),
                   key=lambda j: (st.promise[j] - max(st.plans[j]), st.promise[j], j))
    for j in order:
        new = grow(st, st.jobs[j], st.plans[j], t)
        if new is not None:
            st.plans[j] = new
    left = {j: n for j in st.uncommitted if j not in st.plans and j in view.active
            and (n := ceil_eps(view.active[j].remaining)) > 0}
    for j in sorted(left, key=lambda j: (-now_density(st, st.jobs[j], t, left[j]), j)):
        job = st.jobs[j]
        alloc = grow_alloc(st.book, job, None, min(job.max_workers, left[j]), t)
        if alloc is not None:
            st.book.add(job, {t: alloc})
            st.plans[j] = Schedule({t: alloc})
            st.promise[j] = t
            st.stats["ahead_jobs"] += 1
            st.stats["ahead_moved"] += alloc.n_workers
    overdue = {j: n for j in st.overdue if j in view.active
               and (n := ceil_eps(view.active[j].remaining)) > 0}
    for j in sorted(overdue, key=lambda j: (overdue[j], j)):  # least left first: done soonest
        job = st.jobs[j]
        alloc = grow_alloc(st.book, job, None, min(job.max_workers, overdue[j]), t)
        if alloc is not None:
            st.book.add(job, {t: alloc})
            st.plans[j] = Schedule({t: alloc})
            st.stats["overdue_jobs"] += 1
            st.stats["overdue_moved"] += alloc.n_workers


def grow(st: RunState, job: Job, old: dict[int, Alloc], t: int) -> Schedule | None:
    """``job``'s plan ``old`` (in the book) grown into slot ``t`` from its end
    (:func:`grow_now`), the book and the counters updated; None if unchanged."""
    book = st.book
    new = grow_now(book, job, old, t)
    if new is None:
        return None
    diff = {s for s in (*old, *new) if old.get(s) != new.get(s)}
    book.add(job, {s: old[s] for s in diff if s in old}, sign=-1)
    book.add(job, {s: new[s] for s in diff if s in new})
    st.stats["ahead_jobs"] += 1
    st.stats["ahead_moved"] += new[t].n_workers - (old[t].n_workers if t in old else 0)
    return Schedule(new)
