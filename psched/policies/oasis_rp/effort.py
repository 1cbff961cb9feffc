"""Bounded effort of ``oasis-rp`` at trace scale: a bank of slot-searches.

A re-pack (:mod:`psched.policies.oasis_rp.repack`) and a bump of reservations
(:mod:`psched.policies.oasis_rp.reservations`) each run one exact search per job they move, over
that job's window up to its promise. At the oasis-paper scale that is a few dozen searches
per arrival; on a trace of thousands of jobs a re-pack may move 64 jobs whose windows span
thousands of slots. An exact search costs about its window's length (the run tables, prices
and recursion all grow with it), so :class:`SlotBank` counts the *slots* the levers' searches
span (:func:`search_span`), never the clock: the same seed gives the same run.

The bank is credited ``effort_slots`` slot-searches at every arrival decided and held at most
:data:`BANK_SLOTS` (where a run starts). A lever's worst case is a fixed part (the newcomer's
searches) plus, per job it may move, that job's span times the searches it may run; when the
bank does not hold all of it, the jobs are taken by clash with the newcomer (:func:`clash_rank`:
the most worker-slots in the newcomer's good slots first) while their worst case fits
(``effort_slot_trimmed``), and with none affordable the lever is skipped
(``effort_slot_skipped``). The slot-searches a lever ran are then taken out
(``effort_slot_spent``). A trace whose levers search short windows never reaches the bound.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np

from psched.core.model import Alloc, Job
from psched.policies.oasis_rp.plans import Schedule

__all__ = ["BANK_SLOTS", "Ranked", "SlotBank", "clash_loads", "clash_rank", "clash_rank_reference",
           "search_span"]

#: slot-searches banked at most, and at the start of a run (:class:`SlotBank`)
BANK_SLOTS = 2_000_000.0


def search_span(job: Job, start: int, deadline: int) -> int:
    """The slots an exact search of ``job`` from ``start`` by ``deadline`` spans (its window
    clipped to the job's arrival and last slot; 0 if empty): what :class:`SlotBank` counts.
    O(1)."""
    return max(0, min(deadline, job.last_slot) - max(start, job.arrival) + 1)


@dataclass(kw_only=True)
class SlotBank:
    """The bank of slot-searches of one run (mutable: it follows the run; the module
    docstring). Starts full."""

    per_arrival: float  #: slot-searches credited per arrival decided (``effort_slots``)
    cap: float = BANK_SLOTS  #: most slot-searches banked
    bank: float = 0.0  #: available now (starts full: :meth:`__post_init__`)
    counts: dict[str, int] = field(default_factory=lambda: {
        "effort_slot_trimmed": 0, "effort_slot_skipped": 0, "effort_slot_spent": 0})

    def __post_init__(self) -> None:
        if not self.per_arrival > 0:
            raise ValueError(f"effort_slots must be positive, got {self.per_arrival!r}")
        if not self.cap >= 0:
            raise ValueError(f"the slot bank's cap must be >= 0, got {self.cap!r}")
        self.bank = self.cap

    def credit(self) -> None:
        """One arrival decided: ``per_arrival`` more, up to :attr:`cap`."""
        self.bank = min(self.cap, self.bank + self.per_arrival)

    def stats(self) -> dict[str, int]:
        """The counters for the run's report."""
        return dict(self.counts)

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
    :class:`~psched.policies.oasis_rp.plans.Schedule`): the short ones (at most
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


class Ranked(Sequence[str]):
    """:func:`clash_rank` of ``jobs``, computed only when read (:meth:`SlotBank.afford`
    reads it only when it must trim)."""

    def __init__(self, jobs: list[str], plans: Mapping[str, Mapping[int, Alloc]], t0: int,
                 t1: int) -> None:
        self._args = (jobs, plans, t0, t1)
        self._got: list[str] | None = None

    def _rank(self) -> list[str]:
        if self._got is None:
            self._got = clash_rank(*self._args)
        return self._got

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        return self._rank()[i]

    def __len__(self) -> int:
        return len(self._rank())

    def __iter__(self) -> Iterator[str]:
        return iter(self._rank())
