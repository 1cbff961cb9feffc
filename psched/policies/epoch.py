"""One decision epoch of the elastic allocator (``elastic_mip.md``) and the policies built on it.

At every event (an arrival or a completion) the elastic MIP allocator and its two greedy
baselines see the same :class:`Epoch`: the running and queued jobs, each with its allowed worker
counts ``N_j``, its throughput ``s_j(n)`` at each of them, its remaining work ``W_j``, weight
``w_j``, rescale penalty and current count ``a_j``; the pool totals of every resource; the
planning intervals. They differ only in how they choose counts (:meth:`EpochPolicy.choose`), and
:func:`objective` scores every choice with the MIP's objective

    sum_j w_j p_j / W_j  -  sum_j sum_t w_j (o_j s_j(a_j) / W_j) [rescaled at t]

with ``p_j = min(W_j, sum_t Delta s_j(n_jt))``. Nodes of the paper are worker slots here; PS
follow by the ratio (``ps_needed(n)`` PS at ``n`` workers), capacity is per resource and pool.

Choices left open by the specification, made to keep the allocator (and its baselines) strong:

* **Allowed counts**: ``counts="pow2"`` (default) = powers of two up to the cap, the cap itself
  and the current count; ``"all"`` = every count ``1..cap``. The cap is ``min(N, ceil(W_j))``:
  more workers than the work left finish nothing sooner (:func:`~psched.policies.counts.work_cap`).
* **Throughput**: linear ``s(n) = n`` worker-slots per slot (the model every policy runs under);
  ``speedup="sublinear"`` plans with ``s(n) = n ** alpha`` instead (a belief only: the simulated
  executor still progresses linearly).
* **Weight** ``w_j = 1`` (``weight="unit"``, the paper's progress objective); ``"utility"``
  weighs by the utility the job earns if it finishes at full speed from now.
* **Rescale overhead** ``o_j = rescale_overhead_s`` (default 30 s) at the current throughput; a
  queued job's start costs nothing (``s(0) = 0``). The simulator charges no overhead, so this
  acts only as hysteresis against needless resizing.
* **Placement** after the counts: running jobs keep their containers (a shrink drops the last
  ones), then jobs grow, running ones first, in arrival order
  (:func:`~psched.policies.counts.realise`).
"""

from __future__ import annotations

import itertools
import math
import operator
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

import numpy as np

from psched.core.model import EPS, Alloc, Job
from psched.core.policy import View
from psched.policies.counts import Builder, pool_totals, realise, work_cap
from psched.policies.replan import ReplanPolicy
from psched.policies.table import any_per_row

__all__ = ["COUNT_SETS", "Epoch", "EpochCache", "EpochPolicy", "brute_force", "build_epoch",
           "feasible", "objective"]

COUNT_SETS = ("pow2", "all")
_TOL = 1e-9


