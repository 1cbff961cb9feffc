"""The one scheduling loop: arrivals -> decisions -> apply plans -> advance -> record.

The same :class:`SchedulerLoop` serves the trace-driven simulator and, later, the live
service. Everything that differs between them is injected:

* :class:`ArrivalSource` -- a trace (:class:`TraceArrivals`) or a queue filled while the loop
  runs (:class:`QueueArrivals`);
* :class:`Clock` -- simulated time (:class:`SimClock`) or a wall clock;
* :class:`~psched.core.executor.Executor` -- modelled or measured progress.

The loop keeps all of its own state in :class:`LoopState`, plain data that a live service can
save and restore. A policy keeps its own state.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from legacy_policies.checker import check_plan, plan_usage
from psched.core.executor import Executor, SimulatedExecutor
from psched.core.model import (
    RESOURCES,
    Cluster,
    Decision,
    Job,
    JobSpec,
    Pool,
    SlotPlan,
    resolve_job,
)
from psched.core.policy import JobStatus, Policy, RunContext, View

__all__ = [
    "REJECT_CANNOT_FIT",
    "REJECT_PAST_HORIZON",
    "AllocationRow",
    "ArrivalSource",
    "Clock",
    "JobRecord",
    "LoopState",
    "QueueArrivals",
    "RunResult",
    "SchedulerLoop",
    "SimClock",
    "TraceArrivals",
    "WallClock",
    "cannot_fit",
    "capacity_slots",
    "simulate",
]

log = logging.getLogger(__name__)

REJECT_PAST_HORIZON = "past_horizon"  #: arrives at or after the horizon
REJECT_CANNOT_FIT = "cannot_fit"  #: one worker (or the PS it needs) fits no server


class ArrivalSource(Protocol):
    """Where jobs come from."""

    def pop(self, t: int) -> list[JobSpec]:
        """Jobs arriving in slot ``t`` (and any earlier one not yet popped), in order."""
        ...

    def pending(self) -> bool:
        """True while more jobs may come."""
        ...


class TraceArrivals:
    """Arrivals replayed from a list of job specs (stably sorted by arrival)."""

    def __init__(self, specs: Iterable[JobSpec]) -> None:
        self._queue = deque(sorted(specs, key=lambda s: s.arrival))

    def pop(self, t: int) -> list[JobSpec]:
        out: list[JobSpec] = []
        while self._queue and self._queue[0].arrival <= t:
            out.append(self._queue.popleft())
        return out

    def pending(self) -> bool:
        return bool(self._queue)


class QueueArrivals:
    """Arrivals pushed while the loop runs (a live service); ``close`` ends the stream."""

    def __init__(self) -> None:
        self._queue: deque[JobSpec] = deque()
        self._closed = False

    def push(self, spec: JobSpec) -> None:
        self._queue.append(spec)

    def close(self) -> None:
        self._closed = True

    def pop(self, t: int) -> list[JobSpec]:
        out = list(self._queue)
        self._queue.clear()
        return out

    def pending(self) -> bool:
        return bool(self._queue) or not self._closed


class Clock(Protocol):
    """When slot ``t`` begins."""

    def wait_until(self, t: int) -> None:
        """Return once slot ``t`` has begun."""
        ...


class SimClock:
    """Simulated time: every slot begins at once."""

    def wait_until(self, t: int) -> None:
        return None


class WallClock:
    """Real time: slot ``t`` begins ``t * slot_seconds`` after ``start`` (``time.time()``)."""

    def __init__(self, slot_seconds: float, start: float | None = None) -> None:
        self.slot_seconds = slot_seconds
        self.start = time.time() if start is None else start

    def slot_now(self) -> int:
        """The slot the wall clock is in now."""
        return int((time.time() - self.start) // self.slot_seconds)

    def wait_until(self, t: int) -> None:
        delay = self.start + t * self.slot_seconds - time.time()
        if delay > 0:
            time.sleep(delay)


@dataclass(kw_only=True)
class JobRecord:
    """Everything the loop learned about one job."""

    job: Job  #: the resolved job
    admitted: bool = False  #: admitted by the policy
    reason: str = ""  #: rejection reason
    payoff: float | None = None  #: the policy's payoff at arrival, if it prices
    done: float = 0.0  #: work done, worker-slots
    first_slot: int | None = None  #: first slot with workers
    completion: int | None = None  #: slot in which the last work was done

    @property
    def duration(self) -> int | None:
        """Slots from arrival through completion, or None if unfinished."""
        return None if self.completion is None else self.completion - self.job.arrival + 1

    @property
    def utility(self) -> float:
        """Utility earned: f(duration) when completed, 0 otherwise."""
        d = self.duration
        return 0.0 if d is None else self.job.utility_at(d)


#: One row of ``allocations.csv``: (slot, job_id, server index, role, count).
AllocationRow = tuple[int, str, int, str, int]


@dataclass(kw_only=True)
class LoopState:
    """All of the loop's own state: plain data, enough to resume."""

    t: int = 0  #: next slot to run
    records: dict[str, JobRecord] = field(default_factory=dict)  #: every job seen, by id
    active: list[str] = field(default_factory=list)  #: admitted, unfinished, arrival order
    completed_last: list[str] = field(default_factory=list)  #: finished in slot t-1
    allocations: list[AllocationRow] = field(default_factory=list)  #: executed schedule
    usage: np.ndarray | None = None  #: pool-summed usage per resource (2 x R), all slots
    decision_ms: list[float] = field(default_factory=list)  #: one entry per decision event
    slots_run: int = 0  #: slots executed


