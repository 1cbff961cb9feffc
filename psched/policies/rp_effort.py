"""Bounded effort for ``oasis-rp`` at trace scale: a search budget and a limit on jobs moved.

A re-pack (lever (a)) and a bump of reservations (lever ``soft``) each run one exact search per
job they move, over that job's whole window up to its promise. At the oasis-paper scale that is
a few dozen searches per arrival; on a trace of thousands of jobs a re-pack moves up to 64 jobs
whose windows span thousands of slots, and most arrivals re-pack (measured: BENCHMARKS.md
section 11, "Trace scale"). The rule here bounds that effort by counts, never by the clock, so
the same seed gives the same run:

1. **At most ``moves`` jobs moved per arrival**, chosen by clash with the newcomer: when more
   candidates (or reservations) could be moved, keep the ``moves`` whose plans put the most
   worker-slots into the newcomer's *good* slots (from its arrival to the latest completion
   that keeps ``1 - repack_gap`` of its best utility), ties in the lever's own order.
2. **A search budget**: a bank credited ``per_arrival`` searches at every arrival decided, held
   at most ``cap`` (:data:`BANK_SEARCHES`, where a run starts); a re-pack of ``c`` jobs runs
   only if the bank holds its worst case (``3 c + 2`` searches: the newcomer twice, each job
   re-planned twice and pulled forward once), a bump of ``v`` reservations only if it holds
   ``v + 1``; the searches actually run are then taken out. Otherwise the lever is skipped for
   that arrival (the arrival is decided on its own search, as with the lever off) and the
   skip is counted.

Both parts act only by size: with at most ``moves`` candidates and no more than ``cap`` searches
plus ``per_arrival`` per arrival so far, nothing changes (whether a row reaches either is in
its counters). The counters (:meth:`Effort.stats`) go to the run's report: ``effort_trimmed``
(re-packs and bumps cut to ``moves`` jobs), ``effort_skipped`` (levers skipped for want of
budget), ``effort_searches`` (searches the two levers ran).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from psched.model import Alloc, Job
from psched.policies.rp_search import Schedule

__all__ = ["BANK_SEARCHES", "BANK_SLOTS", "BANK_WASTE", "Bank", "Effort", "SlotBank", "WasteBank",
           "by_clash", "clash_loads", "clash_rank", "clash_rank_reference", "repack_cost",
           "search_span"]

#: searches banked at most, and at the start of a run
BANK_SEARCHES = 5000.0
#: searches of undone levers banked at most, and at the start of a run (:class:`WasteBank`)
BANK_WASTE = 20_000.0
#: slot-searches banked at most, and at the start of a run (:class:`SlotBank`)
BANK_SLOTS = 2_000_000.0


def repack_cost(n_jobs: int) -> int:
    """Worst-case searches of a re-pack moving ``n_jobs`` jobs: the newcomer twice, each job
    re-planned in the first and the second order and pulled forward once."""
    return 3 * n_jobs + 2


def search_span(job: Job, start: int, deadline: int) -> int:
    """The slots an exact search of ``job`` from ``start`` by ``deadline`` spans (its window
    clipped to the job's arrival and last slot; 0 if empty): what :class:`SlotBank` counts.
    O(1)."""
    return max(0, min(deadline, job.last_slot) - max(start, job.arrival) + 1)


@dataclass(kw_only=True)
class Bank:
    """What every effort bank shares (mutable: it follows the run): credited ``per_arrival``
    at every arrival decided, held at most ``cap``, full where a run starts; its counters go
    to the run's report. A subclass names its options (for errors) and its skip counter."""

    OPTION: ClassVar[str] = ""  #: the option that sets ``per_arrival``
    CAP_OPTION: ClassVar[str] = ""  #: the option that sets ``cap``
    SKIPPED: ClassVar[str] = ""  #: the counter of levers skipped for want of the bank

    per_arrival: float  #: credited per arrival decided
    cap: float  #: most banked
    bank: float = 0.0  #: available now (starts full: :meth:`__post_init__`)
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.per_arrival > 0:
            raise ValueError(f"{self.OPTION} must be positive, got {self.per_arrival!r}")
        if not self.cap >= 0:
            raise ValueError(f"{self.CAP_OPTION} must be >= 0, got {self.cap!r}")
        self.bank = self.cap

    def credit(self) -> None:
        """One arrival decided: ``per_arrival`` more, up to :attr:`cap`."""
        self.bank = min(self.cap, self.bank + self.per_arrival)

    def allows(self, worst: float) -> bool:
        """True if the bank holds ``worst``; else the skip is counted."""
        if self.bank >= worst:
            return True
        self.counts[self.SKIPPED] += 1
        return False

    def stats(self) -> dict[str, int]:
        """The counters for the run's report."""
        return dict(self.counts)


@dataclass(kw_only=True)
class Effort(Bank):
    """The search bank of one run (mutable: it follows the run)."""

    OPTION: ClassVar[str] = "effort"
    CAP_OPTION: ClassVar[str] = "effort_bank"
    SKIPPED: ClassVar[str] = "effort_skipped"

    moves: int  #: most jobs one re-pack or bump may move
    cap: float = BANK_SEARCHES  #: most searches banked
    counts: dict[str, int] = field(default_factory=lambda: {
        "effort_trimmed": 0, "effort_skipped": 0, "effort_searches": 0})

    def __post_init__(self) -> None:
        if self.moves < 1:
            raise ValueError(f"effort_moves must be >= 1, got {self.moves!r}")
        super().__post_init__()

    def short(self, least: int) -> bool:
        """True (the skip counted) if the bank holds fewer than ``least`` searches, the
        fewest any run of the lever needs: it is skipped before its candidates are sought."""
        return not self.allows(least)

    def spend(self, searches: int) -> None:
        """Take the searches a lever ran out of the bank (it may go below zero once)."""
        self.bank -= searches
        self.counts["effort_searches"] += searches

    def trim(self, jobs: Sequence[str], plans: Mapping[str, Mapping[int, Alloc]],
             t0: int, t1: int) -> list[str]:
        """``jobs`` (in the lever's order) cut to :attr:`moves` by clash (:func:`by_clash`);
        unchanged, and not counted, when they are no more than that."""
        if len(jobs) <= self.moves:
            return list(jobs)
        self.counts["effort_trimmed"] += 1
        return by_clash(jobs, plans, t0, t1, self.moves)


def by_clash(jobs: Sequence[str], plans: Mapping[str, Mapping[int, Alloc]], t0: int, t1: int,
             k: int) -> list[str]:
    """The ``k`` jobs of ``jobs`` whose plans hold the most worker-slots in slots ``t0..t1``,
    ties in the order of ``jobs``; returned in the order of ``jobs``. O(plan entries)."""
    keep = set(clash_rank(jobs, plans, t0, t1)[:k])
    return [j for j in jobs if j in keep]


def clash_rank(jobs: Sequence[str], plans: Mapping[str, Mapping[int, Alloc]], t0: int,
               t1: int) -> list[str]:
    """``jobs`` (distinct) by the worker-slots their plans hold in slots ``t0..t1``, most
    first, ties in the order of ``jobs``. Exactly :func:`clash_rank_reference`: the loads are
    the same integers (:func:`clash_loads`), and a stable sort on ``-load`` keeps equal loads
    in the order of ``jobs``. O(plan entries + jobs log jobs)."""
    if len(jobs) < 2:
        return list(jobs)
    order = np.argsort(-clash_loads(jobs, plans, t0, t1), kind="stable")
    return [jobs[i] for i in order.tolist()]


def clash_loads(jobs: Sequence[str], plans: Mapping[str, Mapping[int, Alloc]], t0: int,
                t1: int) -> np.ndarray:
    """The worker-slots of each job's plan in slots ``t0..t1`` (int64, in the order of
    ``jobs``): one masked sum per plan (integer counts, summed exactly) over the container
    groups of a plan that keeps them as arrays (a
    :class:`~psched.policies.rp_search.Schedule`): the short ones (at most
    :data:`_BATCH_GROUPS` groups: most plans) together in a single ``np.add.reduceat``, a
    long one on its own (no large temporary copies); :func:`_worker_slots` for any other
    plan. O(plan entries)."""
    loads = np.zeros(len(jobs), dtype=np.int64)
    slots: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    owner: list[int] = []
    for i, j in enumerate(jobs):
        plan = plans[j]
        if isinstance(plan, Schedule):
            ts, _, cnt = plan.groups("workers")
            if ts.size > _BATCH_GROUPS:
                loads[i] = int(cnt[(ts >= t0) & (ts <= t1)].sum())
            elif ts.size:
                slots.append(ts)
                counts.append(cnt)
                owner.append(i)
        else:
            loads[i] = _worker_slots(plan, t0, t1)
    if slots:
        ts = np.concatenate(slots)
        inside = np.where((ts >= t0) & (ts <= t1), np.concatenate(counts), 0)
        starts = np.zeros(len(slots), dtype=np.int64)
        np.cumsum([a.size for a in slots[:-1]], out=starts[1:])
        loads[owner] = np.add.reduceat(inside, starts)
    return loads


#: plans with at most this many container groups are summed together (:func:`clash_loads`)
_BATCH_GROUPS = 64


def clash_rank_reference(jobs: Sequence[str], plans: Mapping[str, Mapping[int, Alloc]],
                         t0: int, t1: int) -> list[str]:
    """:func:`clash_rank` job by job (a sort on ``(-load, position)``): the reference it is
    tested against. O(plan entries + jobs log jobs)."""
    rank = {j: i for i, j in enumerate(jobs)}
    load = {j: _worker_slots(plans[j], t0, t1) for j in jobs}
    return sorted(jobs, key=lambda j: (-load[j], rank[j]))


def _worker_slots(plan: Mapping[int, Alloc], t0: int, t1: int) -> int:
    """Worker-slots of ``plan`` in slots ``t0..t1`` (from its arrays if it keeps them)."""
    if isinstance(plan, Schedule):
        ts, _, cnt = plan.groups("workers")
        return int(cnt[(ts >= t0) & (ts <= t1)].sum())
    return sum(a.n_workers for s, a in plan.items() if t0 <= s <= t1)


@dataclass(kw_only=True)
class SlotBank(Bank):
    """A bank of *slot-searches* for one run (``effort_slots``; mutable: it follows the run).

    An exact search costs about its window's length (the slots from its start to its
    deadline: the run tables, prices and recursion all grow with it), so this bank counts
    the slots each lever's searches span, not the searches. It is credited
    ``per_arrival`` slot-searches at every arrival decided, held at most ``cap`` (where a run
    starts). A lever's worst case is ``fixed`` (the newcomer's searches) plus, per job it
    may move, that job's ``cost`` (its span times the searches it may run); when the bank
    does not hold all of it, the jobs are taken by clash with the newcomer
    (:func:`by_clash` order) while their worst case fits (``effort_slot_trimmed``), and with
    none affordable the lever is skipped (``effort_slot_skipped``). The slot-searches a lever
    ran are then taken out (``effort_slot_spent``). A trace whose levers search short
    windows (deadline jobs) never reaches the bound; one whose re-packs move jobs promised
    thousands of slots ahead does. Counts only, never the clock: the same seed, the same run.
    """

    OPTION: ClassVar[str] = "effort_slots"
    CAP_OPTION: ClassVar[str] = "effort_slot_bank"
    SKIPPED: ClassVar[str] = "effort_slot_skipped"

    cap: float = BANK_SLOTS  #: most slot-searches banked
    counts: dict[str, int] = field(default_factory=lambda: {
        "effort_slot_trimmed": 0, "effort_slot_skipped": 0, "effort_slot_spent": 0})

    def afford(self, jobs: Sequence[str], cost: Mapping[str, float], fixed: float,
               ranked: Sequence[str]) -> list[str]:
        """The jobs of ``jobs`` (in the lever's order) whose worst case, with ``fixed``, the
        bank holds: all of them if it holds their sum (nothing counted); else those taken in
        the order of ``ranked`` (most clash first) while the running sum fits (counted as
        trimmed; an empty answer is counted as skipped: the lever does not run).
        O(jobs)."""
        need = fixed + sum(cost[j] for j in jobs)
        if self.bank >= need:
            return list(jobs)
        room = self.bank - fixed
        keep: set[str] = set()
        for j in ranked:
            if cost[j] > room:
                break
            room -= cost[j]
            keep.add(j)
        if not keep:
            self.counts["effort_slot_skipped"] += 1
            return []
        self.counts["effort_slot_trimmed"] += 1
        return [j for j in jobs if j in keep]

    def spend(self, slots: int) -> None:
        """Take the slot-searches a lever ran out of the bank (it may go below zero once)."""
        self.bank -= slots
        self.counts["effort_slot_spent"] += slots


@dataclass(kw_only=True)
class WasteBank(Bank):
    """A bank of *wasted* searches for one run (``effort_waste``; mutable: it follows the run).

    A re-pack or a bump that is undone (the newcomer still finds no room, or the planned
    utility would not rise) has spent its searches for nothing; one that is kept has paid
    for itself. This bank is debited only the searches of levers that were undone, credited
    ``per_arrival`` searches at every arrival decided, and held at most ``cap`` (where a run
    starts). A lever runs only while the bank holds its worst case (:func:`repack_cost` for a
    re-pack of ``c`` jobs, ``v + 1`` for a bump of ``v`` reservations); otherwise it is
    skipped for that arrival, counted (``effort_waste_skipped``). A trace where most
    re-packs are kept never reaches the bound, one where most are undone does. Counts only,
    never the clock: the same seed, the same run.
    """

    OPTION: ClassVar[str] = "effort_waste"
    CAP_OPTION: ClassVar[str] = "effort_waste_bank"
    SKIPPED: ClassVar[str] = "effort_waste_skipped"

    cap: float = BANK_WASTE  #: most searches banked
    counts: dict[str, int] = field(default_factory=lambda: {
        "effort_waste_skipped": 0, "effort_waste_spent": 0})

    def waste(self, searches: int) -> None:
        """Take the searches of an undone lever out of the bank (it may go below zero)."""
        self.bank -= searches
        self.counts["effort_waste_spent"] += searches
