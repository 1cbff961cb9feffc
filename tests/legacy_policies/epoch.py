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
from dataclasses import dataclass
from typing import Any

import numpy as np

from legacy_policies.counts import Builder, pool_totals, realise, work_cap
from legacy_policies.replan import ReplanPolicy
from psched.core.model import EPS, Alloc, Job
from psched.core.policy import View

__all__ = ["COUNT_SETS", "Epoch", "EpochPolicy", "brute_force", "build_epoch", "feasible",
           "objective"]

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
    """The MIP's objective of a plan (J counts, repeated over intervals, or J x T')."""
    plan = _as_plan(epoch, counts)
    total = 0.0
    for j in range(len(epoch.ids)):
        done, prev = 0.0, int(epoch.current[j])
        for n in plan[j]:
            if n:
                done += epoch.interval_slots * float(epoch.speed[j][epoch.index(j, n)])
                if n != prev:
                    total -= float(epoch.penalty[j])
            prev = int(n)
        total += float(epoch.weight[j]) * min(done, float(epoch.remaining[j])) / float(
            epoch.remaining[j])
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
                interval_slots: int = 1, anti_starvation: bool = False) -> Epoch:
    """The epoch of ``view``: every active job that may run, in arrival order. O(J (N + R))."""
    ids, allowed, speed, ps, rem, wts, pen, cur, wd, sd = ([] for _ in range(10))
    slot_s = view.cluster.slot_seconds
    for job_id, st in view.active.items():
        job = st.job
        cap = work_cap(job, st.remaining)
        if cap <= 0:
            continue
        a = min(current[job_id].n_workers, cap) if job_id in current else 0
        ns = _allowed(cap, a, counts)
        s = ns.astype(float) ** (alpha if speedup == "sublinear" else 1.0)
        w = 1.0 if weight == "unit" else max(_full_speed_utility(job, st.remaining, view.t), 1e-9)
        s_now = float(a) ** (alpha if speedup == "sublinear" else 1.0) if a else 0.0
        ids.append(job_id)
        allowed.append(ns)
        speed.append(s)
        ps.append(np.ceil(job.spec.ps_ratio * ns - EPS).astype(np.int64))  # Job.ps_needed
        rem.append(st.remaining)
        wts.append(w)
        pen.append(w * (rescale_overhead_s / slot_s) * s_now / st.remaining)
        cur.append(a)
        wd.append(job.spec.worker_demand.as_array())
        sd.append(job.spec.ps_demand.as_array())
    cw, cp = pool_totals(capacity, pools)
    r = capacity.shape[1]
    return Epoch(ids=tuple(ids), allowed=tuple(allowed), speed=tuple(speed), ps=tuple(ps),
                 remaining=np.array(rem, dtype=float), weight=np.array(wts, dtype=float),
                 penalty=np.array(pen, dtype=float), current=np.array(cur, dtype=np.int64),
                 worker_demand=np.array(wd, dtype=float).reshape(-1, r),
                 ps_demand=np.array(sd, dtype=float).reshape(-1, r), worker_cap=cw, ps_cap=cp,
                 intervals=intervals, interval_slots=interval_slots,
                 anti_starvation=anti_starvation)


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

    def reset(self) -> None:
        self.objectives = []

    def choose(self, epoch: Epoch) -> np.ndarray:
        """A feasible plan for ``epoch``: counts (J,) kept over every interval, or J x T'."""
        raise NotImplementedError

    def replan(self, view: View) -> dict[str, Alloc]:
        epoch = build_epoch(view, self.current, self.capacity, self.pools, **self.options)
        if not epoch.ids:
            return {}
        chosen = self.choose(epoch)
        self.objectives.append(objective(epoch, chosen))
        jobs = {j: view.active[j].job for j in epoch.ids}
        first = chosen if chosen.ndim == 1 else chosen[:, 0]
        counts = dict(zip(epoch.ids, (int(c) for c in first), strict=True))
        order = sorted(epoch.ids, key=lambda j: (j not in self.current, 0))
        return realise(Builder(self.capacity, self.pools), jobs, counts, self.current, order)

    def report(self) -> dict[str, Any]:
        return {f"{self.name}_objective_sum": float(sum(self.objectives))}
