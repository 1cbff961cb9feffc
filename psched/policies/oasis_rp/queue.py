"""The queue: every job not admitted yet is searched again at each boundary, densest first.

OASiS decides a job once, on arrival: a job that finds no schedule with a positive payoff is
rejected, and one that is admitted is promised whatever later, denser jobs would have made of
its room. In a burst (many more jobs than the cluster can serve soon) the first arrivals then
take the slots ahead, the denser ones behind them find no room and are rejected, and once the
burst is served the cluster stands idle while jobs that could still have earned are gone.

Here a job is held until it is admitted or its window closes, and at the boundary of every
slot ``t`` (:func:`queue_boundary`) the held jobs are taken in the order of their density now
(utility when started now and run at full size, per unit of the cluster it occupies:
:func:`now_density`), together with the slot's arrivals:

* an **arrival** is decided as in OASiS (:meth:`OasisRpPolicy._arrive
  <psched.policies.oasis_rp.policy.OasisRpPolicy._arrive>`: the density floor, the exact
  search at own-usage prices, a re-pack of admitted plans if its best is poor);
* every **held job** -- one whose best schedule started later (a *reservation*,
  :mod:`psched.policies.oasis_rp.reservations`) or one that found none -- is searched again
  from ``t`` at the current prices, its utility still counted from its arrival, with the
  reservations of every job after it in the order taken out of the book first; it must pass
  the density floor;
* every **uncommitted job** (admitted, not promised yet: before its commit point,
  :mod:`psched.policies.oasis_rp.promises`), its plan taken out of the book first, keeps that
  plan if it still fits (no denser job took its room), else is searched again the same way
  for the work it has left; it is promised if ``t`` is its commit point.

A held job whose best schedule starts now is admitted (promised, or uncommitted until its
commit point) and placed; one whose best schedule starts later keeps it as a reservation (its
usage in the book, priced and blocking like a plan, never a promise) until a later boundary;
one with no schedule of positive payoff stays held, and an uncommitted job with none gets no
work in this slot. So a denser job takes the room of a less dense reservation or uncommitted
job at the next boundary, and capacity left idle by the promised plans goes to the densest
job that can earn with it. Promises are never touched: promised plans stay in the book
throughout.

The order is the jobs' density now (:func:`now_density`): utility if started now and run at
full size, per unit of the cluster the work *left* occupies, so a job that has done most of
its work is not put behind one that has not started (the work done is sunk).

At most :data:`QUEUE_LIMIT` held and uncommitted jobs (besides the slot's arrivals) are
searched per boundary, the densest. Of the held jobs without a reservation (they found no
schedule of positive payoff at their last search) :data:`HELD_LIMIT` are searched, and past
that, densest first, those one of whose workers, with the PS it needs, fits the room the book
leaves in slot ``t`` at their turn (:func:`fits_now`), until one of them is not admitted into
that room (its best schedule starts later, or there is none): in a burst most held jobs wait
while the slot is full, and when room frees the densest of them that can use it are searched
again at once, not four per slot, while a room no held job can take costs one search more than
before. The others wait for a later boundary (a reservation or an uncommitted job not searched
keeps its plan if it still fits, and a reserved job is admitted with it when it starts). Each
search is one exact search over the job's window: the limits bound a boundary's work (decision
time, BENCHMARKS section 11).
The loop rejects a held job for good once its window has closed
(:meth:`psched.core.loop.SchedulerLoop.admit_held`), with the reason it was held for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from psched.core.model import Alloc, Decision, Job, ceil_eps
from psched.core.placement import room
from psched.policies.oasis_rp.admission import REJECT_DENSITY
from psched.policies.oasis_rp.plans import Found, Schedule, work_of
from psched.policies.oasis_rp.promises import commit, promise_for
from psched.policies.oasis_rp.reservations import Reservation, Reservations
from psched.policies.oasis_rp.state import RunState

__all__ = ["HELD_LIMIT", "OUTCOMES", "QUEUE_LIMIT", "drop_plan", "now_density",
           "queue_boundary"]

#: most held jobs (besides the slot's arrivals) searched again per boundary, densest first
QUEUE_LIMIT = 32
#: of those, most held jobs without a reservation (they found no schedule of positive
#: payoff at their last search)
HELD_LIMIT = 4
#: what became of a held or uncommitted job at a boundary (a probe's view): admitted (or an
#: uncommitted job planned again, or promised), kept as a reservation (its best schedule
#: starts later), no schedule of positive payoff, below the density floor, not searched
#: (:data:`QUEUE_LIMIT` reached: ``limit``, or a reservation or uncommitted job that keeps its
#: plan: ``kept``), or not searched past :data:`HELD_LIMIT` because one of its workers with its
#: PS does not fit the room the book leaves in the slot (``busy``) or a denser job searched
#: past it at this boundary was not admitted into that room (``tried``)
OUTCOMES = ("admitted", "reserved", "none", "floor", "limit", "kept", "busy", "tried")


def now_density(st: RunState, job: Job, t: int, left: int | None = None) -> float:
    """``job``'s density (:meth:`RunState.density`) scaled to its utility if it runs from
    slot ``t`` at full size with ``left`` worker-slots to do (default all ``W``), per unit of
    the work left: ``(W / left) f(t - a + ceil(left / N)) / f(F)`` (0 for a job that earns
    nothing). O(1) after the first call for the job."""
    best = job.utility_at(job.fastest)
    if best <= 0.0:
        return 0.0
    left = job.work if left is None else max(left, 1)
    fastest = ceil_eps(left / job.max_workers)
    return (st.density(job) * (job.work / left)
            * job.utility_at(max(t - job.arrival, 0) + fastest) / best)


def fits_now(st: RunState, job: Job, t: int, full: set[tuple[object, ...]]) -> bool:
    """One worker of ``job`` and the parameter servers it needs fit the capacity of slot
    ``t`` that the book leaves now (admitted plans and the reservations made so far this
    boundary). ``full`` holds the container shapes found not to fit at this boundary, not
    tested again (one is added when it fails): the queue's reservations and admissions only
    add usage to ``t`` (a re-pack for an arrival may free some; a shape then waits for the
    next boundary). O(S R), O(1) for a shape in ``full``."""
    spec = job.spec
    need = job.ps_needed(1)
    key = (spec.worker_demand, spec.ps_demand, need)
    if key in full:
        return False
    book = st.book
    w_dem, p_dem = book.demands_of(job)
    ok = (int(room(book.capacity[0] - book.usage[0][t], w_dem, 1).sum()) >= 1
          and (need <= 0
               or int(room(book.capacity[1] - book.usage[1][t], p_dem, need).sum()) >= need))
    if not ok:
        full.add(key)
    return ok


def _keep(st: RunState, r: Reservation | None, t: int, rtol: float) -> Decision | None:
    """A reservation the boundary's limits leave unsearched keeps its plan if it still fits
    (a denser job may have taken its room): admitted (:func:`promise_for`) if the plan starts
    now (the decision returned), else a reservation again. O(plan entries)."""
    if r is None or not st.book.fits(r.job, r.plan):
        return None
    if r.start > t:
        st.book.add(r.job, r.plan)
        st.soft[r.job.job_id] = r
        return None
    st.place(r.job, dict(r.plan))
    st.stats["queue_admitted"] += 1
    st.dirty = True
    st.decided[r.job.job_id] = (r.job, r.payoff)
    return promise_for(st, r.job, Found(payoff=r.payoff, schedule=r.plan), rtol, t)


def take_uncommitted(st: RunState, left: Mapping[str, int],
                     t: int) -> dict[str, dict[int, Alloc]]:
    """Take the plans of the uncommitted jobs that can still run (``left``: their work left,
    worker-slots; a job not in it has finished or left) out of the book and the plans, to be
    searched again: job id -> old plan (empty if none). Done before the boundary re-plans the
    promised jobs that run behind (:func:`~psched.policies.oasis_rp.steady.reconcile`), so a
    promise comes before any uncommitted plan. O(plan entries)."""
    out: dict[str, dict[int, Alloc]] = {}
    for j in st.overdue:  # last slot's idle room was all they had
        st.promise.pop(j, None)
    for j in sorted(st.uncommitted):
        if j not in left or left[j] <= 0 or st.jobs[j].last_slot < t:
            st.uncommitted.discard(j)  # finished, or left, or its window closed: no promise
            st.promise.pop(j, None)
            if j in left and left[j] > 0:  # never dropped: it runs on idle room
                st.overdue.add(j)
                drop_plan(st, j)
            continue
        plan = st.plans.pop(j, None) or {}
        if plan:
            st.book.add(st.jobs[j], plan, sign=-1)
        out[j] = plan
    return out


def drop_plan(st: RunState, job_id: str) -> None:
    """``job_id``'s plan (if any) out of the plans and the book. O(plan entries)."""
    plan = st.plans.pop(job_id, None)
    if plan:
        st.book.add(st.jobs[job_id], plan, sign=-1)


