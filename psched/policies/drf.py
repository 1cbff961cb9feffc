"""DRF, dominant resource fairness, the YARN/Mesos default (``baselines.md``).

Ghodsi et al., "Dominant Resource Fairness", NSDI 2011; as a baseline in Bao et al.,
INFOCOM 2018, section V. Admit every job. At each event, progressive filling over all active
jobs (running or waiting): repeatedly give one more worker, with the PS it now needs, to the
job with the smallest dominant share, placing each container round-robin on the next server
with room (:mod:`psched.core.placement`), until nothing more fits or every job is at its cap.
Between events the allocation, placement included, is kept.

Choices the specification leaves open, made to keep the rival strong:

* **Cap** of a job: ``min(N, ceil(remaining work))`` workers (at least 1 while it is active).
  More workers than the work left in a slot finish nothing sooner and only take resources from
  the others.
* **Dominant share**: a job's usage of each resource type over the total of that type in both
  pools together (``shares="combined"``, the specification's reading); ``"per_pool"`` treats
  the worker pool's and the PS pool's resources as distinct types instead.
* **Ties** go to the earlier arrival. A job whose next worker (or that worker's PS) does not
  fit anywhere is frozen for the rest of the event: free capacity only shrinks while filling.
* Each event places from an empty cluster (containers may move at events, as under every
  re-planning rival); both pools' cursors start at their first server.

Speed: a job that stays the smallest-share job for several workers in a row gets them as one
*batch*, dealt in closed form (:func:`psched.core.placement.deal`) exactly where the one-by-one
filling would put them. The jobs with no worker yet wait in arrival order beside the heap
(:class:`_Fresh`); once a job's first worker does not fit, every later job of the same *kind*
(:meth:`~psched.policies.counts.JobFacts.kind`: the same first worker and PS) would fail the
same way and is skipped in bulk; caps, kinds and one-worker shares live in an
:class:`~psched.policies.table.ActiveTable` (recomputed only for jobs whose status changed).
Complexity per event: O(J) at C speed + O(B (S R + log J) + C + K J) for B batches and single
steps (at most the containers placed plus one per kind that stops fitting), S servers,
C the total cap of a batch and K kinds that stop fitting.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from psched.core.model import EPS, Alloc, Job, ceil_eps
from psched.core.placement import FIT_TOL, Pools, deal, room
from psched.core.policy import JobStatus, View, register_policy
from psched.policies.counts import none_fits, ps_for
from psched.policies.replan import ReplanPolicy
from psched.policies.table import ActiveTable

__all__ = ["SHARE_DECIMALS", "SHARE_MODES", "DrfPolicy", "share_key", "share_keys"]

SHARE_MODES = ("combined", "per_pool")
#: Decimals kept when comparing dominant shares (ties within float noise go by arrival).
SHARE_DECIMALS = 12
_SCALE = 10.0**SHARE_DECIMALS


def _unit_shares(capacity: np.ndarray, worker_rows: np.ndarray, ps_rows: np.ndarray,
                 w: np.ndarray, s: np.ndarray, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """Share vectors of one worker and one PS per job (J x R' each)."""
    if mode == "combined":
        tot = capacity.sum(axis=0)
        wz, sz = tot, tot
    else:
        zeros = np.zeros(capacity.shape[1])
        tot_w, tot_p = capacity[worker_rows].sum(axis=0), capacity[ps_rows].sum(axis=0)
        wz = np.concatenate([tot_w, np.full_like(zeros, np.inf)])
        sz = np.concatenate([np.full_like(zeros, np.inf), tot_p])
        w = np.concatenate([w, np.zeros_like(w)], axis=1)
        s = np.concatenate([np.zeros_like(s), s], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ws = np.where(wz > 0, w / wz, 0.0)
        ss = np.where(sz > 0, s / sz, 0.0)
    return ws, ss


def _ps_needed(ratio: float, workers: np.ndarray) -> np.ndarray:
    """``Job.ps_needed`` vectorised: ``ceil(b/B * n - 1e-9)``, 0 for no workers."""
    return np.where(workers > 0, np.ceil(ratio * workers - EPS), 0).astype(np.int64)


def share_key(workers: int, ps: int, worker_share: list[float], ps_share: list[float]) -> float:
    """Dominant share ``max_r (workers w_r + ps s_r) / total_r``, rounded for comparing.

    Rounded to :data:`SHARE_DECIMALS` decimals, so that shares equal in exact arithmetic tie
    (and the earlier arrival wins) whatever float noise they carry.
    """
    top = max((workers * a + ps * b for a, b in zip(worker_share, ps_share, strict=True)),
              default=0.0)
    return round(top * _SCALE) / _SCALE


def share_keys(workers: np.ndarray, ps: np.ndarray, worker_share: np.ndarray,
               ps_share: np.ndarray) -> np.ndarray:
    """:func:`share_key` at several (workers, PS) counts (bit for bit the same values)."""
    use = workers[:, None] * worker_share + ps[:, None] * ps_share
    top = use.max(axis=1) if use.shape[1] else np.zeros(workers.shape[0])
    return np.rint(top * _SCALE) / _SCALE


@dataclass(frozen=True, kw_only=True)
class _JobRow:
    """What the filling reads of one job, computed once per job (and cluster)."""

    w: np.ndarray  #: one worker's demand
    s: np.ndarray  #: one PS's demand
    wl: list[float]  #: the same, as lists
    sl: list[float]
    ws: np.ndarray  #: one worker's and one PS's shares (:func:`_unit_shares`)
    ss: np.ndarray
    ws_l: list[float]
    ss_l: list[float]
    used: tuple[list[tuple[int, float]], list[tuple[int, float]]]  #: demanded resources
    ratio: float  #: b/B


class _Filling:
    """One event's filling: free capacity per pool, counts and placements, cursors."""

    def __init__(self, capacity: np.ndarray, pools: Pools, n_jobs: int,
                 row: Callable[[int], _JobRow]) -> None:
        self._row_of = row
        self._rows: dict[int, _JobRow] = {}  # the rows of the jobs this filling has touched
        self._top_w: list[float] | None = None  # most free per resource; None = stale
        self._top_p: list[float] | None = None
        self.free_w = capacity[pools.worker].copy()  #: free capacity of the worker servers
        self.free_p = capacity[pools.ps].copy()  #: free capacity of the PS servers
        # one-container steps work on Python lists (the same float operations as numpy, row by
        # row); the arrays are refreshed from them only when a batch needs them
        self._fw_l: list[list[float]] = self.free_w.tolist()
        self._fp_l: list[list[float]] = self.free_p.tolist()
        self._arrays_stale = False
        self.cur_w = self.cur_p = 0  #: round-robin cursors (positions in each pool)
        self.n = [0] * n_jobs  #: workers per job
        self.p = [0] * n_jobs  #: PS per job
        self.w_at = np.zeros((n_jobs, pools.worker.size), dtype=np.int64)
        self.p_at = np.zeros((n_jobs, pools.ps.size), dtype=np.int64)

    def row(self, i: int) -> _JobRow:
        """Job ``i``'s :class:`_JobRow`."""
        r = self._rows.get(i)
        if r is None:
            r = self._rows[i] = self._row_of(i)
        return r

    def touched(self) -> list[int]:
        """Jobs that got at least one container, ascending."""
        return sorted(i for i in self._rows if self.n[i] > 0)

    def one(self, i: int, ps_after: int) -> bool:
        """Give job ``i`` one worker (and a PS if it then needs ``ps_after > p``); fits?

        Each container goes to the first server at or after its pool's cursor (cyclically)
        that has room: :func:`psched.core.placement.next_with_room`, computed on the lists."""
        r = self.row(i)
        if self._none_fits_w(r) or (ps_after > self.p[i] and self._none_fits_p(r)):
            return False  # the answer next_with_room would give, without scanning servers
        h = _next_with_room(self._fw_l, r.used[0], self.cur_w)
        if h is None:
            return False
        k = None
        if ps_after > self.p[i]:
            k = _next_with_room(self._fp_l, r.used[1], self.cur_p)
            if k is None:
                return False
            self._fp_l[k] = [a - b for a, b in zip(self._fp_l[k], r.sl, strict=True)]
            self.p_at[i, k] += 1
            self.cur_p = (k + 1) % len(self._fp_l)
            self.p[i] = ps_after
            self._top_p = None
        self._fw_l[h] = [a - b for a, b in zip(self._fw_l[h], r.wl, strict=True)]
        self.w_at[i, h] += 1
        self.cur_w = (h + 1) % len(self._fw_l)
        self.n[i] += 1
        self._top_w = None
        self._arrays_stale = True
        return True

    def many(self, i: int, ps_after: np.ndarray) -> int:
        """Give job ``i`` up to ``len(ps_after)`` workers one by one, stopping at the first
        that does not fit; after ``m`` of them it needs ``ps_after[m - 1]`` PS. Returns how
        many it got. Dealt in closed form: only this job places, each pool has its cursor."""
        r = self.row(i)
        if self._none_fits_w(r):
            return 0
        if self._arrays_stale:
            self.free_w = np.array(self._fw_l, dtype=float).reshape(self.free_w.shape)
            self.free_p = np.array(self._fp_l, dtype=float).reshape(self.free_p.shape)
            self._arrays_stale = False
        w_room = room(self.free_w, r.w, ps_after.size)
        fit = min(ps_after.size, int(w_room.sum()))
        extra = ps_after[:fit] - self.p[i]
        p_room = room(self.free_p, r.s, int(extra[-1]) if fit else 0)
        fit = int(np.searchsorted(extra, p_room.sum(), side="right"))
        if fit == 0:
            return 0
        self._top_w = self._top_p = None
        dealt = deal(w_room, fit, self.cur_w)
        assert dealt is not None  # fit <= w_room.sum()
        self.w_at[i] += dealt[0]
        self.free_w -= dealt[0][:, None] * r.w
        self.cur_w = dealt[1]
        if extra[fit - 1] > 0:
            dealt = deal(p_room, int(extra[fit - 1]), self.cur_p)
            assert dealt is not None  # extra[fit - 1] <= p_room.sum()
            self.p_at[i] += dealt[0]
            self.free_p -= dealt[0][:, None] * r.s
            self.cur_p = dealt[1]
            self.p[i] = int(ps_after[fit - 1])
        self._fw_l, self._fp_l = self.free_w.tolist(), self.free_p.tolist()
        self.n[i] += fit
        return fit

    def _none_fits_w(self, r: _JobRow) -> bool:
        if not self._fw_l:
            return True
        if self._top_w is None:
            self._top_w = [max(col) for col in zip(*self._fw_l, strict=True)]
        return none_fits(self._top_w, r.used[0])

    def _none_fits_p(self, r: _JobRow) -> bool:
        if not self._fp_l:
            return True
        if self._top_p is None:
            self._top_p = [max(col) for col in zip(*self._fp_l, strict=True)]
        return none_fits(self._top_p, r.used[1])


def _next_with_room(free: list[list[float]], used: list[tuple[int, float]],
                    start: int) -> int | None:
    """:func:`psched.core.placement.next_with_room` on a list of rows (the same test, ``free /
    demand + tol >= 1`` on every demanded resource; the same cyclic search from ``start``)."""
    n = len(free)
    if n == 0:
        return None
    start %= n
    if not used:
        return start
    for h in range(start, n):
        row = free[h]
        if all(row[r] / v + FIT_TOL >= 1.0 for r, v in used):
            return h
    for h in range(start):
        row = free[h]
        if all(row[r] / v + FIT_TOL >= 1.0 for r, v in used):
            return h
    return None


class _Fresh:
    """The jobs with no worker yet, in arrival order: in DRF's heap they are ``(0.0, i)``.

    ``dead`` holds the kinds (:meth:`~psched.policies.counts.JobFacts.kind`) whose first
    worker has failed to fit in this filling; free capacity only shrinks, so every later job
    of a dead kind fails its first worker too and changes nothing. :meth:`skip` drops a run
    of them at once and returns the batch attempts the one-by-one filling would have counted:
    a popped job with no worker, cap > 1 and share 0 at one worker takes the batch branch
    when another share-0 entry follows it (the other branches count nothing)."""

    def __init__(self, order: np.ndarray, cap: np.ndarray, kind: np.ndarray,
                 key1: np.ndarray) -> None:
        self.order = order  #: job positions, ascending
        self._kind = kind
        self._list = order.tolist()
        self.ptr = 0  #: next entry of ``order``
        self.dead: set[int] = set()
        # batch attempts a dead fresh job would count when another share-0 entry follows it
        z = ((cap[order] > 1) & (key1[order] == 0.0)).astype(np.int64)
        self._zeros = np.concatenate([[0], np.cumsum(z)])
        self._alive: np.ndarray | None = None
        self._n_dead = 0

    def top(self) -> tuple[float, int] | None:
        """The next fresh entry as a heap tuple, or None."""
        return (0.0, self._list[self.ptr]) if self.ptr < len(self._list) else None

    def pop(self) -> int:
        i = int(self._list[self.ptr])
        self.ptr += 1
        return i

    def kind_of(self, i: int) -> int:
        return int(self._kind[i])

    def dead_ahead(self) -> bool:
        """Is the next fresh job of a dead kind, with another fresh job after it?"""
        return bool(self.dead) and self.ptr + 1 < len(self._list) and int(
            self._kind[self._list[self.ptr]]) in self.dead

    def skip(self, heap: list[tuple[float, int]]) -> int:
        """Drop the run of dead-kind fresh jobs from the next one: not the last fresh job, and
        none after the heap's top. Returns the batch attempts they would have counted."""
        if self._alive is None or self._n_dead != len(self.dead):
            dead = np.fromiter(self.dead, dtype=np.int64, count=len(self.dead))
            self._alive = np.flatnonzero(~np.isin(self._kind[self.order], dead))
            self._n_dead = len(self.dead)
        end = len(self._list) - 1  # the last fresh job is popped the ordinary way
        if heap and heap[0][0] == 0.0:  # a share-0 heap entry comes before later fresh jobs
            end = min(end, int(np.searchsorted(self.order, heap[0][1])))
        nxt = int(np.searchsorted(self._alive, self.ptr))
        stop = min(end, int(self._alive[nxt]) if nxt < self._alive.size else end)
        stop = max(stop, self.ptr + 1)
        n = int(self._zeros[stop] - self._zeros[self.ptr])
        self.ptr = stop
        return n


@register_policy("drf")
class DrfPolicy(ReplanPolicy):
    """Progressive filling of dominant shares at every event."""

    name = "drf"

    def __init__(self, shares: str = "combined") -> None:
        super().__init__()
        if shares not in SHARE_MODES:
            raise ValueError(f"shares must be one of {SHARE_MODES}, got {shares!r}")
        self.shares = shares  #: how dominant shares are counted (module docstring)
        self._placed = 0
        self._batches = 0
        self._rows: dict[str, _JobRow] = {}
        self._rows_for: np.ndarray | None = None  # the capacity the rows were computed for
        self._table = ActiveTable(3, self._numbers)
        self._table_for: np.ndarray | None = None

    def reset(self) -> None:
        self._placed = self._batches = 0
        self._rows, self._rows_for = {}, None
        self._table.clear()
        self._table_for = None

    def _row(self, job: Job) -> _JobRow:
        """The job's :class:`_JobRow`, cached (shares depend on the cluster: a new cluster
        clears the cache)."""
        if self._rows_for is not self.capacity:
            self._rows, self._rows_for = {}, self.capacity
        row = self._rows.get(job.job_id)
        if row is None:
            w, s, ratio, _ = self.facts.of(job)
            ws, ss = _unit_shares(self.capacity, self.pools.worker, self.pools.ps, w[None],
                                  s[None], self.shares)
            row = _JobRow(w=w, s=s, wl=w.tolist(), sl=s.tolist(), ws=ws[0], ss=ss[0],
                          ws_l=ws[0].tolist(), ss_l=ss[0].tolist(), used=self.facts.used(job),
                          ratio=ratio)
            self._rows[job.job_id] = row
        return row

    def _numbers(self, st: JobStatus) -> tuple[float, float, float]:
        """(cap, kind of first worker, dominant-share key at one worker) of one job."""
        job = st.job
        row = self._row(job)
        ps1 = ps_for(row.ratio, 1)
        cap = 0 if ps1 > 1 else min(job.max_workers, max(1, ceil_eps(st.remaining)))
        return cap, self.facts.kind(job), share_key(1, ps1, row.ws_l, row.ss_l)

    def replan(self, view: View) -> dict[str, Alloc]:
        """Progressive filling from an empty cluster; see the module docstring.

        The jobs with no worker yet sit in the heap at share 0, so they are popped in arrival
        order (before any job with a worker, unless its share is 0 too); they are kept as an
        ordered array beside the heap instead (:class:`_Fresh`), the same pop order. A kind
        whose first worker no longer fits (free capacity only shrinks) makes every later job
        of that kind a no-op, skipped in bulk with the batch count it would have added."""
        if not view.active:
            return {}
        if len(self._rows) > 2 * len(view.active) + 64:
            self._rows = {j: r for j, r in self._rows.items() if j in view.active}
        if self._table_for is not self.capacity:  # shares depend on the cluster
            self._table.clear()
            self._table_for = self.capacity
        ids, statuses, nums = self._table.sync(view.active)
        cap = nums[:, 0].astype(np.int64)
        fill = _Filling(self.capacity, self.pools, len(ids),
                        lambda i: self._row(statuses[i].job))
        fresh = _Fresh(np.flatnonzero(cap > 0), cap, nums[:, 1].astype(np.int64), nums[:, 2])
        heap: list[tuple[float, int]] = []
        cap_l = cap.tolist()
        while True:
            top = fresh.top()
            if heap and (top is None or heap[0] < top):
                _, i = heapq.heappop(heap)
            elif top is not None:
                if fresh.dead_ahead():
                    self._batches += fresh.skip(heap)
                    continue
                i = fresh.pop()
            else:
                break
            n_i, row = fill.n[i], fill.row(i)
            ps_next = ps_for(row.ratio, n_i + 1)
            if n_i + 1 >= cap_l[i]:  # its last worker: one step, nothing to push back
                if fill.one(i, ps_next):
                    self._placed += 1
                elif n_i == 0:
                    fresh.dead.add(fresh.kind_of(i))
                continue
            nxt = share_key(n_i + 1, ps_next, row.ws_l, row.ss_l)
            first = fresh.top()
            first = heap[0] if heap and (first is None or heap[0] < first) else first
            if first is not None and (nxt, i) > first:
                # the usual case: one worker, then another job is due
                if fill.one(i, ps_next):
                    self._placed += 1
                    heapq.heappush(heap, (nxt, i))
                elif n_i == 0:
                    fresh.dead.add(fresh.kind_of(i))
                continue  # a job whose next worker does not fit is frozen for this event
            # a batch: every increment while i stays before the next job in (share, arrival)
            ms = np.arange(n_i, cap_l[i])
            keys = share_keys(ms, _ps_needed(row.ratio, ms), row.ws, row.ss)
            due = np.ones(ms.size, dtype=bool)
            if first is not None:
                due = (keys < first[0]) | ((keys == first[0]) & (i < first[1]))
            batch = int(ms.size if due.all() else np.argmin(due))
            got = fill.many(i, _ps_needed(row.ratio, ms[:batch] + 1))
            self._placed += got
            self._batches += 1
            if got == 0 and n_i == 0 and batch > 0:
                fresh.dead.add(fresh.kind_of(i))
            if got == batch and n_i + batch < cap_l[i]:
                heapq.heappush(heap, (float(keys[batch]), i))
        wi, pi = self.pools.worker, self.pools.ps
        return {
            ids[i]: Alloc.of(
                {int(wi[h]): int(fill.w_at[i, h]) for h in np.flatnonzero(fill.w_at[i])},
                {int(pi[k]): int(fill.p_at[i, k]) for k in np.flatnonzero(fill.p_at[i])})
            for i in fill.touched()
        }

    def report(self) -> dict[str, Any]:
        return {"drf_containers_placed": self._placed, "drf_batches": self._batches}
