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
  the density floor.

A job whose best schedule starts now is admitted with its promise
(:mod:`psched.policies.oasis_rp.promises`) and placed; one whose best schedule starts later
keeps it as a reservation (its usage in the book, priced and blocking like a plan, never a
promise) until a later boundary; one with no schedule of positive payoff stays held. So a
denser job takes the room of a less dense reservation at the next boundary, and capacity
left idle by the admitted plans goes to the densest held job that can earn with it. Promises
are never touched: admitted plans stay in the book throughout.

At most :data:`QUEUE_LIMIT` held jobs (besides the slot's arrivals) are searched per boundary,
the densest. Of the held jobs without a reservation (they found no schedule of positive payoff
at their last search) :data:`HELD_LIMIT` are searched, and past that, densest first, those one
of whose workers, with the PS it needs, fits the room the book leaves in slot ``t`` at their
turn (:func:`fits_now`), until one of them is not admitted into that room (its best schedule
starts later, or there is none): in a burst most held jobs wait while the slot is full, and
when room frees the densest of them that can use it are searched again at once, not four per
slot, while a room no held job can take costs one search more than before. The others wait for
a later boundary (a reservation not searched keeps its plan if it still fits, and its job is
admitted with it when it starts). Each search is one exact search over the job's window: the
limits bound a boundary's work (decision time, BENCHMARKS section 11).
The loop rejects a held job for good once its window has closed
(:meth:`psched.core.loop.SchedulerLoop.admit_held`), with the reason it was held for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from psched.core.model import Decision, Job
from psched.core.placement import room
from psched.policies.oasis_rp.admission import REJECT_DENSITY
from psched.policies.oasis_rp.plans import Found, Schedule
from psched.policies.oasis_rp.promises import promise_for
from psched.policies.oasis_rp.reservations import Reservation, Reservations
from psched.policies.oasis_rp.state import RunState

__all__ = ["HELD_LIMIT", "OUTCOMES", "QUEUE_LIMIT", "now_density", "queue_boundary"]

#: most held jobs (besides the slot's arrivals) searched again per boundary, densest first
QUEUE_LIMIT = 32
#: of those, most held jobs without a reservation (they found no schedule of positive
#: payoff at their last search)
HELD_LIMIT = 4
#: what became of a held job at a boundary (a probe's view): admitted with a promise, kept
#: as a reservation (its best schedule starts later), no schedule of positive payoff, below
#: the density floor, not searched (:data:`QUEUE_LIMIT` reached: ``limit``, or a reservation
#: that keeps its plan: ``kept``), or not searched past :data:`HELD_LIMIT` because one of its
#: workers with its PS does not fit the room the book leaves in the slot (``busy``) or a
#: denser job searched past it at this boundary was not admitted into that room (``tried``)
OUTCOMES = ("admitted", "reserved", "none", "floor", "limit", "kept", "busy", "tried")


def now_density(st: RunState, job: Job, t: int) -> float:
    """``job``'s density (:meth:`RunState.density`) scaled to its utility if it starts in
    slot ``t`` and runs at full size: ``f(t - a + F) / f(F)`` (0 for a job that earns
    nothing). O(1) after the first call for the job."""
    best = job.utility_at(job.fastest)
    if best <= 0.0:
        return 0.0
    return st.density(job) * job.utility_at(max(t - job.arrival, 0) + job.fastest) / best


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
    (a denser job may have taken its room): admitted with its promise if the plan starts now
    (the decision returned), else a reservation again. O(plan entries)."""
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
    return promise_for(st, r.job, Found(payoff=r.payoff, schedule=r.plan), rtol)


def queue_boundary(st: RunState, jobs: Sequence[Job], t: int, *,
                   arrive: Callable[[Job], Decision],
                   below_floor: Callable[[Job, Found], bool],
                   rtol: float,
                   probe: Callable[[str, str], None] | None = None) -> dict[str, Decision]:
    """The queue at the boundary of slot ``t`` (module docstring) over the held ``jobs``:
    ``arrive`` decides an arrival of this slot, ``below_floor`` is the density floor's test,
    ``rtol`` the promise rule's ``promise_rtol``, ``probe`` (a test's, or None) is called as
    ``probe(job_id, outcome)`` for each held job taken (:data:`OUTCOMES`). Returns the
    decisions made now (admissions); the other jobs stay held. O(arrivals +
    :data:`QUEUE_LIMIT`) exact searches, plus O(J log J) to order the J held jobs."""
    arrivals = set(st.batch)
    st.batch = []
    previous = dict(st.soft)
    reserved = set(previous)
    for r in st.soft.values():  # every reservation out: each is searched again in its turn
        st.book.add(r.job, r.plan, sign=-1)
    st.soft = Reservations()
    live = [j for j in jobs if j.last_slot >= t]
    order = sorted(live, key=lambda j: (-now_density(st, j, t), j.arrival, j.job_id))
    out: dict[str, Decision] = {}
    searched = held = 0
    full: set[tuple[object, ...]] = set()  # container shapes that no longer fit slot t
    room_left = True  # no search past HELD_LIMIT has failed to admit into slot t's room yet
    for job in order:
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
        out[job.job_id] = promise_for(st, job, found, rtol)
    return out