@dataclass(kw_only=True)
class RunResult:
    """The outcome of a run: what the metrics and the output files are computed from."""

    policy: str  #: policy name
    cluster: Cluster  #: the servers
    horizon: int  #: slots 0..horizon-1
    records: dict[str, JobRecord]  #: per job, in arrival order
    allocations: list[AllocationRow]  #: executed schedule
    usage: np.ndarray  #: total usage per pool (worker, ps) and resource over the run
    decision_ms: list[float]  #: one entry per decision event
    report: dict[str, Any]  #: the policy's extra figures
    wall_s: float = 0.0  #: wall time of the run
    #: capacity per pool (worker, ps) and resource summed over slots 0..horizon-1, counting
    #: servers that joined during the run from their slot on; None: ``cluster`` all along
    capacity_slots: np.ndarray | None = None


def capacity_slots(clusters: Sequence[tuple[int, Cluster]], horizon: int) -> np.ndarray:
    """Capacity per pool (rows worker, ps) and resource summed over slots ``0..horizon-1``,
    for a cluster that was ``clusters[i][1]`` from slot ``clusters[i][0]`` on. O(servers)."""
    out = np.zeros((2, len(RESOURCES)))
    for i, (start, cluster) in enumerate(clusters):
        end = clusters[i + 1][0] if i + 1 < len(clusters) else horizon
        span = max(0, min(end, horizon) - min(start, horizon))
        cap = cluster.capacity
        for row, pool in enumerate((Pool.WORKER, Pool.PS)):
            out[row] += cap[cluster.indices(pool)].sum(axis=0) * span
    return out


def cannot_fit(job: Job, cluster: Cluster) -> bool:
    """True if one worker fits no worker server or the PS it needs fit no PS server."""
    cap = cluster.capacity
    spec = job.spec
    w = spec.worker_demand.as_array()
    s = spec.ps_demand.as_array()
    wi, ki = cluster.indices(Pool.WORKER), cluster.indices(Pool.PS)
    fits_w = wi.size > 0 and bool(np.any(np.all(cap[wi] >= w - 1e-9, axis=1)))
    # b <= B, so one worker needs exactly one PS
    fits_ps = ki.size > 0 and bool(np.any(np.all(cap[ki] >= s - 1e-9, axis=1)))
    return not (fits_w and fits_ps)


def _pool_rows(cluster: Cluster) -> np.ndarray:
    """Row of the loop's per-pool usage (0 worker, 1 PS) for every server."""
    return np.array([0 if s.pool == Pool.WORKER else 1 for s in cluster.servers])


