"""Reservations before promises: the data of ``oasis-rp``'s held plans.

A promise is made on arrival and never taken back, so a long job of low value admitted when
room is left would hold that room against the denser jobs that arrive a few slots later, even
when its own plan would not start for slots (ElasticFlow cluster10, slot 688: four jobs worth
20-78 for 15-24 worker-slots admitted with plans starting in slots 695-700; in slots 690-691 a
job worth 82.3 and six short ones worth 31-62 found no room before their deadlines).

So an arrival whose best schedule does not start in its arrival slot is not admitted yet: its
schedule is kept as a **reservation** (its usage is in the book, so it is priced and it blocks
like any plan) and the job is held. The job is admitted, with its promise, at the boundary of
the slot its reservation starts in (it runs only once admitted). Until then a later arrival
that finds no schedule may take reservations of lower density
(:func:`psched.policies.oasis_rp.admission.density`) out of its way
(:func:`psched.policies.oasis_rp.bump.bump`). Promises are never touched.

:class:`Reservations` is the bookkeeping (plans, densities, planned utilities, their JSON for
a live service's journal); :mod:`psched.policies.oasis_rp.bump` does the searches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from psched.model import Alloc, Job

__all__ = ["Reservation", "Reservations", "plan_from_json", "plan_to_json"]


def plan_to_json(plan: Mapping[int, Alloc]) -> list[list[Any]]:
    """A plan as JSON: ``[[slot, workers, ps], ...]`` by slot, each role's
    ``[[server, count], ...]``. O(entries)."""
    return [[int(s), [list(p) for p in a.workers], [list(p) for p in a.ps]]
            for s, a in sorted(plan.items())]


def plan_from_json(rows: Sequence[Sequence[Any]]) -> dict[int, Alloc]:
    """The plan :func:`plan_to_json` wrote. O(entries)."""
    return {int(s): Alloc(workers=tuple((int(h), int(c)) for h, c in w),
                          ps=tuple((int(h), int(c)) for h, c in q)) for s, w, q in rows}


@dataclass(frozen=True, kw_only=True)
class Reservation:
    """A held job's planned schedule, not yet promised."""

    job: Job  #: the held job
    plan: dict[int, Alloc]  #: slot -> allocation; its usage is in the book
    payoff: float  #: payoff of the search that found it (cost units)
    density: float  #: :func:`psched.policies.oasis_rp.admission.density` of the job

    @cached_property
    def start(self) -> int:
        """First slot of the plan: the job is admitted at that slot's boundary (computed
        once: a reservation's plan is never changed in place, a moved one is a new
        reservation; :meth:`Reservations.due` and :meth:`Reservations.below` read it for
        every reservation at every boundary and bump)."""
        return min(self.plan)

    @property
    def utility(self) -> float:
        """Utility of completing as planned."""
        return self.job.utility_at(max(self.plan) - self.job.arrival + 1)


class Reservations(dict[str, Reservation]):
    """Reservations by job id, and the jobs that lost theirs (to be rejected)."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped: list[Job] = []  #: lost their reservation; rejected at the next boundary
        #: job id -> (its reservation, that reservation's JSON row) as last written
        self._rows: dict[str, tuple[Reservation, list[Any]]] = {}

    def to_json(self) -> dict[str, Any]:
        """The reservations (job id, plan, payoff, density; in the order they were made)
        and the dropped jobs' ids, as JSON: a restarted service takes them back with
        :meth:`from_json`. A reservation's row is written once and reused while the same
        reservation stands (a plan is never changed in place: a moved reservation is a new
        one), so the service's capture after every decision costs O(reservations), not
        O(plan entries); the rows are shared, not to be changed. O(new plan entries)."""
        rows: dict[str, tuple[Reservation, list[Any]]] = {}
        for j, r in self.items():
            got = self._rows.get(j)
            rows[j] = got if got is not None and got[0] is r else (
                r, [j, plan_to_json(r.plan), r.payoff, r.density])
        self._rows = rows
        return {"soft": [row for _, row in rows.values()],
                "dropped": [job.job_id for job in self.dropped]}

    @classmethod
    def from_json(cls, state: Mapping[str, Any], jobs: Mapping[str, Job]) -> Reservations:
        """The reservations :meth:`to_json` wrote (keys ``soft`` and ``dropped``; none if
        absent), for the held ``jobs`` by id. O(plan entries)."""
        out = cls()
        for job_id, plan, payoff, dens in state.get("soft", ()):
            out[job_id] = Reservation(job=jobs[job_id], plan=plan_from_json(plan),
                                      payoff=float(payoff), density=float(dens))
        out.dropped = [jobs[j] for j in state.get("dropped", ())]
        return out

    def due(self, t: int) -> list[Reservation]:
        """The reservations starting in slot ``t`` or before, in arrival order of their
        jobs (then id), taken out. O(reservations)."""
        out = sorted((r for r in self.values() if r.start <= t),
                     key=lambda r: (r.job.arrival, r.job.job_id))
        for r in out:
            del self[r.job.job_id]
        return out

    def below(self, density: float, last_slot: int) -> list[Reservation]:
        """Reservations of lower density than ``density`` that start by ``last_slot``: those
        an arrival of that density and window may move, densest first. O(reservations)."""
        got = [r for r in self.values() if r.density < density and r.start <= last_slot]
        return sorted(got, key=lambda r: (-r.density, r.job.arrival, r.job.job_id))
