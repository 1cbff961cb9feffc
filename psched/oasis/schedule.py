"""Slot costs by greedy placement (Theorem 1), and schedules built from worker counts.

In slot ``t`` a job with ``n`` workers pays the ``n`` cheapest worker units -- servers sorted
by unit price ``sum_r p_h^r(t) w~^r``, each taking up to its residual capacity
``min_r floor((c_h^r - g_h^r(t)) / w^r)`` -- plus the ``ceil(b/B n)`` cheapest PS units the same
way (paper section 4, Theorem 1; ``oasis.md`` section 7). More PS than that never helps
(prices are non-negative). Worker cost is convex in ``n``; the PS term steps every ``B/b``
workers, so the slot cost is not.

The tie rule
------------
Every best-schedule search (:mod:`~psched.oasis.fast`, :mod:`~psched.oasis.literal`,
:mod:`~psched.oasis.brute`) returns the *same* schedule, not only the same payoff:

1. the highest payoff ``f(d) - cost``; among payoffs equal up to :data:`TIE_RTOL`
   (:func:`beats`), the **earliest completion slot**;
2. among the schedules completing there at the least cost (up to :data:`ARG_RTOL`), the
   **most workers in the completion slot**, then the most in the slot before it, and so on
   back to the arrival: the reverse-lexicographically greatest vector of workers per slot.

Rule 2 is what the recursion ``cost(t, D) = min_d c_t(d) + cost(t - 1, D - d)`` yields when
each step keeps the largest minimising ``d`` (:func:`last_argmin`) and the schedule is read
back from the completion slot. Both tolerances are far above float noise (a change of units
or of the utility scale) and far below any real price difference, so noise never flips a
decision. Placement within a slot is the stable greedy of :func:`place` (cheapest server
first, the lower server index among equal prices).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from psched.core.model import EPS, Alloc
from psched.oasis.ledger import JobInputs, PoolInputs

__all__ = [
    "ARG_RTOL",
    "TIE_RTOL",
    "Best",
    "PlacementTables",
    "beats",
    "greedy_costs",
    "last_argmin",
    "place",
    "placement_tables",
    "schedule_allocs",
    "schedule_cost",
    "slot_costs",
    "unit_caps",
    "unit_prices",
]


#: A later completion slot must beat the best payoff so far by this relative margin to replace
#: it: among payoffs equal up to float noise the earliest completion wins, so that rounding
#: (a change of units or of the utility scale) never flips a decision between near-ties.
TIE_RTOL = 1e-9

#: Relative tolerance of a tie between two ways of reaching the same work in the recursion
#: (rule 2 of the tie rule): values within it of the minimum count as minimal.
ARG_RTOL = 1e-12


def beats(payoff: float, best: float) -> bool:
    """``payoff`` improves on ``best`` by more than the tie tolerance."""
    if not math.isfinite(best):
        return payoff > best
    return payoff > best + TIE_RTOL * abs(best)


def last_argmin(vals: np.ndarray) -> int:
    """The largest index whose value is within :data:`ARG_RTOL` of the minimum of ``vals``.

    The per-step choice of the tie rule's rule 2 (most workers in the later slot); index 0
    when every value is ``inf``. The vectorised twin is :func:`psched.oasis.fast.minplus_step`.
    """
    low = float(np.min(vals))
    if not math.isfinite(low):
        return 0
    return int(np.flatnonzero(vals <= low + ARG_RTOL * low)[-1])


@dataclass(frozen=True, kw_only=True)
class Best:
    """Result of a best-schedule search: payoff and workers per window slot."""

    payoff: float  #: best ``f(d) - cost`` in cost units, or the floor if nothing beat it
    counts: np.ndarray | None  #: (Tw,) workers per window slot; None if nothing beat the floor

    @property
    def completion(self) -> int | None:
        """Index in the window of the last slot with workers."""
        if self.counts is None:
            return None
        return int(np.nonzero(self.counts)[0][-1])


def unit_prices(pool: PoolInputs) -> np.ndarray:
    """``sum_r p_h^r(t) w~^r`` per window slot and server, (Tw, H)."""
    return np.asarray(pool.price @ pool.norm)


def unit_caps(pool: PoolInputs, limit: int) -> np.ndarray:
    """Containers that still fit per window slot and server, ``min_r floor(resid / w)``.

    Only resources the container demands count; the result is clipped to ``[0, limit]``.
    """
    dem = pool.demand
    used = dem > 0
    if not used.any():
        return np.full(pool.resid.shape[:2], limit, dtype=np.int64)
    fit = np.floor(pool.resid[..., used] / dem[used] + EPS).min(axis=-1)
    return np.asarray(np.clip(fit, 0, limit).astype(np.int64))


def greedy_costs(unit: np.ndarray, caps: np.ndarray, n_max: int) -> np.ndarray:
    """Cost of the ``n`` cheapest units per row, ``n = 0..n_max``; ``inf`` beyond capacity.

    ``unit`` and ``caps`` are (T, H). Complexity O(T H log H + T n_max log H).
    """
    n_rows, n_srv = unit.shape
    order = np.argsort(unit, axis=1, kind="stable")
    u_s = np.take_along_axis(unit, order, axis=1)
    k_s = np.take_along_axis(caps, order, axis=1)
    cum = np.cumsum(k_s, axis=1)  # (T, H)
    out = np.zeros((n_rows, n_max + 1))
    if n_max == 0 or n_srv == 0:
        out[:, 1:] = np.inf
        return out
    big = int(n_max) + 1
    off = np.arange(n_rows)[:, None] * big
    flat = (np.minimum(cum, n_max) + off).ravel()
    j = np.arange(1, n_max + 1)
    pos = np.searchsorted(flat, (j[None, :] + off).ravel(), side="left").reshape(n_rows, n_max)
    pos -= np.arange(n_rows)[:, None] * n_srv
    ok = (pos < n_srv) & (cum[:, -1:] >= j[None, :])
    marg = np.where(ok, np.take_along_axis(u_s, np.minimum(pos, n_srv - 1), axis=1), np.inf)
    out[:, 1:] = np.cumsum(marg, axis=1)
    return out


@dataclass(frozen=True, kw_only=True)
class PlacementTables:
    """Unit prices and container capacities of both pools over a job's window."""

    unit: tuple[np.ndarray, np.ndarray]  #: (Tw, H) and (Tw, K) unit prices
    caps: tuple[np.ndarray, np.ndarray]  #: (Tw, H) and (Tw, K) containers that fit


