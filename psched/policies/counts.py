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

from psched.core.model import Alloc, Job, ceil_eps
from psched.core.placement import FIT_TOL, Cursor, Pools, deal, room

__all__ = ["Builder", "JobFacts", "none_fits", "pool_totals", "ps_for", "realise", "work_cap"]


def work_cap(job: Job, remaining: float) -> int:
    """Most useful workers in a slot: ``min(N, ceil(remaining))`` (0 if the PS rule fails)."""
    if job.ps_needed(1) > 1:
        return 0
    return max(0, min(job.max_workers, ceil_eps(remaining)))


def pool_totals(capacity: np.ndarray, pools: Pools) -> tuple[np.ndarray, np.ndarray]:
    """Total capacity per resource of the worker pool and of the PS pool (R each)."""
    return capacity[pools.worker].sum(axis=0), capacity[pools.ps].sum(axis=0)


class JobFacts:
    """Per-job constants the placement steps read again and again (demand arrays, PS ratio).

    A policy keeps one for a run (jobs by id), so no step rebuilds a demand array. O(1) per
    lookup after the first.
    """

    def __init__(self) -> None:
        self._facts: dict[str, tuple[np.ndarray, np.ndarray, float, int]] = {}
        self._used: dict[str, tuple[list[tuple[int, float]], list[tuple[int, float]]]] = {}
        self._kinds: dict[tuple[tuple[float, ...], tuple[float, ...], int], int] = {}

    def of(self, job: Job) -> tuple[np.ndarray, np.ndarray, float, int]:
        """(one worker's demand, one PS's demand, b/B, N) of ``job``."""
        f = self._facts.get(job.job_id)
        if f is None:
            spec = job.spec
            f = (spec.worker_demand.as_array(), spec.ps_demand.as_array(), spec.ps_ratio,
                 spec.max_workers)
            self._facts[job.job_id] = f
            self._used[job.job_id] = (
                [(r, float(v)) for r, v in enumerate(f[0].tolist()) if v > 0],
                [(r, float(v)) for r, v in enumerate(f[1].tolist()) if v > 0])
        return f

    def used(self, job: Job) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """(resource, amount) pairs a worker and a PS of ``job`` demand (amount > 0)."""
        if job.job_id not in self._used:
            self.of(job)
        return self._used[job.job_id]

    def kind(self, job: Job) -> int:
        """A small integer shared by the jobs whose first worker (with the PS it needs) is the
        same request: one worker's and one PS's demand and ``ps_needed(1)``. Whether a job can
        get its first worker from a :class:`Builder` depends on nothing else. O(R)."""
        w, s, ratio, _ = self.of(job)
        key = (tuple(w.tolist()), tuple(s.tolist()), ps_for(ratio, 1))
        k = self._kinds.get(key)
        if k is None:
            k = self._kinds[key] = len(self._kinds)
        return k

    def forget(self, job_ids: Iterable[str]) -> None:
        """Drop finished jobs."""
        for j in job_ids:
            self._facts.pop(j, None)
            self._used.pop(j, None)


def ps_for(ratio: float, workers: int) -> int:
    """``Job.ps_needed`` from the cached ratio (the same ceiling)."""
    return ceil_eps(ratio * workers) if workers > 0 else 0


def none_fits(top: list[float], used: list[tuple[int, float]]) -> bool:
    """True when no server can take one container: some demanded resource exceeds the most
    any server has free (``top``), by the test :func:`psched.core.placement.room` makes
    (``free / demand + tol >= 1``; float division is monotone, so the most free decides)."""
    return any(top[r] / v + FIT_TOL < 1.0 for r, v in used)


def _deal(cap: np.ndarray, count: int, start: int) -> tuple[np.ndarray, int] | None:
    """:func:`psched.core.placement.deal`, with the one-container case done directly."""
    if count != 1 or cap.size == 0:
        return deal(cap, count, start)
    ok = np.flatnonzero(cap > 0)
    if ok.size == 0:
        return None
    start %= cap.size
    i = int(np.searchsorted(ok, start))
    h = int(ok[i]) if i < ok.size else int(ok[0])
    out = np.zeros(cap.size, dtype=np.int64)
    out[h] = 1
    return out, (h + 1) % cap.size


