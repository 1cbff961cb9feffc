"""Reservations before promises: the data of ``oasis-rp``'s held plans.

A promise is made on arrival and never taken back, so a long job of low value admitted when
room is left would hold that room against the denser jobs that arrive a few slots later, even
when its own plan would not start for slots (ElasticFlow cluster10, slot 688: four jobs worth
20-78 for 15-24 worker-slots admitted with plans starting in slots 695-700; in slots 690-691 a
job worth 82.3 and six short ones worth 31-62 found no room before their deadlines).

So an arrival whose best schedule does not start in its arrival slot is not admitted yet: its
schedule is kept as a **reservation** (its usage is in the book, so it is priced and it blocks
like any plan) and the job is held. At every boundary each reservation is searched again in
the queue's order (:mod:`psched.policies.oasis_rp.queue`): a denser job takes its room, and
the job is admitted, with its promise, at the boundary of the slot its best schedule starts
in (it runs only once admitted). Promises are never touched.

:class:`Reservations` is the bookkeeping (plans, densities, their JSON for a live service's
journal); :mod:`psched.policies.oasis_rp.queue` does the searches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psched.core.model import Alloc, Job

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

    @property
    def start(self) -> int:
        """First slot of the plan."""
        return min(self.plan)


class Reservations(dict[str, Reservation]):
    """Reservations by job id."""

    def __init__(self) -> None:
        super().__init__()
        #: job id -> (its reservation, that reservation's JSON row) as last written
        self._rows: dict[str, tuple[Reservation, list[Any]]] = {}

    def to_json(self) -> dict[str, Any]:
        """The reservations (job id, plan, payoff, density; in the order they were made)
        as JSON: a restarted service takes them back with
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
        return {"soft": [row for _, row in rows.values()]}

    @classmethod
    def from_json(cls, state: Mapping[str, Any], jobs: Mapping[str, Job]) -> Reservations:
        """The reservations :meth:`to_json` wrote (key ``soft``; none if absent), for the
        held ``jobs`` by id. O(plan entries)."""
        out = cls()
        for job_id, plan, payoff, dens in state.get("soft", ()):
            out[job_id] = Reservation(job=jobs[job_id], plan=plan_from_json(plan),
                                      payoff=float(payoff), density=float(dens))
        return out