def _rows(pool: PoolInputs, starts: np.ndarray) -> PoolInputs:
    """``pool`` restricted to the window slots ``starts`` (one slot per run)."""
    return PoolInputs(servers=pool.servers, price=pool.price[starts],
                      resid=pool.resid[starts], demand=pool.demand, norm=pool.norm)


def placement_tables(inp: JobInputs) -> PlacementTables:
    """Unit prices and capacities per slot and server, workers then PS.

    Computed once per run of identical slots (:meth:`JobInputs.run_index`) and copied along
    the run. Complexity O(U (H + K) R + Tw (H + K)) for U runs.
    """
    starts, row_of = inp.run_index()
    w, p = _rows(inp.workers, starts), _rows(inp.ps, starts)
    return PlacementTables(
        unit=(unit_prices(w)[row_of], unit_prices(p)[row_of]),
        caps=(unit_caps(w, inp.job.max_workers)[row_of],
              unit_caps(p, int(inp.ps_needed[-1]))[row_of]))


def slot_costs(inp: JobInputs, tables: PlacementTables | None = None) -> np.ndarray:
    """Cost of ``n = 0..N`` workers (and their PS) in every window slot, (Tw, N+1).

    Computed once per run of identical slots and copied along the run. Complexity
    O(U (H + K) R + U N log(H + K) + Tw N) for U runs.
    """
    tab = tables or placement_tables(inp)
    starts, row_of = inp.run_index()
    wc = greedy_costs(tab.unit[0][starts], tab.caps[0][starts], inp.job.max_workers)
    pc = greedy_costs(tab.unit[1][starts], tab.caps[1][starts], int(inp.ps_needed[-1]))
    return np.asarray((wc + pc[:, inp.ps_needed])[row_of])


def place(unit: np.ndarray, caps: np.ndarray, n: int) -> list[tuple[int, int]]:
    """Greedy placement of ``n`` containers: cheapest servers first, (position, count) pairs.

    Raises ``ValueError`` if they do not fit.
    """
    out: list[tuple[int, int]] = []
    left = n
    for h in np.argsort(unit, kind="stable"):
        if left == 0:
            break
        take = int(min(left, caps[h]))
        if take > 0:
            out.append((int(h), take))
            left -= take
    if left:
        raise ValueError(f"{n} containers do not fit")
    return out


def schedule_allocs(inp: JobInputs, counts: np.ndarray,
                    tables: PlacementTables | None = None) -> dict[int, Alloc]:
    """The allocation per absolute slot for ``counts`` workers per window slot (sparse)."""
    tab = tables or placement_tables(inp)
    out: dict[int, Alloc] = {}
    for i in np.nonzero(counts)[0]:
        n = int(counts[i])
        allocs = []
        for p, pool, k in ((0, inp.workers, n), (1, inp.ps, int(inp.ps_needed[n]))):
            pairs = place(tab.unit[p][i], tab.caps[p][i], k)
            allocs.append({int(pool.servers[h]): c for h, c in pairs})
        out[inp.start + int(i)] = Alloc.of(allocs[0], allocs[1])
    return out


def schedule_cost(inp: JobInputs, schedule: dict[int, Alloc]) -> tuple[float, float]:
    """Independently price and check a schedule; return (utility, cost) in cost units.

    Checks the window, ``sum workers == W``, ``workers <= N``, ``ceil(b/B n) <= PS <= n``,
    pools, and that every server's residual capacity holds. Raises ``ValueError`` otherwise.
    """
    job = inp.job
    cost = 0.0
    total = 0
    last = -1
    for t, alloc in sorted(schedule.items()):
        i = t - inp.start
        if not 0 <= i < inp.n_slots:
            raise ValueError(f"slot {t} outside the window")
        n, k = alloc.n_workers, alloc.n_ps
        if n > job.max_workers or k > n or k < job.ps_needed(n):
            raise ValueError(f"slot {t}: {n} workers with {k} PS breaks the job's rules")
        for pool, pairs in ((inp.workers, alloc.workers), (inp.ps, alloc.ps)):
            pos = {int(s): j for j, s in enumerate(pool.servers)}
            for srv, c in pairs:
                if srv not in pos:
                    raise ValueError(f"slot {t}: server {srv} is not in the pool")
                j = pos[srv]
                if np.any(c * pool.demand > pool.resid[i, j] + 1e-9 * np.maximum(
                        1.0, np.abs(pool.resid[i, j]))):
                    raise ValueError(f"slot {t}: server {srv} over capacity")
                cost += c * float(np.dot(pool.price[i, j], pool.norm))
        total += n
        if n > 0:
            last = i
    if total != job.work:
        raise ValueError(f"schedule does {total} worker-slots, job needs {job.work}")
    return float(inp.util[last]), cost