class Builder:
    """Free capacity and per-job container maps while one slot's plan is built.

    Parameters
    ----------
    capacity : ndarray, shape (servers, R)
        Capacity of every server.
    pools : Pools
        Server indices of each pool.
    facts : JobFacts, optional
        The policy's per-job cache (a fresh one if omitted).

    Notes
    -----
    The same placements as dealing round-robin with :func:`psched.core.placement.place` (tested
    against the frozen old implementation), faster: each pool's free capacity is its own
    matrix, a job that cannot take even one container is answered from the most any server
    has free per resource (O(R), no scan of the servers), and one-container deals skip the
    bisection. Otherwise every operation is O(S R + S log n) for S servers and an increment
    of n containers.
    """

    def __init__(self, capacity: np.ndarray, pools: Pools, facts: JobFacts | None = None) -> None:
        self.pools = pools  #: server indices per pool
        self.facts = facts or JobFacts()
        self._fw = capacity[pools.worker].astype(float)  # free capacity, worker servers
        self._fp = capacity[pools.ps].astype(float)  # free capacity, PS servers
        self._top_w: list[float] | None = None  # most free per resource, None = stale
        self._top_p: list[float] | None = None
        self.cursor = Cursor()  #: where the next round-robin deal starts
        self._w: dict[str, dict[int, int]] = {}  #: job -> {worker server: count}
        self._p: dict[str, dict[int, int]] = {}  #: job -> {PS server: count}
        self._nw: dict[str, int] = {}
        self._np: dict[str, int] = {}
        #: kinds (:meth:`JobFacts.kind`) that cannot get a first worker any more: free capacity
        #: only shrinks while a plan is built, so :meth:`grow` of a job with no workers yet, to
        #: any target >= 1, gives 0 for every job of such a kind (the caller records them)
        self.dead: set[int] = set()
        self._pos: tuple[dict[int, int], dict[int, int]] | None = None  # server -> position

    @property
    def free(self) -> np.ndarray:
        """Free capacity of every server (servers x R), a new array."""
        n = self.pools.worker.size + self.pools.ps.size
        out = np.zeros((n, self._fw.shape[1] if self._fw.size else self._fp.shape[1]))
        out[self.pools.worker] = self._fw
        out[self.pools.ps] = self._fp
        return out

    def workers(self, job_id: str) -> int:
        """Workers placed for ``job_id`` so far."""
        return self._nw.get(job_id, 0)

    def ps(self, job_id: str) -> int:
        """PS placed for ``job_id`` so far."""
        return self._np.get(job_id, 0)

    def _tops(self) -> tuple[list[float], list[float]]:
        if self._top_w is None:
            self._top_w = (self._fw.max(axis=0).tolist() if self._fw.shape[0]
                           else [0.0] * self._fw.shape[1])
        if self._top_p is None:
            self._top_p = (self._fp.max(axis=0).tolist() if self._fp.shape[0]
                           else [0.0] * self._fp.shape[1])
        return self._top_w, self._top_p

    def keep(self, job: Job, alloc: Alloc, workers: int | None = None) -> None:
        """Keep ``alloc`` (cut to its first ``workers`` workers and the PS they need)."""
        n = alloc.n_workers if workers is None else min(workers, alloc.n_workers)
        if n <= 0:
            return
        w, s, ratio, _ = self.facts.of(job)
        if self._pos is None:
            self._pos = ({int(h): i for i, h in enumerate(self.pools.worker)},
                         {int(k): i for i, k in enumerate(self.pools.ps)})
        pos_w, pos_p = self._pos
        j = job.job_id
        wmap, pmap = self._w.setdefault(j, {}), self._p.setdefault(j, {})
        for pairs, want, dem, out, free, pos, counter in (
                (alloc.workers, n, w, wmap, self._fw, pos_w, self._nw),
                (alloc.ps, ps_for(ratio, n), s, pmap, self._fp, pos_p, self._np)):
            for h, c in pairs:
                take = min(c, want)
                if take <= 0:
                    break
                out[h] = out.get(h, 0) + take
                counter[j] = counter.get(j, 0) + take
                free[pos[h]] -= take * dem
                want -= take
        self._top_w = self._top_p = None

    def _fit(self, job: Job, limit: int) -> tuple[int, np.ndarray | None, np.ndarray | None]:
        """Largest increment ``k <= limit`` of workers (with their extra PS) that fits now,
        and the rooms it was computed from (None when ``k`` is 0)."""
        if limit <= 0:
            return 0, None, None
        w, s, ratio, _ = self.facts.of(job)
        n0, p0 = self.workers(job.job_id), self.ps(job.job_id)
        top_w, top_p = self._tops()
        used_w, used_p = self.facts.used(job)
        if self._fw.shape[0] == 0 or none_fits(top_w, used_w):
            return 0, None, None
        extra_one = max(0, ps_for(ratio, n0 + 1) - p0)
        if extra_one > 0 and (self._fp.shape[0] == 0 or none_fits(top_p, used_p)):
            return 0, None, None
        w_room = room(self._fw, w, limit)
        w_total = int(w_room.sum())
        extra_max = max(0, ps_for(ratio, n0 + limit) - p0)
        p_room = room(self._fp, s, extra_max)
        p_total = int(p_room.sum())
        lo, hi = 0, min(limit, w_total)
        while lo < hi:  # extra PS is non-decreasing in k
            mid = (lo + hi + 1) // 2
            if max(0, ps_for(ratio, n0 + mid) - p0) <= p_total:
                lo = mid
            else:
                hi = mid - 1
        return lo, w_room, p_room

    def _place(self, job: Job, workers: int, ps: int, w_room: np.ndarray | None,
               p_room: np.ndarray | None) -> bool:
        """Deal ``workers`` and ``ps`` containers (rooms as computed, or fresh); placed?"""
        w, s, _, _ = self.facts.of(job)
        pools = self.pools
        if pools.worker.size:
            if w_room is None:
                w_room = room(self._fw, w, workers)
            dw = _deal(w_room, workers, self.cursor.worker)
        else:
            dw = None
        if dw is None and workers > 0:
            return False
        if pools.ps.size:
            if p_room is None:
                p_room = room(self._fp, s, ps)
            dp = _deal(p_room, ps, self.cursor.ps)
        else:
            dp = None
        if dp is None and ps > 0:
            return False
        j = job.job_id
        cur_w, cur_p = self.cursor.worker, self.cursor.ps
        if dw is not None:
            counts, cur_w = dw
            hit = np.flatnonzero(counts)
            if hit.size:
                self._fw[hit] -= counts[hit][:, None] * w
                wmap = self._w.setdefault(j, {})
                for i in hit.tolist():
                    h = int(pools.worker[i])
                    wmap[h] = wmap.get(h, 0) + int(counts[i])
                self._nw[j] = self._nw.get(j, 0) + workers
        if dp is not None:
            counts, cur_p = dp
            hit = np.flatnonzero(counts)
            if hit.size:
                self._fp[hit] -= counts[hit][:, None] * s
                pmap = self._p.setdefault(j, {})
                for i in hit.tolist():
                    k = int(pools.ps[i])
                    pmap[k] = pmap.get(k, 0) + int(counts[i])
                self._np[j] = self._np.get(j, 0) + ps
        self._w.setdefault(j, {})
        self._p.setdefault(j, {})
        self.cursor = Cursor(worker=cur_w, ps=cur_p)
        self._top_w = self._top_p = None
        return True

    def add(self, job: Job, workers: int, ps: int) -> bool:
        """Place ``workers`` more workers and ``ps`` more PS, all or nothing; placed?"""
        if workers <= 0 and ps <= 0:
            return True
        top_w, top_p = self._tops()
        used_w, used_p = self.facts.used(job)
        if (workers > 0 and (self._fw.shape[0] == 0 or none_fits(top_w, used_w))) or (
                ps > 0 and (self._fp.shape[0] == 0 or none_fits(top_p, used_p))):
            return False
        return self._place(job, workers, ps, None, None)

    def grow(self, job: Job, target: int) -> int:
        """Bring ``job`` towards ``target`` workers (PS by the ratio); returns its new count."""
        _, _, ratio, n_max = self.facts.of(job)
        n0 = self.workers(job.job_id)
        k, w_room, p_room = self._fit(job, min(target, n_max) - n0)
        if k > 0:
            extra = max(0, ps_for(ratio, n0 + k) - self.ps(job.job_id))
            ok = self._place(job, k, extra, w_room, p_room)
            assert ok, "room sums promised a fit"
        return n0 + k

    def allocs(self) -> dict[str, Alloc]:
        """Every job with at least one worker, as :class:`~psched.core.model.Alloc`."""
        return {j: Alloc.of(w, self._p.get(j, {})) for j, w in self._w.items()
                if self._nw.get(j, 0)}


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
