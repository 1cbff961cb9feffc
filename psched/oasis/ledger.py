"""Committed usage per server, resource and slot, and the priced inputs of an arriving job.

The ledger holds ``g_h^r(t)`` and ``v_k^r(t)`` of the paper (usage committed by admitted
jobs) as two dense arrays, slots x servers x resources, one per pool: memory grows with the
horizon and the cluster, never with the number of jobs. Prices are derived from it on demand
(:func:`psched.oasis.prices.log_prices`) for the slots of one job's window only.

Runs of identical slots. Consecutive slots with the same committed usage in both pools have
the same prices and residual capacities, hence the same slot costs; over a long window (a
time-insensitive job may search to the horizon) most slots form a few such runs, typically the
untouched future. :meth:`Ledger.inputs` prices one slot per run and copies it along the run
(bit-identical to pricing every slot), and records the runs in :attr:`JobInputs.runs` so that
the placement tables and slot costs are computed once per run too
(:func:`psched.oasis.schedule.placement_tables`). Finding the runs reads the usage once.
A subclass that prices from other usage overrides :meth:`Ledger.price_usage` (runs then
follow both arrays); one that overrides :meth:`Ledger.scaled_prices` instead is priced slot
by slot through it, with no runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from psched.core.model import RESOURCES, Alloc, Cluster, Job
from psched.oasis.prices import (
    POOLS,
    PriceParams,
    log_prices,
    log_utility,
    mean_capacity,
    normalise,
)

__all__ = ["JobInputs", "Ledger", "PoolInputs"]


@dataclass(frozen=True, kw_only=True)
class PoolInputs:
    """One pool as an arriving job sees it over its window."""

    servers: np.ndarray  #: (H,) cluster index of every server of the pool
    price: np.ndarray  #: (Tw, H, R) prices in cost units (``p / exp(log_scale)``)
    resid: np.ndarray  #: (Tw, H, R) residual capacity ``c - g`` (raw units)
    demand: np.ndarray  #: (R,) one container's demand (raw units)
    norm: np.ndarray  #: (R,) one container's normalised demand ``w / c_bar``


@dataclass(frozen=True, kw_only=True)
class JobInputs:
    """Everything the best-schedule search needs for one job (paper Alg. 2)."""

    job: Job  #: the job
    start: int  #: first slot of the window (the arrival slot)
    util: np.ndarray  #: (Tw,) ``f(i + 1)`` in cost units, for completion in slot start + i
    workers: PoolInputs  #: worker pool
    ps: PoolInputs  #: PS pool
    ps_needed: np.ndarray  #: (N+1,) fewest PS for n workers, ``ceil(b/B n)``
    #: window index of the first slot of each run of identical slots (same usage in both
    #: pools, hence same prices, residuals and slot costs), ascending from 0; None: unknown
    #: (every slot is treated as its own run)
    runs: np.ndarray | None = None

    @property
    def n_slots(self) -> int:
        """Tw, the window length in slots."""
        return int(self.util.shape[0])

    def run_index(self) -> tuple[np.ndarray, np.ndarray]:
        """``(starts, row_of)``: the first window slot of every run, and each slot's run.

        Arrays computed on the slots ``starts`` expand to the whole window by ``[row_of]``.
        """
        n = self.n_slots
        if self.runs is None:
            idx = np.arange(n)
            return idx, idx
        starts = np.asarray(self.runs, dtype=np.intp)
        lengths = np.diff(np.append(starts, n))
        return starts, np.repeat(np.arange(starts.size), lengths)


class Ledger:
    """Usage committed per pool, slot, server and resource; prices follow from it."""

    def __init__(self, cluster: Cluster, horizon: int, params: PriceParams) -> None:
        self.params = params
        self.horizon = horizon
        self._index(cluster)
        self.usage = tuple(np.zeros((horizon, idx.size, len(RESOURCES)))
                           for idx in self.servers)

    def _index(self, cluster: Cluster) -> None:
        """What follows from the servers alone: per-pool indices, capacities, mean
        capacities (demand normalisation) and each server's position in its pool."""
        cap = cluster.capacity
        self.servers = tuple(cluster.indices(p) for p in POOLS)
        self.capacity = tuple(cap[idx] for idx in self.servers)
        self.cbar = tuple(mean_capacity(cluster, p) for p in POOLS)
        self._pos = np.full(len(cluster.servers), -1, dtype=int)
        for idx in self.servers:
            self._pos[idx] = np.arange(idx.size)

    def grow(self, cluster: Cluster) -> None:
        """Servers joined: ``cluster`` is the old one with servers appended. Their usage
        starts at zero; the mean capacities (demand normalisation) are recomputed. O(T H R)."""
        servers = tuple(cluster.indices(p) for p in POOLS)
        for old, new in zip(self.servers, servers, strict=True):
            if new.size < old.size or not np.array_equal(new[:old.size], old):
                raise ValueError("the new cluster must extend the old one")
        self.usage = tuple(
            np.concatenate([u, np.zeros((self.horizon, new.size - u.shape[1], u.shape[2]))],
                           axis=1)
            for u, new in zip(self.usage, servers, strict=True))
        self._index(cluster)

    @property
    def log_scale(self) -> float:
        """log of the cost unit (the largest U)."""
        return self.params.log_scale

    def price_usage(self) -> tuple[np.ndarray, ...]:
        """The usage arrays, one per pool, that prices follow: the committed usage.

        A subclass that prices from other usage (a high-water mark, say) overrides this one
        method; :meth:`scaled_prices`, :meth:`runs` and :meth:`inputs` all read it.
        """
        return self.usage

    def scaled_prices(self, pool: int, t0: int, t1: int) -> np.ndarray:
        """Prices of slots ``t0..t1-1`` in cost units, (t1 - t0, H, R)."""
        return self._price_of(pool, self.price_usage()[pool][t0:t1])

    def _price_of(self, pool: int, usage: np.ndarray) -> np.ndarray:
        """Prices in cost units of the usage rows ``usage`` (..., H, R) of ``pool``."""
        lp = log_prices(usage, self.capacity[pool], self.params.log_u[pool],
                        self.params.log_l[pool])
        return np.asarray(np.exp(lp - self.log_scale))

    def runs(self, t0: int, t1: int) -> np.ndarray:
        """First slot (relative to ``t0``) of every run of identical rows -- of the usage
        and of the usage prices follow, in both pools -- over slots ``t0..t1-1``.
        O((t1 - t0) (H + K) R) comparisons."""
        n = t1 - t0
        if n <= 0:
            return np.zeros(0, dtype=np.intp)
        changed = np.ones(n, dtype=bool)
        if n > 1:
            changed[1:] = False
            arrays = list(self.usage)
            arrays += [u for u in self.price_usage() if not any(u is a for a in arrays)]
            for u in arrays:
                rows = u[t0:t1].reshape(n, -1)
                changed[1:] |= (rows[1:] != rows[:-1]).any(axis=1)
        return np.flatnonzero(changed)

    def _per_run(self) -> bool:
        """Price once per run of identical slots, unless a subclass overrides
        :meth:`scaled_prices` itself (then every slot is priced through it)."""
        return type(self).scaled_prices is Ledger.scaled_prices

    def inputs(self, job: Job, relaxed: bool = False, start: int | None = None) -> JobInputs:
        """The priced inputs of ``job`` over its window at the current prices.

        ``relaxed`` gives every server its full capacity (the job alone in the cluster) while
        keeping the prices: the schedule set of the dual constraint (20). ``start`` (default
        the arrival) is the first usable slot, for a job decided after its arrival slot (a
        live queue); durations still count from the arrival. The window may then be empty.
        """
        t0 = job.arrival if start is None else max(job.arrival, start)
        t1 = max(t0, job.last_slot + 1)
        spec = job.spec
        per_run = self._per_run()
        starts = self.runs(t0, t1) if per_run else np.arange(t1 - t0)
        row_of = np.repeat(np.arange(starts.size), np.diff(np.append(starts, t1 - t0)))
        src = self.price_usage()
        pools = []
        for p, dem in enumerate((spec.worker_demand, spec.ps_demand)):
            d = dem.as_array()
            cap = self.capacity[p]
            resid = (np.broadcast_to(cap, (t1 - t0, *cap.shape)) if relaxed
                     else (cap - self.usage[p][t0 + starts])[row_of])
            price = (self._price_of(p, src[p][t0 + starts])[row_of] if per_run
                     else self.scaled_prices(p, t0, t1))
            pools.append(PoolInputs(
                servers=self.servers[p], price=price, resid=resid,
                demand=d, norm=normalise(d, self.cbar[p])))
        log_f = log_utility(job, np.arange(t0 - job.arrival + 1, t1 - job.arrival + 1))
        util = np.exp(log_f - self.log_scale)
        n = np.arange(job.max_workers + 1)
        ps_needed = np.array([job.ps_needed(int(k)) for k in n], dtype=int)
        return JobInputs(job=job, start=t0, util=util, workers=pools[0], ps=pools[1],
                         ps_needed=ps_needed, runs=starts if per_run else None)

    def commit(self, job: Job, schedule: Mapping[int, Alloc]) -> None:
        """Add a job's committed schedule (slot -> allocation) to the usage."""
        spec = job.spec
        for pool, dem, role in ((0, spec.worker_demand.as_array(), "workers"),
                                (1, spec.ps_demand.as_array(), "ps")):
            for t, alloc in schedule.items():
                for h, count in getattr(alloc, role):
                    self.usage[pool][t, self._pos[h]] += count * dem

    def release(self, job: Job, schedule: Mapping[int, Alloc]) -> None:
        """Take a committed schedule (or its future part) off the usage again: the inverse
        of :meth:`commit` (a live service whose job finished early)."""
        spec = job.spec
        for pool, dem, role in ((0, spec.worker_demand.as_array(), "workers"),
                                (1, spec.ps_demand.as_array(), "ps")):
            for t, alloc in schedule.items():
                for h, count in getattr(alloc, role):
                    row = self.usage[pool][t, self._pos[h]]
                    np.maximum(row - count * dem, 0.0, out=row)

    def price_mass(self, pool: int, chunk: int = 512) -> float:
        """``sum_t sum_h sum_r p_h^r(t) c~_h^r`` over the horizon, in cost units."""
        cn = normalise(self.capacity[pool], self.cbar[pool])
        total = 0.0
        for t0 in range(0, self.horizon, chunk):
            t1 = min(self.horizon, t0 + chunk)
            total += float(np.sum(self.scaled_prices(pool, t0, t1) * cn))
        return total
