"""The plan book of ``oasis-rp``: usage of revisable plans, their prices, and searches within
a promise.

:class:`PlanLedger` is the OASiS :class:`~psched.oasis.ledger.Ledger` with two changes: plans
can be taken out again (:meth:`PlanLedger.add` with ``sign=-1``), and prices follow the usage
of the current plans (they fall when plans move away; in OASiS they never fall). Residual
capacities come from the current plans too.

The searches over it are in :mod:`psched.policies.oasis_rp.search`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from psched.core.model import Alloc, Cluster, Job
from psched.oasis.ledger import Ledger
from psched.oasis.prices import PriceParams, normalise
from psched.policies.oasis_rp.kernels import (
    log_prices_compiled,
    runs_compiled,
    scatter_add_compiled,
    scatter_add_ready,
    window_tables_compiled,
)
from psched.policies.oasis_rp.plans import Schedule

__all__ = ["PlanLedger"]


class PlanLedger(Ledger):
    """Usage of the current plans per pool, slot, server and resource, and prices from it.

    The boundaries of runs of identical slots are kept as the usage changes (``fast``): write
    the usage through :meth:`add`, :meth:`commit` or :meth:`release` (or call
    :meth:`refresh_runs` after writing it directly), else a search may treat changed slots as
    copies of their neighbours."""

    def __init__(self, cluster: Cluster, horizon: int, params: PriceParams,
                 fast: bool = True) -> None:
        super().__init__(cluster, horizon, params)
        #: searches run-compressed with incremental run boundaries
        #: (:mod:`psched.policies.oasis_rp.search`); off:
        #: the reference path (:func:`search_reference`, every row compared per search)
        self.fast = fast
        self._psn: dict[str, np.ndarray] = {}
        self._dem: dict[str, tuple[np.ndarray, np.ndarray, object]] = {}
        self._norm: dict[str, tuple[np.ndarray, np.ndarray, object, object]] = {}
        self._price_terms: list[tuple[Any, ...] | None] = [None, None]
        self._row_terms: list[tuple[Any, ...] | None] = [None, None]
        self._change = np.ones(horizon, dtype=bool)
        #: run boundaries read in one compiled loop (off: the numpy reference of the same
        #: comparisons; both give the same runs)
        self._compiled_runs = True
        self._mark_all()

    @property
    def log_scale(self) -> float:
        """:attr:`Ledger.log_scale` (the largest log U), kept while :attr:`params` is the
        same object (each search reads it; the parameters are frozen). O(1)."""
        got = self.__dict__.get("_scale")
        if got is None or got[0] is not self.params:
            got = self.__dict__["_scale"] = (self.params, self.params.log_scale)
        return float(got[1])

    def grow(self, cluster: Cluster) -> None:
        super().grow(cluster)
        self._mark_all()

    # -- run boundaries, kept as the usage changes ---------------------------------------------
    def _tracked(self) -> list[np.ndarray]:
        """The arrays whose identical consecutive rows form runs: the usage of both pools."""
        return list(self.usage)

    def _mark_all(self) -> None:
        """Recompute every run boundary. O(T (H + K) R)."""
        self._change[:] = True
        self._stale = np.zeros(self.horizon, dtype=bool)
        if self.horizon > 1:
            self._change[1:] = False
            for u in self._tracked():
                rows = u.reshape(self.horizon, -1)
                self._change[1:] |= (rows[1:] != rows[:-1]).any(axis=1)

    def _mark(self, slots: np.ndarray) -> None:
        """The rows of ``slots`` changed: the boundaries at them and just after them are stale
        until the next :meth:`runs` reads them. O(|slots|)."""
        self._stale[slots] = True
        self._stale[np.minimum(slots + 1, self.horizon - 1)] = True

    def refresh_runs(self) -> None:
        """Recompute every run boundary: call it after writing :attr:`usage` other than
        through :meth:`add`, :meth:`commit` or :meth:`release`, which keep them.
        O(T (H + K) R)."""
        self._mark_all()

    def runs(self, t0: int, t1: int) -> np.ndarray:
        """First slot (relative to ``t0``) of every run of identical rows over ``t0..t1-1``,
        as :meth:`Ledger.runs` finds them, from boundaries kept as rows change: O(t1 - t0)
        plus O((H + K) R) per boundary whose rows changed since it was last read."""
        if not self.fast:
            return super().runs(t0, t1)
        n = t1 - t0
        if n <= 0:
            return np.zeros(0, dtype=np.intp)
        if self._compiled_runs:
            try:
                return runs_compiled((self.usage[0], self.usage[1]), None, self._stale,
                                     self._change, t0, t1)
            except TypeError:  # arrays written from outside in other types: numpy below
                self._compiled_runs = False
        stale = np.flatnonzero(self._stale[t0 + 1:t1]) + (t0 + 1)
        if stale.size:
            diff = np.zeros(stale.size, dtype=bool)
            for u in self._tracked():
                diff |= (u[stale] != u[stale - 1]).reshape(stale.size, -1).any(axis=1)
            self._change[stale] = diff
            self._stale[stale] = False
        return np.concatenate(([0], np.flatnonzero(self._change[t0 + 1:t1]) + 1)).astype(np.intp)

    def window_caps(self, job: Job, t0: int, t1: int, per_slot: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int] | None:
        """:meth:`runs` over ``t0..t1-1``, each slot's run, the containers of ``job`` that fit
        per run and server in both pools and the worker-slots the window holds (at most
        ``per_slot`` a slot), in one compiled call
        (:func:`~psched.policies.oasis_rp.kernels.window_tables_compiled`); None where the compiled
        loops do not apply (the reference path, arrays written in other types): the caller
        composes :func:`~psched.policies.oasis_rp.search.run_tables` and
        :func:`~psched.policies.oasis_rp.search.feasible_work`, which give the same numbers."""
        if not (self.fast and self._compiled_runs) or t1 <= t0:
            return None
        arrays = (*self.usage, *self.capacity)
        if not all(a.dtype == np.float64 and a.flags.c_contiguous for a in arrays):
            return None
        psn = self.ps_needed_of(job)
        if psn.dtype != np.int64:
            return None
        return window_tables_compiled((self.usage[0], self.usage[1]), None, self._stale,
                                      self._change, t0, t1, self.capacity,
                                      self.demands_of(job), (job.max_workers, int(psn[-1])),
                                      psn, per_slot)

    def commit(self, job: Job, schedule: Mapping[int, Alloc]) -> None:
        super().commit(job, schedule)
        self._mark(np.fromiter(schedule, dtype=np.int64))

    def release(self, job: Job, schedule: Mapping[int, Alloc]) -> None:
        super().release(job, schedule)
        self._mark(np.fromiter(schedule, dtype=np.int64))

    def price_of(self, pool: int, usage: np.ndarray) -> np.ndarray:
        """Prices in cost units of the usage rows ``usage`` (..., H, R) of ``pool``: the
        operations of :func:`psched.oasis.prices.log_prices` and ``Ledger._price_of`` on the same
        numbers, with the capacity terms and the log-price span computed once per
        capacity and parameters (bit-identical)."""
        got = self._price_terms[pool]
        cap, params = self.capacity[pool], self.params
        if got is None or got[0] is not cap or got[1] is not params:
            pos = cap > 0
            got = (cap, params, pos, np.where(pos, cap, 1.0),
                   params.log_u[pool] - params.log_l[pool], params.log_l[pool])
            self._price_terms[pool] = got
        _, _, pos, safe, span, log_l = got
        util = np.clip(np.where(pos, usage / safe, 0.0), 0.0, 1.0)
        return np.asarray(np.exp(log_l + util * span - self.log_scale))

    def price_rows(self, pool: int, usage: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """:meth:`price_of` ``(pool, usage[rows])`` with the exponent in one compiled loop
        (:func:`~psched.policies.oasis_rp.kernels.log_prices_compiled`: the same operations in
        the same
        order, no gathered copy) and numpy's ``exp``: bit-identical. ``usage`` is one of
        :meth:`price_usage`'s arrays (float64, C order); else :meth:`price_of`. O(|rows| H R)."""
        got = self._row_terms[pool]
        cap, params = self.capacity[pool], self.params
        if got is None or got[0] is not cap or got[1] is not params:
            pos = np.ascontiguousarray(cap > 0)
            n_res = (cap.shape[1],)  # the span and the floor as they broadcast over R
            got = (cap, params, pos,
                   np.ascontiguousarray(np.where(pos, cap, 1.0), dtype=np.float64),
                   np.ascontiguousarray(np.broadcast_to(
                       params.log_u[pool] - params.log_l[pool], n_res), dtype=np.float64),
                   np.ascontiguousarray(np.broadcast_to(params.log_l[pool], n_res),
                                        dtype=np.float64),
                   float(self.log_scale))
            self._row_terms[pool] = got
        _, _, pos, safe, span, log_l, log_scale = got
        if (usage.dtype != np.float64 or not usage.flags.c_contiguous or pos.shape != safe.shape
                or span.shape != (safe.shape[1],) or log_l.shape != span.shape):
            return self.price_of(pool, usage[rows])
        return np.asarray(np.exp(log_prices_compiled(usage, rows, pos, safe, span, log_l,
                                                     log_scale)))

    def ps_needed_of(self, job: Job) -> np.ndarray:
        """``(N+1,)`` fewest PS for ``n = 0..N`` workers of ``job`` (kept per job id)."""
        got = self._psn.get(job.job_id)
        if got is None or got.shape[0] != job.max_workers + 1:
            got = np.array([job.ps_needed(k) for k in range(job.max_workers + 1)], dtype=int)
            self._psn[job.job_id] = got
        return got

    def _entries(self, schedule: Mapping[int, Alloc], role: str
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(slot, position in pool, count) of every container group of one role."""
        if isinstance(schedule, Schedule):
            ts, srv, cnt = schedule.groups(role)
            return ts, self._pos[srv], cnt
        rows = [(t, h, c) for t, alloc in schedule.items() for h, c in getattr(alloc, role)]
        if not rows:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        arr = np.array(rows, dtype=np.int64)
        return arr[:, 0], self._pos[arr[:, 1]], arr[:, 2]

    def demands_of(self, job: Job) -> tuple[np.ndarray, np.ndarray]:
        """The worker and PS demand arrays of ``job`` (kept per job id; do not write)."""
        got = self._dem.get(job.job_id)
        if got is None or got[2] is not job.spec:
            w, p = (np.ascontiguousarray(d.as_array(), dtype=np.float64)
                    for d in (job.spec.worker_demand, job.spec.ps_demand))
            got = self._dem[job.job_id] = (w, p, job.spec)
        return got[0], got[1]

    def norms_of(self, job: Job) -> tuple[np.ndarray, np.ndarray]:
        """The worker and PS demands of ``job`` normalised by the pools' mean capacities
        (:func:`psched.oasis.prices.normalise`; kept per job id while its spec and the mean
        capacities are the same objects; do not write)."""
        got = self._norm.get(job.job_id)
        if got is None or got[2] is not job.spec or got[3] is not self.cbar:
            w, p = self.demands_of(job)
            got = self._norm[job.job_id] = (normalise(w, self.cbar[0]),
                                            normalise(p, self.cbar[1]), job.spec, self.cbar)
        return got[0], got[1]

    def add(self, job: Job, schedule: Mapping[int, Alloc], sign: int = 1) -> None:
        """Add (``sign=1``) or take out (``sign=-1``) a schedule's usage. O(entries R)."""
        w_dem, p_dem = self.demands_of(job)
        if self.fast and isinstance(schedule, Schedule):  # the compiled scatter, no copies
            for pool, dem, role in ((0, w_dem, "workers"), (1, p_dem, "ps")):
                ts, _, cnt = schedule.groups(role)
                if ts.size:
                    scatter_add_ready(self.usage[pool], ts, schedule.positions(role, self._pos),
                                      cnt, sign, dem, self._stale)
            return
        for pool, dem, role in ((0, w_dem, "workers"), (1, p_dem, "ps")):
            ts, pos, cnt = self._entries(schedule, role)
            if ts.size and self.fast and isinstance(schedule, Schedule):
                scatter_add_compiled(self.usage[pool], ts, pos, cnt, sign, dem, self._stale)
            elif ts.size:
                delta = (sign * cnt)[:, None] * dem[None, :]
                if isinstance(schedule, Schedule) and schedule.distinct(role):
                    self.usage[pool][ts, pos] += delta
                else:
                    np.add.at(self.usage[pool], (ts, pos), delta)
                self._mark(ts)

    def fits(self, job: Job, schedule: Mapping[int, Alloc]) -> bool:
        """True if adding ``schedule`` keeps every server within capacity. O(entries R)."""
        w_dem, p_dem = self.demands_of(job)
        for pool, dem, role in ((0, w_dem, "workers"), (1, p_dem, "ps")):
            if isinstance(schedule, Schedule):
                ts, _, cnt = schedule.groups(role)
                pos = schedule.positions(role, self._pos)
            else:
                ts, pos, cnt = self._entries(schedule, role)
            if not ts.size:
                continue
            cap = self.capacity[pool][pos]
            need = self.usage[pool][ts, pos] + cnt[:, None] * dem[None, :]
            if np.any(need > cap + 1e-9 * np.maximum(1.0, cap)):
                return False
        return True