def _uncommitted(st: RunState, job: Job, old: dict[int, Alloc], left: int, t: int, rtol: float,
                 may_search: bool) -> tuple[Decision | None, bool]:
    """An uncommitted job at the boundary of slot ``t`` (its plan ``old`` out of the book):
    its old plan if that still fits and does the ``left`` worker-slots it has to do (no denser
    job took its room), else, if ``may_search``, its best schedule of that work; then its
    promise if ``t`` is its commit point. Returns that decision (or None) and whether it was
    searched. With no plan it gets no work in this slot (but the slot's idle room,
    :func:`~psched.policies.oasis_rp.ahead.work_ahead`). At most one exact search."""
    keep = bool(old) and work_of(old) == left and st.book.fits(job, old)
    searched = may_search and not keep
    plan: dict[int, Alloc] = old if keep else {}
    if searched:
        st.stats["uncommitted_searches"] += 1
        plan = st.search_new(job, t, left).schedule
        st.dirty = True
    if not plan:
        st.stats["uncommitted_unplanned"] += 1
        return None, searched
    st.place(job, plan)
    return commit(st, job, st.plans[job.job_id], left, rtol, t), searched


def queue_boundary(st: RunState, jobs: Sequence[Job], t: int, *,
                   arrive: Callable[[Job], Decision],
                   below_floor: Callable[[Job, Found], bool],
                   rtol: float, left: Mapping[str, int],
                   uncommitted: Mapping[str, dict[int, Alloc]],
                   probe: Callable[[str, str], None] | None = None) -> dict[str, Decision]:
    """The queue at the boundary of slot ``t`` (module docstring) over the held ``jobs`` and
    the ``uncommitted`` ones (their old plans, out of the book: :func:`take_uncommitted`;
    ``left``: their work left, worker-slots):
    ``arrive`` decides an arrival of this slot, ``below_floor`` is the density floor's test,
    ``rtol`` the promise rule's ``promise_rtol``, ``probe`` (a test's, or None) is called as
    ``probe(job_id, outcome)`` for each held or uncommitted job taken (:data:`OUTCOMES`).
    Returns the decisions made now (admissions, and the promises of uncommitted jobs at their
    commit point); the other jobs stay held or uncommitted. O(arrivals +
    :data:`QUEUE_LIMIT`) exact searches, plus O(J log J) to order the J jobs."""
    arrivals = set(st.batch)
    st.batch = []
    previous = dict(st.soft)
    reserved = set(previous)
    for r in st.soft.values():  # every reservation out: each is searched again in its turn
        st.book.add(r.job, r.plan, sign=-1)
    st.soft = Reservations()
    open_ = uncommitted
    live = [j for j in jobs if j.last_slot >= t] + [st.jobs[j] for j in open_]
    order = sorted(live, key=lambda j: (-now_density(st, j, t, left.get(j.job_id)),
                                        j.arrival, j.job_id))
    out: dict[str, Decision] = {}
    searched = held = 0
    full: set[tuple[object, ...]] = set()  # container shapes that no longer fit slot t
    room_left = True  # no search past HELD_LIMIT has failed to admit into slot t's room yet
    for job in order:
        if job.job_id in open_:
            got, search = _uncommitted(st, job, open_[job.job_id], left[job.job_id], t, rtol,
                                       searched < QUEUE_LIMIT)
            searched += search
            if got is not None:
                out[job.job_id] = got
            if probe is not None:
                planned = job.job_id in st.plans
                probe(job.job_id, ("admitted" if search else "kept") if planned
                      else "none" if search else "limit")
            continue
        if job.job_id in arrivals:
            got = arrive(job)
            if got.admitted or not got.hold:
                out[job.job_id] = got
            if probe is not None:
                probe(job.job_id, "admitted" if got.admitted else "floor"
                      if got.reason == REJECT_DENSITY else "reserved"
                      if job.job_id in st.soft else "none")
            continue
        over = searched >= QUEUE_LIMIT
        extra = not over and job.job_id not in reserved and held >= HELD_LIMIT
        waits = None  # why a job past HELD_LIMIT is not searched, or None
        if extra:
            waits = "tried" if not room_left else None if fits_now(st, job, t, full) else "busy"
        if over or waits is not None:
            kept = _keep(st, previous.get(job.job_id), t, rtol)
            if kept is not None:
                out[job.job_id] = kept
            if probe is not None:
                probe(job.job_id, waits if waits is not None else "limit"
                      if job.job_id not in st.soft and kept is None else "kept")
            continue
        if job.job_id not in reserved:
            held += 1
        searched += 1
        st.stats["queue_searches"] += 1
        found = st.search_new(job, t)
        held_again = not found.schedule or below_floor(job, found)
        if extra and (held_again or min(found.schedule) > t):
            room_left = False  # the room of t did not admit this one: the rest wait
        if held_again:
            if probe is not None:
                probe(job.job_id, "none" if not found.schedule else "floor")
            continue
        if min(found.schedule) > t:
            st.book.add(job, found.schedule)
            st.soft[job.job_id] = Reservation(job=job, plan=Schedule(found.schedule),
                                              payoff=found.payoff, density=st.density(job))
            if probe is not None:
                probe(job.job_id, "reserved")
            continue
        if probe is not None:
            probe(job.job_id, "admitted")
        st.place(job, found.schedule)
        st.stats["queue_admitted"] += 1
        st.dirty = True
        st.decided[job.job_id] = (job, found.payoff)
        out[job.job_id] = promise_for(st, job, found, rtol, t)
    return out