class SchedulerLoop:
    """Runs a policy slot by slot over an executor. ``step`` runs one slot."""

    def __init__(
        self,
        *,
        cluster: Cluster,
        policy: Policy,
        horizon: int,
        arrivals: ArrivalSource,
        executor: Executor | None = None,
        clock: Clock | None = None,
        known_jobs: Sequence[JobSpec] = (),
        history_jobs: Sequence[JobSpec] = (),
        max_window: int | None = None,
        seed: int = 0,
        check: bool = True,
        state: LoopState | None = None,
    ) -> None:
        """``state``: resume from a saved :class:`LoopState` (the policy restores its own)."""
        self.cluster = cluster
        self.policy = policy
        self.horizon = horizon
        self.arrivals = arrivals
        self.executor: Executor = executor or SimulatedExecutor()
        self.clock: Clock = clock or SimClock()
        self.max_window = max_window
        self.check = check
        self.state = state or LoopState(usage=np.zeros((2, len(RESOURCES))))
        self._pool_rows = _pool_rows(cluster)
        self._clusters: list[tuple[int, Cluster]] = [(0, cluster)]  # (from slot, cluster)
        ctx = RunContext(
            cluster=cluster,
            horizon=horizon,
            known_jobs=tuple(self.resolve(s) for s in known_jobs),
            history_jobs=tuple(self.resolve(s) for s in history_jobs),
            seed=seed,
        )
        policy.start(ctx)

    def set_cluster(self, cluster: Cluster, at: int | None = None) -> None:
        """Servers joined: ``cluster`` is the current one with servers appended (indices of
        the old servers unchanged), there from slot ``at`` on (default: the current slot;
        utilisation counts each server's capacity from then). The policy must accept it
        through an ``on_cluster_change(cluster)`` method; raises ``ValueError`` if it has none
        or the new cluster does not extend the old one."""
        old = self.cluster.servers
        if cluster.servers[:len(old)] != old:
            raise ValueError("the new cluster must keep the old servers first, in order")
        hook = getattr(self.policy, "on_cluster_change", None)
        if hook is None:
            raise ValueError(f"policy {self.policy.name!r} cannot take new servers while it runs")
        hook(cluster)
        self.cluster = cluster
        self._pool_rows = _pool_rows(cluster)
        self._clusters.append((self.state.t if at is None else at, cluster))

    def resolve(self, spec: JobSpec) -> Job:
        return resolve_job(spec, self.cluster.slot_seconds, self.horizon, self.max_window)

    # -- the loop ---------------------------------------------------------------------------
    def step(self) -> None:
        """Run one slot: arrivals -> decisions -> plan -> check -> apply -> advance -> record."""
        st = self.state
        t = st.t
        self.clock.wait_until(t)
        arrived, arrival_ms = self.admit(t, self.arrivals.pop(t))
        records = st.records
        view = View(
            t=t,
            cluster=self.cluster,
            horizon=self.horizon,
            active={
                j: JobStatus(job=records[j].job, done=records[j].done,
                             first_slot=records[j].first_slot)
                for j in st.active
            },
            arrived=tuple(arrived),
            completed=tuple(st.completed_last),
        )
        t0 = time.perf_counter()
        plan = {j: a for j, a in self.policy.plan(view).items() if a.n_workers or a.n_ps}
        plan_ms = (time.perf_counter() - t0) * 1e3
        if self.policy.commits_on_arrival:
            st.decision_ms.extend(arrival_ms)
        elif view.event:
            st.decision_ms.append(sum(arrival_ms) + plan_ms)
        active_jobs = {j: records[j].job for j in st.active}
        if self.check:
            check_plan(t, plan, self.cluster, active_jobs)
        report = self.executor.apply(t, plan, active_jobs)
        self.record(t, plan, active_jobs)
        self._advance(t, report.progress)
        st.t += 1
        st.slots_run += 1

    def admit(self, t: int, specs: list[JobSpec]) -> tuple[list[str], list[float]]:
        """Screen and decide each arrival in slot ``t`` now (a live service calls it as jobs
        are submitted); return the admitted ids and the decision times in ms."""
        st = self.state
        admitted: list[str] = []
        times: list[float] = []
        for spec in specs:
            if spec.job_id in st.records:
                raise ValueError(f"job id {spec.job_id!r} arrived twice")
            job = self.resolve(spec)
            rec = JobRecord(job=job)
            st.records[spec.job_id] = rec
            if spec.arrival >= self.horizon:
                rec.reason = REJECT_PAST_HORIZON
                continue
            if cannot_fit(job, self.cluster):
                rec.reason = REJECT_CANNOT_FIT
                continue
            view = View(t=t, cluster=self.cluster, horizon=self.horizon, active={})
            t0 = time.perf_counter()
            decision: Decision = self.policy.on_arrival(job, view)
            times.append((time.perf_counter() - t0) * 1e3)
            rec.admitted, rec.payoff = decision.admitted, decision.payoff
            if decision.admitted:
                st.active.append(spec.job_id)
                admitted.append(spec.job_id)
            else:
                rec.reason = decision.reason or "rejected"
        return admitted, times

    def record(self, t: int, plan: SlotPlan, jobs: Mapping[str, Job]) -> None:
        """Record an executed plan of slot ``t`` (a restarted service replays its journal)."""
        st = self.state
        for job_id, alloc in plan.items():
            for h, n in alloc.workers:
                st.allocations.append((t, job_id, h, "worker", n))
            for k, n in alloc.ps:
                st.allocations.append((t, job_id, k, "ps", n))
            rec = st.records[job_id]
            if rec.first_slot is None and alloc.n_workers > 0:
                rec.first_slot = t
        if plan:
            usage = plan_usage(plan, self.cluster, jobs)
            assert st.usage is not None
            np.add.at(st.usage, self._pool_rows, usage)

    def _advance(self, t: int, progress: Mapping[str, float]) -> None:
        st = self.state
        finished: list[str] = []
        for job_id, amount in progress.items():
            rec = st.records[job_id]
            rec.done += amount
            if rec.done >= rec.job.work - 1e-9 and rec.completion is None:
                rec.completion = t
                finished.append(job_id)
        for job_id in finished:
            st.active.remove(job_id)
            self.executor.release(job_id)
        st.completed_last = finished

    def run(self, until: int | None = None,
            on_slot: Callable[[int], None] | None = None) -> RunResult:
        """Run slots until ``until`` (default the horizon), then collect the result."""
        end = self.horizon if until is None else until
        t0 = time.perf_counter()
        while self.state.t < end:
            self.step()
            if on_slot is not None:
                on_slot(self.state.t)
        # jobs that never arrived within the horizon
        for spec in self.arrivals.pop(1 << 62) if end >= self.horizon else []:
            rec = JobRecord(job=self.resolve(spec), reason=REJECT_PAST_HORIZON)
            self.state.records.setdefault(spec.job_id, rec)
        return self.result(wall_s=time.perf_counter() - t0)

    def result(self, wall_s: float = 0.0) -> RunResult:
        st = self.state
        assert st.usage is not None
        records = dict(sorted(st.records.items(), key=lambda kv: kv[1].job.arrival))
        return RunResult(
            policy=self.policy.name,
            cluster=self.cluster,
            horizon=self.horizon,
            records=records,
            allocations=st.allocations,
            usage=st.usage.copy(),
            decision_ms=list(st.decision_ms),
            report=dict(self.policy.report()),
            wall_s=wall_s,
            capacity_slots=capacity_slots(self._clusters, self.horizon),
        )


def simulate(
    specs: Sequence[JobSpec],
    cluster: Cluster,
    policy: Policy,
    horizon: int,
    *,
    hindsight: bool = True,
    history: Sequence[JobSpec] = (),
    max_window: int | None = None,
    seed: int = 0,
    check: bool = True,
    on_slot: Callable[[int], None] | None = None,
) -> RunResult:
    """Replay ``specs`` through ``policy`` on the simulated executor for ``horizon`` slots."""
    loop = SchedulerLoop(
        cluster=cluster,
        policy=policy,
        horizon=horizon,
        arrivals=TraceArrivals(specs),
        known_jobs=specs if hindsight else (),
        history_jobs=history,
        max_window=max_window,
        seed=seed,
        check=check,
    )
    return loop.run(on_slot=on_slot)
