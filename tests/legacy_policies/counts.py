"""From worker counts to placements: the shared last step of the count-based rivals.

SRTF, RRH, Dorm, Optimus, the elastic MIP allocator and its greedy baselines decide *how many*
workers each job gets; :class:`Builder` turns that into per-server allocations with the one
round-robin placement of the project (:func:`psched.core.placement.place`), against the free
capacity left by the jobs already built. Nothing here chooses counts.

* :meth:`Builder.keep` keeps (a prefix of) a job's previous placement: a job whose count does
  not change, or shrinks, does not move (elastic scaling keeps its running containers);
* :meth:`Builder.grow` adds workers (and the PS they then need) up to a target, or as many as
  fit: round-robin fits ``k`` containers exactly when the servers' room sums to ``k``, so the
  largest fitting increment is found by bisection on room sums, then dealt;
* :meth:`Builder.add` places a fixed request all-or-nothing.

:func:`realise` applies a whole count vector: shrinking/keeping first, then growing, in a given
order (the order decides who loses if fragmentation leaves less than the pool totals promised).

Also here: :func:`pool_totals` (the aggregate capacity the count models plan against) and
:func:`work_cap` (``min(N, ceil(remaining))``: more workers than the work left in a slot finish
nothing sooner, so every rival is capped there -- the strongest choice).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from legacy_policies.placement import Cursor, Pools, place, room
from psched.core.model import Alloc, Job, ceil_eps

__all__ = ["Builder", "pool_totals", "realise", "work_cap"]


def work_cap(job: Job, remaining: float) -> int:
    """Most useful workers in a slot: ``min(N, ceil(remaining))`` (0 if the PS rule fails)."""
    if job.ps_needed(1) > 1:
        return 0
    return max(0, min(job.max_workers, ceil_eps(remaining)))


def pool_totals(capacity: np.ndarray, pools: Pools) -> tuple[np.ndarray, np.ndarray]:
    """Total capacity per resource of the worker pool and of the PS pool (R each)."""
    return capacity[pools.worker].sum(axis=0), capacity[pools.ps].sum(axis=0)


class Builder:
    """Free capacity and per-job container maps while one slot's plan is built.

    Parameters
    ----------
    capacity : ndarray, shape (servers, R)
        Capacity of every server.
    pools : Pools
        Server indices of each pool.

    Notes
    -----
    Every operation is O(S R + S log n) for S servers and an increment of n containers.
    """

    def __init__(self, capacity: np.ndarray, pools: Pools) -> None:
        self.free = capacity.astype(float).copy()  #: free capacity (servers x R)
        self.pools = pools  #: server indices per pool
        self.cursor = Cursor()  #: where the next round-robin deal starts
        self._w: dict[str, dict[int, int]] = {}  #: job -> {worker server: count}
        self._p: dict[str, dict[int, int]] = {}  #: job -> {PS server: count}

    def workers(self, job_id: str) -> int:
        """Workers placed for ``job_id`` so far."""
        return sum(self._w.get(job_id, {}).values())

    def ps(self, job_id: str) -> int:
        """PS placed for ``job_id`` so far."""
        return sum(self._p.get(job_id, {}).values())

    def keep(self, job: Job, alloc: Alloc, workers: int | None = None) -> None:
        """Keep ``alloc`` (cut to its first ``workers`` workers and the PS they need)."""
        n = alloc.n_workers if workers is None else min(workers, alloc.n_workers)
        if n <= 0:
            return
        w, s = job.spec.worker_demand.as_array(), job.spec.ps_demand.as_array()
        wmap, pmap = self._w.setdefault(job.job_id, {}), self._p.setdefault(job.job_id, {})
        for pairs, want, dem, out in ((alloc.workers, n, w, wmap),
                                      (alloc.ps, job.ps_needed(n), s, pmap)):
            for h, c in pairs:
                take = min(c, want)
                if take <= 0:
                    break
                out[h] = out.get(h, 0) + take
                self.free[h] -= take * dem
                want -= take

    def _fit(self, job: Job, limit: int) -> int:
        """Largest increment ``k <= limit`` of workers (with their extra PS) that fits now."""
        if limit <= 0:
            return 0
        n0, p0 = self.workers(job.job_id), self.ps(job.job_id)
        w, s = job.spec.worker_demand.as_array(), job.spec.ps_demand.as_array()
        w_total = int(room(self.free[self.pools.worker], w, limit).sum())
        extra_max = max(0, job.ps_needed(n0 + limit) - p0)
        p_total = int(room(self.free[self.pools.ps], s, extra_max).sum())
        lo, hi = 0, min(limit, w_total)
        while lo < hi:  # extra PS is non-decreasing in k
            mid = (lo + hi + 1) // 2
            if max(0, job.ps_needed(n0 + mid) - p0) <= p_total:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def add(self, job: Job, workers: int, ps: int) -> bool:
        """Place ``workers`` more workers and ``ps`` more PS, all or nothing; placed?"""
        if workers <= 0 and ps <= 0:
            return True
        w, s = job.spec.worker_demand.as_array(), job.spec.ps_demand.as_array()
        placed = place(self.free, self.pools, worker_demand=w, ps_demand=s, workers=workers,
                       ps=ps, cursor=self.cursor)
        if placed is None:
            return False
        self.free, self.cursor = placed.free, placed.cursor
        wmap, pmap = self._w.setdefault(job.job_id, {}), self._p.setdefault(job.job_id, {})
        for h, c in placed.alloc.workers:
            wmap[h] = wmap.get(h, 0) + c
        for k, c in placed.alloc.ps:
            pmap[k] = pmap.get(k, 0) + c
        return True

    def grow(self, job: Job, target: int) -> int:
        """Bring ``job`` towards ``target`` workers (PS by the ratio); returns its new count."""
        n0 = self.workers(job.job_id)
        k = self._fit(job, min(target, job.max_workers) - n0)
        if k > 0:
            extra = max(0, job.ps_needed(n0 + k) - self.ps(job.job_id))
            ok = self.add(job, k, extra)
            assert ok, "room sums promised a fit"
        return n0 + k

    def allocs(self) -> dict[str, Alloc]:
        """Every job with at least one worker, as :class:`~psched.core.model.Alloc`."""
        return {j: Alloc.of(w, self._p.get(j, {})) for j, w in self._w.items() if sum(w.values())}


def realise(builder: Builder, jobs: Mapping[str, Job], counts: Mapping[str, int],
            previous: Mapping[str, Alloc], order: Iterable[str]) -> dict[str, Alloc]:
    """Place ``counts`` without moving what can stay: keep, then grow, in ``order``.

    A job with a previous allocation keeps its first ``min(old, new)`` workers where they are;
    then every job grows to its count in ``order``, getting fewer if the servers (as opposed to
    the pool totals) have no room. Returns the allocations. O(J (S R + S log N)).
    """
    order = [j for j in order if counts.get(j, 0) > 0]
    for j in order:
        if j in previous:
            builder.keep(jobs[j], previous[j], counts[j])
    for j in order:
        builder.grow(jobs[j], counts[j])
    return builder.allocs()
