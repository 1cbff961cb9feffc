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

from psched.model import Alloc
from psched.policies.rp_search import Schedule

__all__ = ["BANK_SEARCHES", "Effort", "by_clash", "repack_cost"]

#: searches banked at most, and at the start of a run
BANK_SEARCHES = 5000.0


def repack_cost(n_jobs: int) -> int:
    """Worst-case searches of a re-pack moving ``n_jobs`` jobs: the newcomer twice, each job
    re-planned in the first and the second order and pulled forward once."""
    return 3 * n_jobs + 2


@dataclass(kw_only=True)
class Effort:
    """The search bank of one run (mutable: it follows the run)."""

    per_arrival: float  #: searches credited per arrival decided
    moves: int  #: most jobs one re-pack or bump may move
    cap: float = BANK_SEARCHES  #: most searches banked
    bank: float = 0.0  #: searches available now (starts full: :meth:`__post_init__`)
    counts: dict[str, int] = field(default_factory=lambda: {
        "effort_trimmed": 0, "effort_skipped": 0, "effort_searches": 0})

    def __post_init__(self) -> None:
        if not self.per_arrival > 0:
            raise ValueError(f"effort must be positive, got {self.per_arrival!r}")
        if self.moves < 1:
            raise ValueError(f"effort_moves must be >= 1, got {self.moves!r}")
        if not self.cap >= 0:
            raise ValueError(f"effort_bank must be >= 0, got {self.cap!r}")
        self.bank = self.cap

    def credit(self) -> None:
        """One arrival decided: ``per_arrival`` searches more, up to :attr:`cap`."""
        self.bank = min(self.cap, self.bank + self.per_arrival)

    def allows(self, worst: int) -> bool:
        """True if the bank holds ``worst`` searches; else the skip is counted."""
        if self.bank >= worst:
            return True
        self.counts["effort_skipped"] += 1
        return False

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

    def stats(self) -> dict[str, int]:
        """The counters for the run's report."""
        return dict(self.counts)


def by_clash(jobs: Sequence[str], plans: Mapping[str, Mapping[int, Alloc]], t0: int, t1: int,
             k: int) -> list[str]:
    """The ``k`` jobs of ``jobs`` whose plans hold the most worker-slots in slots ``t0..t1``,
    ties in the order of ``jobs``; returned in the order of ``jobs``. O(plan entries)."""
    rank = {j: i for i, j in enumerate(jobs)}
    load = {j: _worker_slots(plans[j], t0, t1) for j in jobs}
    keep = set(sorted(jobs, key=lambda j: (-load[j], rank[j]))[:k])
    return [j for j in jobs if j in keep]


def _worker_slots(plan: Mapping[int, Alloc], t0: int, t1: int) -> int:
    """Worker-slots of ``plan`` in slots ``t0..t1`` (from its arrays if it keeps them)."""
    if isinstance(plan, Schedule):
        ts, _, cnt = plan.groups("workers")
        return int(cnt[(ts >= t0) & (ts <= t1)].sum())
    return sum(a.n_workers for s, a in plan.items() if t0 <= s <= t1)
