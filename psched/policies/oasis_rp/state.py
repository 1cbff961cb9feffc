"""The state of one ``oasis-rp`` run: the plan book, the admitted jobs' plans and promises, the
held and uncommitted jobs and the counters, with the searches every mechanism runs on it.

Every mechanism (:mod:`~psched.policies.oasis_rp.repack`,
:mod:`~psched.policies.oasis_rp.reservations`, :mod:`~psched.policies.oasis_rp.steady`,
:mod:`~psched.policies.oasis_rp.ahead`, :mod:`~psched.policies.oasis_rp.restore`) is a function
of a :class:`RunState`; the policy (:mod:`~psched.policies.oasis_rp.policy`) owns one and
calls them in the order of the round: arrivals, then the boundary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from psched.core.model import Alloc, Cluster, Job
from psched.policies.oasis_rp.admission import FitCounts, density
from psched.policies.oasis_rp.book import PlanLedger
from psched.policies.oasis_rp.own import search_own
from psched.policies.oasis_rp.plans import Found, Plans, Schedule
from psched.policies.oasis_rp.reservations import Reservations
from psched.policies.oasis_rp.search import search

__all__ = ["NONE_FOUND", "RunState", "new_stats"]

#: a search or a lever that found nothing (nothing changed)
NONE_FOUND = Found(payoff=0.0, schedule={})


def new_stats() -> dict[str, float]:
    """The counters of a run's report, all zero, in report order."""
    return {"repack_tried": 0, "repack_kept": 0, "repack_moved": 0,
            "repack_admitted_utility": 0.0,
            "queue_admitted": 0, "queue_searches": 0,
            "pulled": 0, "replanned_behind": 0, "promise_at_risk": 0,
            "kept_running": 0, "soft_reserved": 0, "ahead_jobs": 0, "ahead_moved": 0,
            "repack_prechecked": 0,
            "admitted_uncommitted": 0, "committed_late": 0, "uncommitted_searches": 0,
            "uncommitted_unplanned": 0, "overdue_jobs": 0, "overdue_moved": 0}


@dataclass(kw_only=True, eq=False)
class RunState:
    """What one run of ``oasis-rp`` knows (mutable: it follows the run)."""

    book: PlanLedger  #: usage and prices of every plan and reservation
    cluster: Cluster  #: the cluster now (servers may join)
    jobs: dict[str, Job] = field(default_factory=dict)  #: admitted jobs by id
    plans: Plans = field(default_factory=Plans)  #: job -> {slot -> alloc}, slots not yet run
    #: job -> promised completion slot; for an uncommitted job, its planned completion (what
    #: the revisions of one boundary keep it within)
    promise: dict[str, int] = field(default_factory=dict)
    #: admitted jobs not promised yet (:mod:`~psched.policies.oasis_rp.promises`)
    uncommitted: set[str] = field(default_factory=set)
    #: admitted jobs past their window, unfinished: never dropped, they run on the idle room
    #: of each slot until they complete (:func:`~psched.policies.oasis_rp.ahead.work_ahead`)
    overdue: set[str] = field(default_factory=set)
    commit_margin: int = 0  #: slots of slack a promise keeps at the commit point
    soft: Reservations = field(default_factory=Reservations)  #: held jobs' reservations
    batch: list[str] = field(default_factory=list)  #: held on arrival this slot, undecided
    restored: dict[str, Job] = field(default_factory=dict)  #: held jobs replayed, until resume
    ran: dict[str, Alloc] = field(default_factory=dict)  #: jobs that ran in the last slot
    #: every job that arrived, by id, with its payoff when admitted (cost units; 0 until
    #: then): the jobs the certificate counts
    decided: dict[str, tuple[Job, float]] = field(default_factory=dict)
    promised_utility: float = 0.0  #: utility of every promise made
    stats: dict[str, float] = field(default_factory=new_stats)  #: the report's counters
    dirty: bool = False  #: plans changed: the next boundary pulls jobs forward
    #: density per job id on :attr:`cluster`, and the container counts it is computed from
    dens: dict[str, float] = field(default_factory=dict)
    fits: FitCounts | None = None

    def search_new(self, job: Job, t: int, work: int | None = None) -> Found:
        """The best schedule of a job not yet promised, from slot ``t``, at own-usage prices
        (:func:`~psched.policies.oasis_rp.own.search_own`): its ``work`` worker-slots left
        (default all of them), its utility counted from its arrival."""
        return search_own(self.book, job, start=t, work=job.work if work is None else work,
                          deadline=job.last_slot)

    def search_kept(self, job: Job, t: int, work: int, deadline: int,
                    flat: bool = False) -> Found:
        """Re-plan an admitted job (re-pack, pull-forward): its best schedule of ``work``
        worker-slots by ``deadline``, no floor (``flat``: the cheapest one)."""
        return search(self.book, job, start=t, work=work, deadline=deadline, flat=flat,
                      floor=-math.inf)

    def place(self, job: Job, schedule: dict[int, Alloc]) -> None:
        """Put ``schedule`` in the book as ``job``'s plan."""
        self.book.add(job, schedule)
        self.plans[job.job_id] = Schedule(schedule)

    def take_out(self, jobs: list[str]) -> None:
        """Take the current plans of ``jobs`` out of the plans and the book."""
        for j in jobs:
            plan = self.plans.pop(j, None)
            if plan is not None:
                self.book.add(self.jobs[j], plan, sign=-1)

    def density(self, job: Job) -> float:
        """:func:`~psched.policies.oasis_rp.admission.density` of ``job`` on the cluster now,
        computed once per job (the cache is cleared when servers join). O(S R) the first
        time."""
        got = self.dens.get(job.job_id)
        if got is None:
            if self.fits is None or self.fits.cluster is not self.cluster:
                self.fits = FitCounts(self.cluster)  # container counts per demand, kept
            got = self.dens[job.job_id] = density(job, self.cluster, self.fits)
        return got
