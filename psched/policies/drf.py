"""DRF, dominant resource fairness, the YARN/Mesos default (``baselines.md``).

Ghodsi et al., "Dominant Resource Fairness", NSDI 2011; as a baseline in Bao et al.,
INFOCOM 2018, section V. Admit every job. At each event, progressive filling over all active
jobs (running or waiting): repeatedly give one more worker, with the PS it now needs, to the
job with the smallest dominant share, placing each container round-robin on the next server
with room (:mod:`psched.placement`), until nothing more fits or every job is at its cap.
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
*batch*, dealt in closed form (:func:`psched.placement.deal`) exactly where the one-by-one
filling would put them. Complexity per event: O(B (S R + log J) + C) for B batches (at most
the containers placed plus the jobs), S servers, J active jobs, C the total cap of a batch.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np

from psched.model import EPS, Alloc, Job, ceil_eps
from psched.placement import _FIT_TOL, Pools, deal, room
from psched.policies.base import View, register_policy
from psched.policies.counts import _none_fits, _ps_for
from psched.policies.replan import ReplanPolicy

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

    def __init__(self, capacity: np.ndarray, pools: Pools, rows: list[_JobRow]) -> None:
        n_jobs = len(rows)
        self.w = [r.w for r in rows]  #: one worker's demand, per job
        self.s = [r.s for r in rows]  #: one PS's demand, per job
        self.used = [r.used for r in rows]  #: the (resource, amount) pairs demanded, per job
        self._wl, self._sl = [r.wl for r in rows], [r.sl for r in rows]
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

    def one(self, i: int, ps_after: int) -> bool:
        """Give job ``i`` one worker (and a PS if it then needs ``ps_after > p``); fits?

        Each container goes to the first server at or after its pool's cursor (cyclically)
        that has room: :func:`psched.placement.next_with_room`, computed on the lists."""
        if self._none_fits_w(i) or (ps_after > self.p[i] and self._none_fits_p(i)):
            return False  # the answer next_with_room would give, without scanning servers
        h = _next_with_room(self._fw_l, self.used[i][0], self.cur_w)
        if h is None:
            return False
        k = None
        if ps_after > self.p[i]:
            k = _next_with_room(self._fp_l, self.used[i][1], self.cur_p)
            if k is None:
                return False
            self._fp_l[k] = [a - b for a, b in zip(self._fp_l[k], self._sl[i], strict=True)]
            self.p_at[i, k] += 1
            self.cur_p = (k + 1) % len(self._fp_l)
            self.p[i] = ps_after
            self._top_p = None
        self._fw_l[h] = [a - b for a, b in zip(self._fw_l[h], self._wl[i], strict=True)]
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
        if self._none_fits_w(i):
            return 0
        if self._arrays_stale:
            self.free_w = np.array(self._fw_l, dtype=float).reshape(self.free_w.shape)
            self.free_p = np.array(self._fp_l, dtype=float).reshape(self.free_p.shape)
            self._arrays_stale = False
        w_room = room(self.free_w, self.w[i], ps_after.size)
        fit = min(ps_after.size, int(w_room.sum()))
        extra = ps_after[:fit] - self.p[i]
        p_room = room(self.free_p, self.s[i], int(extra[-1]) if fit else 0)
        fit = int(np.searchsorted(extra, p_room.sum(), side="right"))
        if fit == 0:
            return 0
        self._top_w = self._top_p = None
        dealt = deal(w_room, fit, self.cur_w)
        assert dealt is not None  # fit <= w_room.sum()
        self.w_at[i] += dealt[0]
        self.free_w -= dealt[0][:, None] * self.w[i]
        self.cur_w = dealt[1]
        if extra[fit - 1] > 0:
            dealt = deal(p_room, int(extra[fit - 1]), self.cur_p)
            assert dealt is not None  # extra[fit - 1] <= p_room.sum()
            self.p_at[i] += dealt[0]
            self.free_p -= dealt[0][:, None] * self.s[i]
            self.cur_p = dealt[1]
            self.p[i] = int(ps_after[fit - 1])
        self._fw_l, self._fp_l = self.free_w.tolist(), self.free_p.tolist()
        self.n[i] += fit
        return fit

    def _none_fits_w(self, i: int) -> bool:
        if not self._fw_l:
            return True
        if self._top_w is None:
            self._top_w = [max(col) for col in zip(*self._fw_l, strict=True)]
        return _none_fits(self._top_w, self.used[i][0])

    def _none_fits_p(self, i: int) -> bool:
        if not self._fp_l:
            return True
        if self._top_p is None:
            self._top_p = [max(col) for col in zip(*self._fp_l, strict=True)]
        return _none_fits(self._top_p, self.used[i][1])


def _next_with_room(free: list[list[float]], used: list[tuple[int, float]],
                    start: int) -> int | None:
    """:func:`psched.placement.next_with_room` on a list of rows (the same test, ``free /
    demand + tol >= 1`` on every demanded resource; the same cyclic search from ``start``)."""
    n = len(free)
    if n == 0:
        return None
    start %= n
    if not used:
        return start
    for h in range(start, n):
        row = free[h]
        if all(row[r] / v + _FIT_TOL >= 1.0 for r, v in used):
            return h
    for h in range(start):
        row = free[h]
        if all(row[r] / v + _FIT_TOL >= 1.0 for r, v in used):
            return h
    return None


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

    def reset(self) -> None:
        self._placed = self._batches = 0
        self._rows, self._rows_for = {}, None

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

    def replan(self, view: View) -> dict[str, Alloc]:
        """Progressive filling from an empty cluster; see the module docstring."""
        statuses = list(view.active.values())
        if not statuses:
            return {}
        if len(self._rows) > 2 * len(statuses) + 64:
            self._rows = {j: r for j, r in self._rows.items() if j in view.active}
        jobs = [st.job for st in statuses]
        rows = [self._row(j) for j in jobs]
        cap = [0 if _ps_for(r.ratio, 1) > 1 else min(j.max_workers,
                                                      max(1, ceil_eps(st.remaining)))
               for j, st, r in zip(jobs, statuses, rows, strict=True)]
        fill = _Filling(self.capacity, self.pools, rows)
        heap = [(0.0, i) for i in range(len(jobs)) if cap[i] > 0]
        while heap:
            _, i = heapq.heappop(heap)
            n_i, row = fill.n[i], rows[i]
            ps_next = _ps_for(row.ratio, n_i + 1)
            if n_i + 1 >= cap[i]:  # its last worker: one step, nothing to push back
                if fill.one(i, ps_next):
                    self._placed += 1
                continue
            nxt = share_key(n_i + 1, ps_next, row.ws_l, row.ss_l)
            if heap and (nxt, i) > heap[0]:
                # the usual case: one worker, then another job is due
                if fill.one(i, ps_next):
                    self._placed += 1
                    heapq.heappush(heap, (nxt, i))
                continue  # a job whose next worker does not fit is frozen for this event
            # a batch: every increment while i stays before the next job in (share, arrival)
            ms = np.arange(n_i, cap[i])
            keys = share_keys(ms, _ps_needed(row.ratio, ms), row.ws, row.ss)
            due = np.ones(ms.size, dtype=bool)
            if heap:
                due = (keys < heap[0][0]) | ((keys == heap[0][0]) & (i < heap[0][1]))
            batch = int(ms.size if due.all() else np.argmin(due))
            got = fill.many(i, _ps_needed(row.ratio, ms[:batch] + 1))
            self._placed += got
            self._batches += 1
            if got == batch and n_i + batch < cap[i]:
                heapq.heappush(heap, (float(keys[batch]), i))
        wi, pi = self.pools.worker, self.pools.ps
        return {
            jobs[i].job_id: Alloc.of(
                {int(wi[h]): int(fill.w_at[i, h]) for h in np.flatnonzero(fill.w_at[i])},
                {int(pi[k]): int(fill.p_at[i, k]) for k in np.flatnonzero(fill.p_at[i])})
            for i in range(len(jobs)) if fill.n[i] > 0
        }

    def report(self) -> dict[str, Any]:
        return {"drf_containers_placed": self._placed, "drf_batches": self._batches}
