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
filling would put them. Complexity per event: O(B (S R + log J) + C) for B batches (at most
the containers placed plus the jobs), S servers, J active jobs, C the total cap of a batch.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from legacy_policies.placement import Pools, deal, next_with_room, room
from legacy_policies.replan import ReplanPolicy
from psched.core.model import EPS, Alloc, Job, ceil_eps
from psched.core.policy import View

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


class _Filling:
    """One event's filling: free capacity per pool, counts and placements, cursors."""

    def __init__(self, capacity: np.ndarray, pools: Pools, w: np.ndarray, s: np.ndarray) -> None:
        self.w, self.s = w, s  #: demand matrices, jobs x resources
        self.free_w = capacity[pools.worker].copy()  #: free capacity of the worker servers
        self.free_p = capacity[pools.ps].copy()  #: free capacity of the PS servers
        self.cur_w = self.cur_p = 0  #: round-robin cursors (positions in each pool)
        self.n = [0] * w.shape[0]  #: workers per job
        self.p = [0] * w.shape[0]  #: PS per job
        self.w_at = np.zeros((w.shape[0], pools.worker.size), dtype=np.int64)
        self.p_at = np.zeros((w.shape[0], pools.ps.size), dtype=np.int64)

    def one(self, i: int, ps_after: int) -> bool:
        """Give job ``i`` one worker (and a PS if it then needs ``ps_after > p``); fits?"""
        h = next_with_room(self.free_w, self.w[i], self.cur_w)
        if h is None:
            return False
        k = None
        if ps_after > self.p[i]:
            k = next_with_room(self.free_p, self.s[i], self.cur_p)
            if k is None:
                return False
            self.free_p[k] -= self.s[i]
            self.p_at[i, k] += 1
            self.cur_p = (k + 1) % self.free_p.shape[0]
            self.p[i] = ps_after
        self.free_w[h] -= self.w[i]
        self.w_at[i, h] += 1
        self.cur_w = (h + 1) % self.free_w.shape[0]
        self.n[i] += 1
        return True

    def many(self, i: int, ps_after: np.ndarray) -> int:
        """Give job ``i`` up to ``len(ps_after)`` workers one by one, stopping at the first
        that does not fit; after ``m`` of them it needs ``ps_after[m - 1]`` PS. Returns how
        many it got. Dealt in closed form: only this job places, each pool has its cursor."""
        w_room = room(self.free_w, self.w[i], ps_after.size)
        fit = min(ps_after.size, int(w_room.sum()))
        extra = ps_after[:fit] - self.p[i]
        p_room = room(self.free_p, self.s[i], int(extra[-1]) if fit else 0)
        fit = int(np.searchsorted(extra, p_room.sum(), side="right"))
        if fit == 0:
            return 0
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
        self.n[i] += fit
        return fit


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
        self._demands: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def reset(self) -> None:
        self._placed = self._batches = 0
        self._demands = {}

    def _arrays(self, jobs: list[Job]) -> tuple[np.ndarray, np.ndarray]:
        """Worker and PS demand matrices (J x R), cached per job."""
        self._demands = {j.job_id: self._demands.get(j.job_id) or self.demands(j) for j in jobs}
        return (np.array([self._demands[j.job_id][0] for j in jobs]),
                np.array([self._demands[j.job_id][1] for j in jobs]))

    def replan(self, view: View) -> dict[str, Alloc]:
        """Progressive filling from an empty cluster; see the module docstring."""
        statuses = list(view.active.values())
        if not statuses:
            return {}
        jobs = [st.job for st in statuses]
        w, s = self._arrays(jobs)
        ws, ss = _unit_shares(self.capacity, self.pools.worker, self.pools.ps, w, s, self.shares)
        ws_l, ss_l = ws.tolist(), ss.tolist()
        cap = [0 if j.ps_needed(1) > 1 else min(j.max_workers, max(1, ceil_eps(st.remaining)))
               for j, st in zip(jobs, statuses, strict=True)]
        fill = _Filling(self.capacity, self.pools, w, s)
        heap = [(0.0, i) for i in range(len(jobs)) if cap[i] > 0]
        while heap:
            _, i = heapq.heappop(heap)
            n_i, job = fill.n[i], jobs[i]
            nxt = share_key(n_i + 1, job.ps_needed(n_i + 1), ws_l[i], ss_l[i])
            if n_i + 1 >= cap[i] or (heap and (nxt, i) > heap[0]):
                # the usual case: one worker, then another job is due
                if fill.one(i, job.ps_needed(n_i + 1)):
                    self._placed += 1
                    if n_i + 1 < cap[i]:
                        heapq.heappush(heap, (nxt, i))
                continue  # a job whose next worker does not fit is frozen for this event
            # a batch: every increment while i stays before the next job in (share, arrival)
            ms = np.arange(n_i, cap[i])
            keys = share_keys(ms, _ps_needed(job.spec.ps_ratio, ms), ws[i], ss[i])
            due = np.ones(ms.size, dtype=bool)
            if heap:
                due = (keys < heap[0][0]) | ((keys == heap[0][0]) & (i < heap[0][1]))
            batch = int(ms.size if due.all() else np.argmin(due))
            got = fill.many(i, _ps_needed(job.spec.ps_ratio, ms[:batch] + 1))
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
