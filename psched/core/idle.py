"""Idle capacity, for the loop's jobs that need it: the capacity no committed schedule holds
reserved for a committing policy's job behind (:meth:`IdleRoom.reserve_idle`), and the
capacity a slot's plan leaves idle handed to the background jobs
(:meth:`IdleRoom.fill_background`). Part of the rules of :mod:`psched.core.keeping`.

Under a measured start-up cost both keep a job on the allocation it ran with where that
still fits and more workers would not finish it sooner (:meth:`IdleRoom._worth_resizing`):
a few long runs, not a tail of smaller ones that each pay a start-up. The slot's plan itself
is held so too (:meth:`IdleRoom.stay_put`): a job the plan would move to other servers with
the same counts, shrink while it has more work left, pause, or grow when that would not
finish it sooner, runs on the allocation it ran with, where the capacity the plan leaves
allows it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from psched.core.model import Alloc, Cluster, Job, Pool, SlotPlan, ceil_eps
from psched.core.placement import Pools, most_workers, place, usage_of
from psched.core.records import LoopState
from psched.core.speed import SpeedBook

__all__ = ["IdleRoom"]


class IdleRoom:
    """The idle-capacity half of :class:`~psched.core.keeping.Keeping` (a mixin of the loop)."""

    state: LoopState
    cluster: Cluster
    horizon: int
    speeds: SpeedBook
    #: each job's committed schedule (policies committing on arrival), as decided
    schedules: dict[str, dict[int, Alloc]]
    background: list[str]
    last_plan: dict[str, Alloc]  #: the plan of the last slot learnt from

    def work_left(self, job_id: str, speed: float | None = None) -> int:
        """An active job's work left, in worker-slots at ``speed`` (default its measured
        speed), at least 1."""
        rec = self.state.records[job_id]
        return max(1, ceil_eps(max(0.0, rec.job.work - rec.done)
                               / (rec.speed if speed is None else speed)))

    def reserve_idle(self, job: Job, work: int, t: int,
                     around: Mapping[int, Alloc] | None = None) -> dict[int, Alloc]:
        """The earliest schedule of ``work`` worker-slots of ``job`` from slot ``t`` on the
        capacity no committed schedule holds, in the slots ``around`` (the job's schedule, if
        it is topped up) leaves free: each slot, as many workers (with their PS) as fit, up
        to its ``N`` and the work left; empty if it does not fit before the horizon. Once its
        workload's start-up cost ``c`` is measured, a slot counts only what it keeps of its
        workers' work where it starts, resumes or resizes the job (so it asks for the work
        left over ``1 - c`` workers), and the job keeps the allocation it has in the slot
        before where that still fits and more workers would not finish it sooner
        (:meth:`_worth_resizing`), even if it is more than the work left needs: a few long
        runs, not a tail of smaller ones that each pay a start-up.
        O(schedule entries + slots x S R)."""
        around = around or {}
        by_slot: dict[int, list[tuple[Job, Alloc]]] = {}
        records = self.state.records
        for j, sched in self.schedules.items():
            if j in records:
                for s, a in sched.items():
                    if s >= t:
                        by_slot.setdefault(s, []).append((records[j].job, a))
        cap = np.asarray(self.cluster.capacity, dtype=float)
        pools = Pools.of(self.cluster)
        w_dem, p_dem = job.spec.worker_demand.as_array(), job.spec.ps_demand.as_array()
        cost = self.speeds.startup(job.spec.workload)
        out: dict[int, Alloc] = {}
        left = float(work)
        for s in range(t, self.horizon):
            if s in around:
                continue
            free = cap.copy()
            for other, a in by_slot.get(s, ()):
                ow, op = other.spec.worker_demand.as_array(), other.spec.ps_demand.as_array()
                for h, n in a.workers:
                    free[h] -= n * ow
                for h, n in a.ps:
                    free[h] -= n * op
            want = min(ceil_eps(left / (1.0 - cost)) if cost < 1.0 else job.max_workers,
                       job.max_workers)  # a slot that (re)starts it keeps 1 - cost of each
            n = most_workers(free, pools, job, want)
            prev = out.get(s - 1, around.get(s - 1, self.last_plan.get(job.job_id)
                                               if s == t else None))
            alloc: Alloc | None = None
            if cost > 0.0 and prev is not None and _take(free, job, prev) is not None \
                    and not self._worth_resizing(job, ceil_eps(left), prev.n_workers, n, cost):
                alloc = prev
            elif n:
                got = place(free, pools, worker_demand=w_dem, ps_demand=p_dem, workers=n,
                            ps=job.ps_needed(n))
                alloc = None if got is None else got.alloc
            if alloc is not None:
                out[s] = alloc
                left -= alloc.n_workers * (1.0 if alloc == prev else 1.0 - cost)
                if left <= 1e-9:
                    return out
        return {}

    def stay_put(self, plan: dict[str, Alloc], jobs: Mapping[str, Job],
                 usage: Callable[[], np.ndarray]) -> dict[str, Alloc]:
        """``plan`` with the jobs it would move or resize held on the allocation they ran
        with in the slot before, once their workload's start-up cost is measured, where that
        is worth it and still fits (``usage()``: the plan's, servers x resources, asked for
        only when a job may be held).

        A move, a resize or a resume costs a start-up. A job is held when the plan moves it
        with the same counts (the move buys nothing), when the plan shrinks it and it would
        not finish in this slot either way (it keeps more workers and pays nothing), when the
        plan grows it but more workers would not finish it sooner after paying the start-up
        (:meth:`_worth_resizing`), and when the plan pauses it (not a background job: those
        keep their own allocation in :meth:`fill_background`). Every job the plan moves,
        resizes or starts is taken out; the held go back where they ran (all of them if they
        fit, else one by one in that order -- same counts, grown, shrunk, paused, each in the
        plan's order -- while every other still fits), then the others where planned if that
        is free, else anywhere with room (:func:`~psched.core.placement.place`). The plan is
        kept as it was when no held job fits so. O(held x changed x S R)."""
        n_servers = len(self.cluster.servers)
        pools = [s.pool for s in self.cluster.servers]

        def cost_to_move(job: Job, before: Alloc) -> float:
            """The start-up cost of ``job``'s workload, 0.0 where it is not measured or the
            servers ``before`` names are no longer in their pools (it may not stay)."""
            if not (all(h < n_servers and pools[h] == Pool.WORKER for h, _ in before.workers)
                    and all(k < n_servers and pools[k] == Pool.PS for k, _ in before.ps)):
                return 0.0
            return self.speeds.startup(job.spec.workload)

        ranked: list[tuple[int, int, str]] = []
        changed: list[str] = []
        for i, (job_id, alloc) in enumerate(plan.items()):
            before = self.last_plan.get(job_id)
            if before == alloc or job_id not in jobs:
                continue
            changed.append(job_id)
            if before is None or not before.n_workers or not alloc.n_workers:
                continue
            job = jobs[job_id]
            cost = cost_to_move(job, before)
            if cost <= 0.0:
                continue
            now, new = before.n_workers, alloc.n_workers
            if new == now and before.n_ps == alloc.n_ps:
                ranked.append((0, i, job_id))
            elif new > now:
                if not self._worth_resizing(job, self.work_left(job_id), now, new, cost):
                    ranked.append((1, i, job_id))
            elif new < now and self.work_left(job_id) > new * (1.0 - cost):
                ranked.append((2, i, job_id))
        for job_id, before in self.last_plan.items():  # paused by the plan: on idle room
            if job_id not in plan and job_id in jobs and before.n_workers \
                    and job_id not in self.background \
                    and cost_to_move(jobs[job_id], before) > 0.0:
                ranked.append((3, len(plan), job_id))
        if not ranked:
            return plan
        held = [j for _, _, j in sorted(ranked)]
        free = np.asarray(self.cluster.capacity, dtype=float) - usage()
        for job_id in changed:
            spec = jobs[job_id].spec
            free += usage_of(plan[job_id], spec.worker_demand.as_array(),
                             spec.ps_demand.as_array(), n_servers)
        pools_of = Pools.of(self.cluster)
        best = self._fit_all(plan, jobs, free, held, [j for j in changed if j not in held],
                             pools_of)
        if best is None:
            kept: list[str] = []
            for job_id in held:  # one more held, if every other still fits
                trial = [*kept, job_id]
                got = self._fit_all(plan, jobs, free, trial,
                                    [j for j in changed if j not in trial], pools_of)
                if got is not None:
                    kept, best = trial, got
        if best is None:
            return plan
        out = {j: best.get(j, a) for j, a in plan.items()}
        out.update((j, a) for j, a in best.items() if j not in plan)
        return out

    def _fit_all(self, plan: SlotPlan, jobs: Mapping[str, Job], free: np.ndarray,
                 kept: list[str], rest: list[str], pools: Pools) -> dict[str, Alloc] | None:
        """The allocations of ``kept`` (where they ran) and ``rest`` (where planned if it
        fits, else anywhere with room) on ``free``, or None if they do not all fit."""
        out: dict[str, Alloc] = {}
        for job_id in kept:
            got = _take(free, jobs[job_id], self.last_plan[job_id])
            if got is None:
                return None
            out[job_id], free = self.last_plan[job_id], got
        for job_id in rest:
            got = _take(free, jobs[job_id], plan[job_id])
            if got is not None:
                out[job_id], free = plan[job_id], got
                continue
            spec = jobs[job_id].spec
            placed = place(free, pools, worker_demand=spec.worker_demand.as_array(),
                           ps_demand=spec.ps_demand.as_array(), workers=plan[job_id].n_workers,
                           ps=plan[job_id].n_ps)
            if placed is None:
                return None
            out[job_id], free = placed.alloc, placed.free
        return out

    def fill_background(self, plan: SlotPlan, jobs: Mapping[str, Job],
                        usage: np.ndarray) -> dict[str, Alloc]:
        """``plan`` with the background jobs it does not run placed on the capacity it
        leaves idle (``usage``: the plan's, servers x resources), least work left first,
        each with as many workers (and the PS they need) as fit. Once its workload's
        start-up cost is measured, a job keeps the allocation it ran with in the slot before
        where it still fits, unless more workers finish it sooner even after paying that
        cost once more (:meth:`_worth_resizing`). O(candidates x S R)."""
        order = [j for j in self.background if j in jobs and j not in plan]
        if not order:
            return dict(plan)
        records = self.state.records
        free = np.asarray(self.cluster.capacity, dtype=float) - usage
        pools = Pools.of(self.cluster)
        out = dict(plan)
        order.sort(key=lambda j: (records[j].job.work - records[j].done, j))
        placing = []
        for job_id in order:  # those that stay as they ran, first
            job = jobs[job_id]
            left = self.work_left(job_id)
            before = self.last_plan.get(job_id)
            cost = self.speeds.startup(job.spec.workload)
            if before is not None and cost > 0.0 and before.n_workers <= left:
                kept = _take(free, job, before)
                if kept is not None and not self._worth_resizing(
                        job, left, before.n_workers,
                        most_workers(free, pools, job, left), cost):
                    out[job_id], free = before, kept
                    continue
            placing.append((job_id, left))
        for job_id, left in placing:
            job = jobs[job_id]
            n = most_workers(free, pools, job, left)
            if n == 0:
                continue
            got = place(free, pools, worker_demand=job.spec.worker_demand.as_array(),
                        ps_demand=job.spec.ps_demand.as_array(), workers=n,
                        ps=job.ps_needed(n))
            if got is not None:
                out[job_id], free = got.alloc, got.free
        return out

    @staticmethod
    def _worth_resizing(job: Job, left: int, now: int, could: int, cost: float) -> bool:
        """True if ``could`` workers (re-placed, losing ``cost`` of a slot) finish ``left``
        planned worker-slots sooner than the ``now`` it runs with: ``left / now`` slots
        against ``cost + left / could``."""
        could = min(could, job.max_workers, left)
        return could > now and cost + left / could < left / now


def _take(free: np.ndarray, job: Job, alloc: Alloc) -> np.ndarray | None:
    """``free`` (servers x resources) less ``alloc`` of ``job``'s workers and PS, or None if
    it does not fit there."""
    got = free - usage_of(alloc, job.spec.worker_demand.as_array(),
                          job.spec.ps_demand.as_array(), free.shape[0])
    return got if bool((got >= -1e-9).all()) else None
