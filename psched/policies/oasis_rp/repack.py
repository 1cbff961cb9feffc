"""The re-pack of ``oasis-rp``: make room for an arrival by re-planning admitted jobs within
their promises.

When an arriving job finds no schedule, or only one whose utility is below ``1 - repack_gap``
of its best, the future plans of the admitted jobs that use slots of its window are taken out
(at most :data:`REPACK_LIMIT`, most slack first), and:

1. **First order.** The newcomer takes its best schedule, then each job, tightest promise
   first, keeps its old plan if it still fits, else gets its best schedule within its promise.
2. **Second order**, if some job found none: every job is re-planned to complete as late as
   its promise allows (:func:`~psched.policies.oasis_rp.latest.search_latest`: the
   earliest-deadline order, leaving the early slots to the newcomer), then the newcomer
   searches again.

It is kept only if the newcomer is admitted and the planned utility of every job involved
rises after the moved jobs are pulled forward again (:func:`pull_one`); otherwise everything
is undone, each job back on its old plan. The pulls are skipped, their searches counted as
run, when no pull can make the gain positive (:func:`gain_bound`: the same decisions).

The gain bound: the gain is ``f_new(done) - base + sum_j [f_j(c_j) - f_j(s_j)]`` (``done`` the
newcomer's completion, ``base`` its utility without the re-pack, ``s_j`` job ``j``'s completion
before the re-pack, ``c_j`` after its pull). A pull only moves ``j``'s own plan, so ``c_j`` is at
least ``lb_j = max(t, a_j) + ceil(W_j / N_j) - 1`` (``W_j`` its work left) and
``f_j(c_j) <= f_j(lb_j)``; when ``f_new(done) - base + sum_j max(0, f_j(lb_j) - f_j(s_j))`` is not
positive the re-pack is undone whatever the pulls find (floating-point sums are monotone).
What does not follow: the ``pulled`` counter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from psched.core.model import Alloc, Job
from psched.policies.oasis_rp.latest import search_latest
from psched.policies.oasis_rp.plans import Found, work_of
from psched.policies.oasis_rp.promises import completion_utility
from psched.policies.oasis_rp.state import NONE_FOUND, RunState
from psched.policies.oasis_rp.steady import keeps_running

__all__ = ["REPACK_LIMIT", "gain_bound", "pull_one", "repack"]

#: most admitted jobs one re-pack moves (most slack first)
REPACK_LIMIT = 64


def repack(st: RunState, job: Job, t: int, base: float) -> Found:
    """Make room for ``job`` in slot ``t`` (its utility without a re-pack: ``base``) by
    re-planning admitted jobs within their promises (the module docstring). Returns the
    newcomer's schedule, placed, or :data:`NONE_FOUND` (nothing changed).
    O(moved jobs) exact searches."""
    end = job.last_slot
    cands = [j for j, p in st.plans.items() if min(p) <= end]
    if not cands:
        return NONE_FOUND
    cands.sort(key=lambda j: (-(st.promise[j] - max(st.plans[j])), j))
    return _repack(st, job, t, base, cands[:REPACK_LIMIT])


def _repack(st: RunState, job: Job, t: int, base: float, cands: list[str],
) -> Found:
    """:func:`repack` with its jobs chosen (``cands``, in their order)."""
    book = st.book
    st.stats["repack_tried"] += 1
    saved = {j: st.plans[j] for j in cands}
    for j in cands:
        book.add(st.jobs[j], saved[j], sign=-1)
        del st.plans[j]
    first = st.search_new(job, t)
    found = NONE_FOUND
    moved: list[str] | None = []
    if first.schedule:  # else: no room even with every candidate gone
        book.add(job, first.schedule)
        moved = _refit(st, cands, saved, t, keep_old=True)
        if moved is not None:
            found = first
        else:  # the second order: the candidates first, then the newcomer
            book.add(job, first.schedule, sign=-1)
            st.take_out(cands)
            moved = _refit(st, cands, saved, t, keep_old=False)
            if moved is not None:
                found = st.search_new(job, t)
            if not found.schedule:
                st.take_out(cands)
            else:
                book.add(job, found.schedule)
    if found.schedule:
        assert moved is not None
        st.plans[job.job_id] = found.schedule
        if not _pulls_vain(st, job, t, base, found, moved, saved):
            for j in moved:
                pull_one(st, j, t)
        done = found.completion
        assert done is not None
        gain = job.utility_at(done - job.arrival + 1) - base + sum(
            st.jobs[j].utility_at(max(st.plans[j]) - st.jobs[j].arrival + 1)
            - st.jobs[j].utility_at(max(saved[j]) - st.jobs[j].arrival + 1)
            for j in moved)
        if gain > 0:
            st.stats["repack_kept"] += 1
            st.stats["repack_moved"] += len(moved)
            st.stats["repack_admitted_utility"] += job.utility_at(done - job.arrival + 1)
            return Found(payoff=found.payoff, schedule=st.plans[job.job_id])
        book.add(job, st.plans.pop(job.job_id), sign=-1)
    # undo: every job back on its old plan (which fits: it did before)
    st.take_out(cands)
    for j in cands:
        book.add(st.jobs[j], saved[j])
        st.plans[j] = saved[j]
    return NONE_FOUND


def _refit(st: RunState, cands: list[str], saved: dict[str, dict[int, Alloc]], t: int,
           keep_old: bool) -> list[str] | None:
    """Re-plan ``cands`` (taken out of the book), tightest promise first, within their
    promises: ``keep_old`` keeps an old plan that still fits and otherwise searches the
    job's best schedule; else each is planned to complete as late as its promise allows.
    Returns the jobs that got a new plan, or None at the first that finds none (those
    placed so far stay placed; :meth:`RunState.take_out` takes them out)."""
    book = st.book
    moved: list[str] = []
    for j in sorted(cands, key=lambda j: (st.promise[j], j)):
        jj = st.jobs[j]
        if keep_old and book.fits(jj, saved[j]):
            book.add(jj, saved[j])
            st.plans[j] = saved[j]
            continue
        if keep_old:
            got = st.search_kept(jj, t, work_of(saved[j]), st.promise[j])
        else:
            got = search_latest(book, jj, start=t, work=work_of(saved[j]),
                                deadline=st.promise[j])
        if not got.schedule:
            return None
        book.add(jj, got.schedule)
        st.plans[j] = got.schedule
        moved.append(j)
    return moved


def _pulls_vain(st: RunState, job: Job, t: int, base: float, found: Found, moved: list[str],
                saved: dict[str, dict[int, Alloc]]) -> bool:
    """True if no pull of ``moved`` can make the re-pack's gain positive (:func:`gain_bound`);
    the skip is then counted in ``repack_prechecked``."""
    newcomer = completion_utility(job, found.completion)
    if gain_bound(newcomer, base, moved, st.jobs, saved, t) > 0:
        return False
    st.stats["repack_prechecked"] += 1
    return True


def gain_bound(newcomer_utility: float, base: float, moved: Sequence[str],
               jobs: Mapping[str, Job], saved: Mapping[str, Mapping[int, Alloc]],
               t: int) -> float:
    """The bound of the module docstring: ``newcomer_utility - base`` plus, per job of
    ``moved`` (in that order, as the gain sums them), ``max(0, f_j(lb_j) - f_j(s_j))`` with
    ``s_j`` the last slot of ``saved[j]`` (its plan before the re-pack, slots ``>= t``).
    O(moved + plan entries)."""
    extra = []
    for j in moved:
        job, plan = jobs[j], saved[j]
        work = work_of(plan, t)
        lb = max(t, job.arrival) + math.ceil(work / job.max_workers) - 1
        extra.append(max(0.0, completion_utility(job, lb) - completion_utility(job, max(plan))))
    return newcomer_utility - base + sum(extra)


def pull_one(st: RunState, j: str, t: int, steady: bool = False) -> bool:
    """Pull-forward: re-plan job ``j`` to complete strictly earlier if capacity allows (the
    exact search with its own utility before its planned completion); ``steady``: only if
    that does not stop or resize it while it runs
    (:func:`~psched.policies.oasis_rp.steady.keeps_running`). True if it moved."""
    book = st.book
    old = st.plans[j]
    done = max(old)
    if done <= t:
        return False
    jj = st.jobs[j]
    book.add(jj, old, sign=-1)
    got = st.search_kept(jj, t, work_of(old, t), done - 1)
    if got.schedule and (not steady or keeps_running(old, got.schedule, t, j in st.ran)):
        book.add(jj, got.schedule)
        st.plans[j] = got.schedule
        st.stats["pulled"] += 1
        return True
    book.add(jj, old)
    return False
