"""What the scheduling loop records: one :class:`JobRecord` per job, the loop's whole state
(:class:`LoopState`, plain data a live service saves and restores), the result of a run, the
:class:`Admission` of each decision, and the reasons a job is rejected before any policy sees it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from psched.core.arrivals import (  # noqa: F401
    ArrivalSource,
    Clock,
    QueueArrivals,
    SimClock,
    TraceArrivals,
    WallClock,
)
from psched.core.eta import Eta
from psched.core.executor import SlotReport
from psched.core.model import (
    RESOURCES,
    Alloc,
    Cluster,
    Job,
    JobSpec,
    Pool,
    SlotPlan,
)
from psched.core.policy import JobStatus

__all__ = [
    "HELD",
    "REJECT_CANNOT_FIT",
    "REJECT_PAST_HORIZON",
    "ActiveStatuses",
    "Admission",
    "AfterSlot",
    "AllocationRow",
    "BeforeSlot",
    "JobRecord",
    "LoopState",
    "RunResult",
    "cannot_fit",
    "capacity_slots",
    "pool_rows",
]


REJECT_PAST_HORIZON = "past_horizon"  #: arrives at or after the horizon


REJECT_CANNOT_FIT = "cannot_fit"  #: one worker (or the PS it needs) fits no server


#: Held for deferred admission (``Decision.hold``): not admitted yet, not rejected yet. The
#: record's reason while held; when the window closes (or the run ends) unadmitted, the
#: reason becomes the one the policy gave when it held the job.
HELD = "held"


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
    promised: int | None = None  #: completion slot promised, if the policy promises
    #: slot the promise was made in: the admission's, or a later one (a deferred promise)
    promised_at: int | None = None
    #: slot of the admission decision: the arrival slot, a later one for a deferred admission,
    #: the slot a held job's window closed (or the run ended) if it never was; None while held
    decided: int | None = None
    #: each re-statement of the promise: (slot it was made at, the promise before, the new
    #: one); ``promised`` is the latest. A re-statement made after the slot it replaced is a
    #: broken promise all the same (:attr:`promise_kept`)
    restated: list[tuple[int, int, int]] = field(default_factory=list)
    #: worker-slots it ran on capacity no plan used, after its policy left it (past its
    #: window, or a re-plan that found it no payoff): never dropped, counted apart
    background: float = 0.0
    #: its measured speed against the model (1.0: as profiled) and the estimate's standard
    #: deviation, as the loop last estimated them (:mod:`psched.core.speed`)
    speed: float = 1.0
    speed_sd: float = 0.0

    @property
    def first_promise(self) -> int | None:
        """The promise first made (before any re-statement), or None."""
        return self.restated[0][1] if self.restated else self.promised

    @property
    def promise_kept(self) -> bool | None:
        """None without a promise; else True when it completed by its latest promise and
        every re-statement came no later than the slot it replaced (said before it was
        missed). A job still running past its promise has not kept it."""
        if self.promised is None:
            return None
        if any(at > old for at, old, _ in self.restated):
            return False
        return self.completion is not None and self.completion <= self.promised

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
    booked: list[JobSpec] = field(default_factory=list)  #: to be decided in a later slot
    arrived: list[str] = field(default_factory=list)  #: admitted since the last plan
    event_ms: list[float] = field(default_factory=list)  #: their decision times (re-planners)
    #: held for deferred admission, in arrival order: job id -> reason if never admitted
    held: dict[str, str] = field(default_factory=dict)


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
    #: the jobs unfinished when the run ended (held, or admitted and not completed): when
    #: each is expected to start and finish under the plans then, and why it waits
    etas: dict[str, Eta] = field(default_factory=dict)


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


def pool_rows(cluster: Cluster) -> np.ndarray:
    """Row of the loop's per-pool usage (0 worker, 1 PS) for every server."""
    return np.array([0 if s.pool == Pool.WORKER else 1 for s in cluster.servers])


@dataclass(frozen=True, kw_only=True)
class Admission:
    """The loop's answer to one arrival (or re-plan): what the owner of the loop journals."""

    job_id: str  #: the job
    slot: int  #: the slot the decision was made for
    admitted: bool  #: admitted (or, for a re-plan, a new schedule found)
    reason: str = ""  #: why not: a screening reason or the policy's
    payoff: float | None = None  #: the policy's payoff, if it prices
    work: int = 0  #: worker-slots decided for (the remaining work of a re-plan)
    #: the committed schedule by slot (policies that commit on arrival), else empty
    schedule: Mapping[int, Alloc] = field(default_factory=dict)
    latency_ms: float | None = None  #: the policy's decision time; None if screened out
    promised: int | None = None  #: the completion slot promised on admission, if any
    #: a promise made now to a job admitted earlier without one (not a new admission)
    deferred_promise: bool = False
    #: the promise stated to the user: ``promised`` plus the slack its speed's uncertainty
    #: needs (:meth:`psched.core.keeping.Keeping.state_promise`); None without a promise
    stated: int | None = None
    #: the speed against its profile the job was decided at (its workload's prior)
    planned_speed: float = 1.0
    #: a re-decision of a job whose committed schedule ended before it finished
    #: (:meth:`psched.core.keeping.Keeping.behind`); not admitted: it runs in the background
    behind: bool = False


#: A before-slot hook: called with slot ``t`` once it has begun, before its arrivals.
BeforeSlot = Callable[[int], None]


#: An after-slot hook: called with the slot, its executed plan and the executor's report,
#: once the loop recorded the slot.
AfterSlot = Callable[[int, SlotPlan, SlotReport], None]


class ActiveStatuses:
    """The ``View.active`` mapping, kept between slots: a job's :class:`JobStatus` is rebuilt
    only when the loop touched its record (it ran or made progress) or it is new; finished
    jobs leave. Each slot then costs O(jobs touched) plus a C-level copy and key comparison of
    the active list, instead of one object per active job. Any mismatch with the loop's
    state (a restored state, jobs dropped or re-admitted) rebuilds it from the records."""

    def __init__(self) -> None:
        self._state: LoopState | None = None
        self._by_job: dict[str, JobStatus] = {}  # in the order of ``state.active``
        self._touched: set[str] = set()

    def touch(self, *job_sets: Iterable[str]) -> None:
        """Jobs whose records the slot changed."""
        for jobs in job_sets:
            self._touched.update(jobs)

    def of(self, st: LoopState) -> dict[str, JobStatus]:
        """A fresh dict of every active job's status, in arrival order."""
        records, cache = st.records, self._by_job
        if self._state is not st:
            self._state, cache = st, {}
        else:
            for j in self._touched:
                if j in cache:
                    cache[j] = _status(records[j])
            for j in st.completed_last:
                cache.pop(j, None)
            for j in st.active[len(cache):]:
                cache[j] = _status(records[j])
        self._touched = set()
        if list(cache) != st.active:
            cache = {j: _status(records[j]) for j in st.active}
        self._by_job = cache
        return dict(cache)


def _status(rec: JobRecord) -> JobStatus:
    return JobStatus(job=rec.job, done=rec.done, first_slot=rec.first_slot, speed=rec.speed)
