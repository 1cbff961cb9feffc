"""Round-robin placement of containers onto servers with room (``baselines.md``).

A re-planning policy decides *how many* workers and PS a job gets; this module decides
*where*: workers on worker servers, PS on PS servers, each pool dealt round-robin, one
container at a time, over the servers that still have room, starting at a cursor that carries
on from where the previous job stopped. Everything here is a pure function of a free-capacity
matrix (servers x resources, numpy), so a policy can try a placement, keep it or drop it.

The one-at-a-time deal is computed in closed form (:func:`deal`): after ``k`` full rounds a
server with room ``c`` holds ``min(c, k)``; the last, partial round goes to the next servers in
cyclic order. It is tested against the literal one-at-a-time loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from psched.core.model import Alloc, Cluster, Job, Pool

__all__ = [
    "FIT_TOL",
    "Cursor",
    "Placement",
    "Pools",
    "deal",
    "most_workers",
    "next_with_room",
    "place",
    "room",
    "usage_of",
]

#: Relative slack when testing whether a demand fits (float noise never refuses a container;
#: the checker allows ``1e-9 * max(1, capacity)`` over capacity).
FIT_TOL = 1e-9


@dataclass(frozen=True, kw_only=True)
class Pools:
    """Server indices of the two pools, in cluster order (precompute once per run)."""

    worker: np.ndarray  #: indices of the worker servers
    ps: np.ndarray  #: indices of the PS servers

    @staticmethod
    def of(cluster: Cluster) -> Pools:
        return Pools(worker=cluster.indices(Pool.WORKER), ps=cluster.indices(Pool.PS))


@dataclass(frozen=True, kw_only=True)
class Cursor:
    """Where the next round-robin deal starts, as a position within each pool."""

    worker: int = 0  #: position in ``Pools.worker`` of the next worker server to try
    ps: int = 0  #: position in ``Pools.ps`` of the next PS server to try


@dataclass(frozen=True, kw_only=True)
class Placement:
    """One job's placement and the state after it."""

    alloc: Alloc  #: where the job's workers and PS go
    cursor: Cursor  #: where the next deal starts
    free: np.ndarray  #: free capacity after placing (a new array)


def room(free: np.ndarray, demand: np.ndarray, limit: int) -> np.ndarray:
    """How many containers of ``demand`` each row of ``free`` still holds, capped at ``limit``.

    Parameters
    ----------
    free : ndarray, shape (S, R)
        Free capacity of S servers.
    demand : ndarray, shape (R,)
        One container's demand; resources it does not use (0) impose no limit.
    limit : int
        Cap on the answer (a container demanding nothing fits without bound).

    Returns
    -------
    ndarray of int, shape (S,)

    Notes
    -----
    O(S R).
    """
    ratio = _ratios(free, demand)
    if ratio is None:
        return np.full(free.shape[0], max(0, limit), dtype=np.int64)
    fit = np.floor(ratio + FIT_TOL)
    return np.clip(fit, 0, max(0, limit)).astype(np.int64)


def _ratios(free: np.ndarray, demand: np.ndarray) -> np.ndarray | None:
    """Per server, the least ``free / demand`` over the resources demanded; None if none is."""
    used = demand > 0
    if not used.any():
        return None
    ratio: np.ndarray = free / demand if used.all() else free[:, used] / demand[used]
    least: np.ndarray = ratio.min(axis=1)
    return least


def deal(capacity: np.ndarray, count: int, start: int = 0) -> tuple[np.ndarray, int] | None:
    """Deal ``count`` containers round-robin, one at a time, over servers with room.

    Parameters
    ----------
    capacity : ndarray of int, shape (S,)
        Containers each server can still take.
    count : int
        Containers to place (>= 0).
    start : int
        Position at which the deal starts (taken modulo S).

    Returns
    -------
    (counts, next_start) or None
        Containers per server and the position after the last server that received one;
        None if the servers cannot take ``count`` in all.

    Notes
    -----
    Equal to visiting servers ``start, start+1, ...`` cyclically, skipping full ones, and
    giving one container per visit. Closed form: find the number ``k`` of complete rounds by
    bisection, then give one more to the first ``count - sum(min(capacity, k))`` servers with
    ``capacity > k`` in cyclic order. O(S log count).
    """
    n = capacity.shape[0]
    if count <= 0:
        return np.zeros(n, dtype=np.int64), (start % n if n else 0)
    cap = np.minimum(capacity.astype(np.int64), count)
    if int(cap.sum()) < count:
        return None
    # largest k with sum(min(cap, k)) < count (k = 0 always qualifies)
    lo, hi = 0, int(cap.max())
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if int(np.minimum(cap, mid).sum()) < count:
            lo = mid
        else:
            hi = mid - 1
    counts = np.minimum(cap, lo)
    rest = count - int(counts.sum())
    order = np.roll(np.arange(n), -(start % n))
    takers = order[cap[order] > lo][:rest]
    counts[takers] += 1
    return counts, (int(takers[-1]) + 1) % n