@dataclass(frozen=True, kw_only=True)
class Epoch:
    """Everything one decision sees; jobs in arrival order."""

    ids: tuple[str, ...]  #: job ids, arrival order
    allowed: tuple[np.ndarray, ...]  #: allowed worker counts per job, ascending, >= 1
    speed: tuple[np.ndarray, ...]  #: s_j(n), worker-slots of work per slot, per allowed n
    ps: tuple[np.ndarray, ...]  #: PS needed at each allowed n
    remaining: np.ndarray  #: W_j, worker-slots left (> 0)
    weight: np.ndarray  #: w_j
    penalty: np.ndarray  #: w_j o_j s_j(a_j) / W_j, objective units lost per rescale
    current: np.ndarray  #: a_j, workers now (0 = queued)
    worker_demand: np.ndarray  #: J x R, one worker
    ps_demand: np.ndarray  #: J x R, one PS
    worker_cap: np.ndarray  #: R, worker pool totals
    ps_cap: np.ndarray  #: R, PS pool totals
    intervals: int = 1  #: T', planning intervals (1 = one-step)
    interval_slots: int = 1  #: Delta, slots per interval
    anti_starvation: bool = False  #: a queued job starts only if earlier fitting ones do
    #: (allowed, ps, each job's smallest allowed count, the PS it needs there): a cache, used
    #: only while ``allowed`` and ``ps`` are these very tuples (an epoch made by
    #: ``dataclasses.replace`` with other jobs derives its own)
    first: tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...], np.ndarray, np.ndarray] | None \
        = None

    def first_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Each job's smallest allowed count and the PS it needs there (J each, float)."""
        f = self.first
        if f is not None and f[0] is self.allowed and f[1] is self.ps:
            return f[2], f[3]
        at = np.zeros(len(self.ids), dtype=np.int64)  # where each job's list starts
        np.cumsum(np.fromiter(map(len, self.allowed), dtype=np.int64,
                              count=len(self.ids))[:-1], out=at[1:])
        if not self.ids:
            return np.zeros(0), np.zeros(0)
        return (np.concatenate(self.allowed).astype(float)[at],
                np.concatenate(self.ps).astype(float)[at])

    @property
    def running(self) -> np.ndarray:
        return self.current > 0

    def index(self, j: int, n: int) -> int:
        """Position of count ``n`` in ``allowed[j]``."""
        return int(np.searchsorted(self.allowed[j], n))

    def usage(self, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Worker- and PS-pool usage (R each) of one interval's counts (J,)."""
        ps = np.array([self.ps[j][self.index(j, n)] if n > 0 else 0
                       for j, n in enumerate(counts)], dtype=float)
        return counts @ self.worker_demand, ps @ self.ps_demand

    def fits(self, counts: np.ndarray) -> bool:
        w, p = self.usage(counts.astype(float))
        return bool(np.all(w <= self.worker_cap + _TOL * np.maximum(1.0, self.worker_cap))
                    and np.all(p <= self.ps_cap + _TOL * np.maximum(1.0, self.ps_cap)))

    def starvation_chain(self) -> list[int]:
        """Queued jobs, in arrival order, that fit at one worker beside every running job at
        its smallest count: the jobs the anti-starvation rule orders."""
        base = np.array([self.allowed[j][0] if self.current[j] else 0
                         for j in range(len(self.ids))])
        out = []
        for j in np.flatnonzero(self.current == 0):
            trial = base.copy()
            trial[j] = self.allowed[j][0]
            if self.fits(trial):
                out.append(int(j))
        return out


def _as_plan(epoch: Epoch, counts: np.ndarray) -> np.ndarray:
    c = np.asarray(counts, dtype=np.int64)
    return np.repeat(c[:, None], epoch.intervals, axis=1) if c.ndim == 1 else c


def feasible(epoch: Epoch, counts: np.ndarray) -> bool:
    """Is ``counts`` (J, or J x T') a feasible plan of ``epoch``? O(J T' R)."""
    plan = _as_plan(epoch, counts)
    for j in range(len(epoch.ids)):
        for n in plan[j]:
            if n and (epoch.index(j, n) >= epoch.allowed[j].size
                      or epoch.allowed[j][epoch.index(j, n)] != n):
                return False
        if epoch.current[j] > 0 and plan[j, 0] == 0:
            return False  # no pre-emption of running jobs
    if not all(epoch.fits(plan[:, t]) for t in range(epoch.intervals)):
        return False
    if epoch.anti_starvation:
        chain = epoch.starvation_chain()
        started = [plan[j, 0] > 0 for j in chain]
        if any(b and not a for a, b in itertools.pairwise(started)):
            return False
    return True


def objective(epoch: Epoch, counts: np.ndarray) -> float:
    """The MIP's objective of a plan (J counts, repeated over intervals, or J x T').

    One pass over the jobs in Python floats (the counts looked up by bisection in each job's
    allowed list), in the order the terms are summed; a job with no workers now or in the
    plan adds exactly ``+0.0`` and is skipped. O(J T' + J' T' log N) for J' jobs with
    workers."""
    arr = _as_plan(epoch, counts)
    # a job with no workers in any interval and none now adds exactly +0.0: skipped
    rows = np.flatnonzero(any_per_row(arr != 0) | (epoch.current != 0)).tolist()
    plan = arr[rows].tolist()
    penalty, weight = epoch.penalty.tolist(), epoch.weight.tolist()
    remaining, current = epoch.remaining.tolist(), epoch.current.tolist()
    slots = epoch.interval_slots
    total = 0.0
    for j, row in zip(rows, plan, strict=True):
        done, prev = 0.0, int(current[j])
        allowed = epoch.allowed[j]
        speed = epoch.speed[j]
        for n in row:
            if n:
                done += slots * float(speed[bisect_left(allowed, n)])
                if n != prev:
                    total -= float(penalty[j])
            prev = int(n)
        total += float(weight[j]) * min(done, float(remaining[j])) / float(remaining[j])
    return total


def brute_force(epoch: Epoch) -> tuple[float, np.ndarray]:
    """Best plan by enumeration (every job, every interval): for tiny epochs and tests only.

    O(prod_j (|N_j| + 1) ** T') plans.
    """
    choices = [[0, *a.tolist()] for a in epoch.allowed] * epoch.intervals
    best, arg = -math.inf, np.zeros((len(epoch.ids), epoch.intervals), dtype=np.int64)
    for combo in itertools.product(*choices):
        plan = np.array(combo, dtype=np.int64).reshape(epoch.intervals, -1).T
        if feasible(epoch, plan):
            v = objective(epoch, plan)
            if v > best + 1e-12:
                best, arg = v, plan
    return best, arg


def _allowed(cap: int, current: int, mode: str) -> np.ndarray:
    if mode == "all":
        base = set(range(1, cap + 1))
    else:
        base = {1 << k for k in range(cap.bit_length()) if (1 << k) <= cap} | {cap}
    if current > 0:
        base.add(current)
    return np.array(sorted(n for n in base if n > 0), dtype=np.int64)


def build_epoch(view: View, current: dict[str, Alloc], capacity: np.ndarray, pools: Any, *,
                counts: str = "pow2", speedup: str = "linear", alpha: float = 0.8,
                weight: str = "unit", rescale_overhead_s: float = 30.0, intervals: int = 1,
                interval_slots: int = 1, anti_starvation: bool = False,
                cache: EpochCache | None = None) -> Epoch:
    """The epoch of ``view``: every active job that may run, in arrival order. O(J (N + R)).

    ``cache`` (a policy's, kept between events) remembers each job's row of the epoch with
    the :class:`~psched.core.policy.JobStatus` and allocation objects it was computed from:
    a row is recomputed only for a job whose status or allocation object changed (the loop
    keeps a job's status object until it runs or makes progress; under ``weight="utility"``
    the weight depends on the slot, so every row is). Finding the changed jobs is a few
    C-level passes (``map`` of ``dict.get`` and ``is``), so an event costs O(J) at C speed
    plus O(N + R) Python for each job that changed."""
    opts = (counts, speedup, alpha, weight, rescale_overhead_s, view.cluster.slot_seconds)
    cache = cache if cache is not None else EpochCache()
    keys, vals = list(view.active), list(view.active.values())
    allocs = list(map(current.get, keys))
    # which jobs kept their status and allocation objects (C-level passes, no Python per job)
    same = np.fromiter(map(operator.is_, map(cache.status.get, keys), vals), dtype=bool,
                       count=len(keys))
    same &= np.fromiter(map(operator.is_, map(cache.alloc.get, keys), allocs), dtype=bool,
                        count=len(keys))
    if weight != "unit":  # the weight depends on the slot: every row is recomputed
        same[:] = False
    for i in np.flatnonzero(~same).tolist():
        j = keys[i]
        cache.row[j] = _row(j, vals[i], allocs[i], view.t, opts, cache)
        cache.status[j], cache.alloc[j] = vals[i], allocs[i]
    rows = list(filter(None, map(cache.row.__getitem__, keys)))  # None: cap 0, left out
    cw, cp = pool_totals(capacity, pools)
    r = capacity.shape[1]
    cols: list[tuple[Any, ...]] = list(zip(*rows, strict=True)) if rows else [()] * 11
    ids, allowed, speed, ps, rem, wts, pen, cur, kind, n1, p1 = cols
    wd, sd = cache.demands(np.array(kind, dtype=np.int64), r)
    return Epoch(ids=ids, allowed=allowed, speed=speed, ps=ps,
                 remaining=np.array(rem, dtype=float), weight=np.array(wts, dtype=float),
                 penalty=np.array(pen, dtype=float), current=np.array(cur, dtype=np.int64),
                 worker_demand=wd, ps_demand=sd, worker_cap=cw, ps_cap=cp,
                 intervals=intervals, interval_slots=interval_slots,
                 anti_starvation=anti_starvation,
                 first=(allowed, ps, np.array(n1, dtype=float), np.array(p1, dtype=float)))


def _row(job_id: str, st: Any, alloc: Alloc | None, t: int, opts: tuple[Any, ...],
         cache: EpochCache) -> tuple[Any, ...] | None:
    """One job's entries of the epoch (``None`` if it cannot run: cap 0)."""
    counts, speedup, alpha, weight, rescale_overhead_s, slot_s = opts
    job = st.job
    cap = work_cap(job, st.remaining)
    if cap <= 0:
        return None
    a = min(alloc.n_workers, cap) if alloc is not None else 0
    ns = _allowed(cap, a, counts)
    s = ns.astype(float) ** (alpha if speedup == "sublinear" else 1.0)
    ps_n = np.ceil(job.spec.ps_ratio * ns - EPS).astype(np.int64)  # Job.ps_needed
    kind = cache.kind(job)
    w = 1.0 if weight == "unit" else max(_full_speed_utility(job, st.remaining, t), 1e-9)
    s_now = float(a) ** (alpha if speedup == "sublinear" else 1.0) if a else 0.0
    pen = w * (rescale_overhead_s / slot_s) * s_now / st.remaining
    return job_id, ns, s, ps_n, st.remaining, w, pen, a, kind, int(ns[0]), int(ps_n[0])


class EpochCache:
    """What :func:`build_epoch` keeps between events (one per policy run).

    Each job's row of the epoch with the status and allocation objects it was computed
    from. Demand vectors are interned: each distinct (worker, PS) demand pair is a
    *kind* (a row of two small matrices), so an epoch's J x R demand matrices are one
    fancy-indexing step. O(1) per look-up."""

    def __init__(self) -> None:
        self.status: dict[str, Any] = {}  #: job id -> the status object its row is from
        self.alloc: dict[str, Any] = {}  #: job id -> the allocation object its row is from
        self.row: dict[str, tuple[Any, ...] | None] = {}  #: job id -> its row (None: cap 0)
        self._kinds: dict[bytes, int] = {}
        self._w: list[np.ndarray] = []
        self._s: list[np.ndarray] = []
        self._mats: tuple[np.ndarray, np.ndarray] | None = None

    def kind(self, job: Job) -> int:
        """The interned index of ``job``'s (worker, PS) demand pair."""
        w, s = job.spec.worker_demand.as_array(), job.spec.ps_demand.as_array()
        key = np.concatenate([w, s]).astype(float).tobytes() + bytes([w.size])
        k = self._kinds.get(key)
        if k is None:
            k = self._kinds[key] = len(self._w)
            self._w.append(np.asarray(w, dtype=float))
            self._s.append(np.asarray(s, dtype=float))
            self._mats = None
        return k

    def demands(self, kinds: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
        """Worker and PS demand matrices (len(kinds) x r) of jobs of these kinds."""
        if not kinds.size:
            return np.zeros((0, r)), np.zeros((0, r))
        if self._mats is None:
            self._mats = (np.array(self._w, dtype=float).reshape(-1, r),
                          np.array(self._s, dtype=float).reshape(-1, r))
        return self._mats[0][kinds], self._mats[1][kinds]

    def trim(self, active: Any) -> None:
        """Forget rows of jobs no longer active (when they outnumber the active ones)."""
        if len(self.row) > 2 * len(active) + 64:
            for name in ("status", "alloc", "row"):
                setattr(self, name, {j: v for j, v in getattr(self, name).items()
                                     if j in active})


def _full_speed_utility(job: Job, remaining: float, t: int) -> float:
    return job.utility_at(t - job.arrival + math.ceil(remaining / job.max_workers - 1e-9))


class EpochPolicy(ReplanPolicy):
    """A re-planning policy that chooses counts on an :class:`Epoch` (subclasses: ``choose``)."""

    name = "epoch"

    def __init__(self, *, counts: str = "pow2", speedup: str = "linear", alpha: float = 0.8,
                 weight: str = "unit", rescale_overhead_s: float = 30.0, intervals: int = 1,
                 interval_slots: int = 1, anti_starvation: bool = False) -> None:
        super().__init__()
        if counts not in COUNT_SETS:
            raise ValueError(f"counts must be one of {COUNT_SETS}, got {counts!r}")
        if speedup not in ("linear", "sublinear") or weight not in ("unit", "utility"):
            raise ValueError(f"bad speedup {speedup!r} or weight {weight!r}")
        if intervals < 1 or interval_slots < 1 or rescale_overhead_s < 0 or not 0 < alpha <= 1:
            raise ValueError("intervals, interval_slots >= 1; rescale_overhead_s >= 0; "
                             "0 < alpha <= 1")
        self.options: dict[str, Any] = {
            "counts": counts, "speedup": speedup, "alpha": alpha, "weight": weight,
            "rescale_overhead_s": rescale_overhead_s, "intervals": intervals,
            "interval_slots": interval_slots, "anti_starvation": anti_starvation}
        self.objectives: list[float] = []  #: objective of every decision
        self._epoch_cache = EpochCache()

    def reset(self) -> None:
        self.objectives = []
        self._epoch_cache = EpochCache()

    def choose(self, epoch: Epoch) -> np.ndarray:
        """A feasible plan for ``epoch``: counts (J,) kept over every interval, or J x T'."""
        raise NotImplementedError

    def replan(self, view: View) -> dict[str, Alloc]:
        self._epoch_cache.trim(view.active)
        epoch = build_epoch(view, self.current, self.capacity, self.pools, **self.options,
                            cache=self._epoch_cache)
        if not epoch.ids:
            return {}
        chosen = self.choose(epoch)
        self.objectives.append(objective(epoch, chosen))
        first = chosen if chosen.ndim == 1 else chosen[:, 0]
        given = np.flatnonzero(first > 0).tolist()  # jobs without workers take no placement
        ids = [epoch.ids[i] for i in given]
        counts = {epoch.ids[i]: int(first[i]) for i in given}
        jobs = {j: view.active[j].job for j in ids}
        order = sorted(ids, key=lambda j: (j not in self.current, 0))
        build = Builder(self.capacity, self.pools, self.facts)
        return realise(build, jobs, counts, self.current, order)

    def report(self) -> dict[str, Any]:
        return {f"{self.name}_objective_sum": float(sum(self.objectives))}