def next_with_room(free: np.ndarray, demand: np.ndarray, start: int) -> int | None:
    """Position of the first server at or after ``start`` (cyclically) that fits ``demand``.

    The one-container step of a deal: equal to ``deal(room(free, demand, 1), 1, start)``.
    O(S R).
    """
    ratio = _ratios(free, demand)
    if ratio is None:
        return start % free.shape[0] if free.shape[0] else None
    ok = ratio + FIT_TOL >= 1.0  # exactly room(...) >= 1
    if not ok.any():
        return None
    start %= ok.size
    after = int(np.argmax(ok[start:])) + start
    return after if ok[after] else int(np.argmax(ok))


def usage_of(alloc: Alloc, worker_demand: np.ndarray, ps_demand: np.ndarray,
             n_servers: int) -> np.ndarray:
    """Usage matrix (servers x resources) of one job's allocation. O(S R)."""
    use = np.zeros((n_servers, worker_demand.shape[0]))
    for h, c in alloc.workers:
        use[h] += c * worker_demand
    for k, c in alloc.ps:
        use[k] += c * ps_demand
    return use


def place(
    free: np.ndarray,
    pools: Pools,
    *,
    worker_demand: np.ndarray,
    ps_demand: np.ndarray,
    workers: int,
    ps: int,
    cursor: Cursor | None = None,
) -> Placement | None:
    """Place ``workers`` workers and ``ps`` PS of one job round-robin, or None if they don't fit.

    Parameters
    ----------
    free : ndarray, shape (servers, R)
        Free capacity of every server of the cluster (not modified).
    pools : Pools
        Which servers are worker servers and which are PS servers.
    worker_demand, ps_demand : ndarray, shape (R,)
        One worker's and one PS's demand.
    workers, ps : int
        Counts to place (the caller checks the per-job rules).
    cursor : Cursor, optional
        Where each pool's deal starts (default: the first server of each pool).

    Returns
    -------
    Placement or None
        The allocation, the cursor after it and the free capacity after it; None when
        either pool cannot take its containers (nothing is placed then).

    Notes
    -----
    O(S R + S log(workers + ps)). Round-robin over servers with room is the placement of
    the FIFO, DRF and RRH baselines (``baselines.md``, Bao et al. INFOCOM 2018, section V).
    """
    cur = cursor or Cursor()
    w_room = room(free[pools.worker], worker_demand, workers)
    w = deal(w_room, workers, cur.worker) if pools.worker.size else None
    if w is None and workers > 0:
        return None
    p_room = room(free[pools.ps], ps_demand, ps)
    p = deal(p_room, ps, cur.ps) if pools.ps.size else None
    if p is None and ps > 0:
        return None
    w_counts, w_next = w if w is not None else (np.zeros(0, dtype=np.int64), cur.worker)
    p_counts, p_next = p if p is not None else (np.zeros(0, dtype=np.int64), cur.ps)
    alloc = Alloc.of(
        {int(pools.worker[i]): int(c) for i, c in enumerate(w_counts) if c},
        {int(pools.ps[i]): int(c) for i, c in enumerate(p_counts) if c},
    )
    after = free.copy()
    after[pools.worker] -= w_counts[:, None] * worker_demand if w_counts.size else 0.0
    after[pools.ps] -= p_counts[:, None] * ps_demand if p_counts.size else 0.0
    return Placement(alloc=alloc, cursor=Cursor(worker=w_next, ps=p_next), free=after)


def most_workers(free: np.ndarray, pools: Pools, job: Job, limit: int) -> int:
    """Largest worker count ``n <= limit`` whose workers and PS (``job.ps_needed(n)``) fit.

    Round-robin fits ``n`` containers exactly when the servers' room sums to ``n``, so this
    is a count, not a search over placements. Returns 0 when not even one worker fits, or
    when the job's PS rule cannot be met (``ps_needed(n) > n``). O(S R + log limit).
    """
    limit = min(limit, job.max_workers)
    if limit <= 0:
        return 0
    spec = job.spec
    w_total = int(room(free[pools.worker], spec.worker_demand.as_array(), limit).sum())
    ps_cap = job.ps_needed(limit)
    p_total = int(room(free[pools.ps], spec.ps_demand.as_array(), ps_cap).sum())
    lo, hi = 0, min(limit, w_total)
    # ps_needed is non-decreasing: bisect the largest n with ps_needed(n) <= min(n, p_total)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        need = job.ps_needed(mid)
        if need <= p_total and need <= mid:
            lo = mid
        else:
            hi = mid - 1
    return lo
