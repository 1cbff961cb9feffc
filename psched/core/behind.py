"""Reality behind the plan, in simulation: a start-up cost per (re)start and the churn it
causes.

:class:`StartupExecutor` stands for a real executor on a loaded machine: each worker does
``rate`` worker-slots per slot; a job that did not run in the previous slot (it starts, or
resumes after a suspension) loses ``startup`` of the slot to actor start-up, as a resume
costs on Ray, and one whose allocation changed while it ran (resized, moved) loses
``resize`` of it. :func:`churn` counts, from a run's
allocations, how often each job was suspended (stopped before it finished, to run again)
and resized; :func:`behind_run` runs a policy over it (the scheduler loop, as the live
service runs it).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from psched.core.arrivals import TraceArrivals
from psched.core.executor import SimulatedExecutor, SlotReport
from psched.core.loop import SchedulerLoop
from psched.core.model import Alloc, Cluster, Job, JobSpec, SlotPlan
from psched.core.policy import Policy
from psched.core.records import AllocationRow, RunResult

__all__ = ["Churn", "StartupExecutor", "behind_run", "churn"]


class StartupExecutor(SimulatedExecutor):
    """Progress ``rate x workers`` per slot, less ``startup`` of the slot for a job that did
    not run in the previous slot and ``resize`` for one whose allocation changed."""

    def __init__(self, rate: float, startup: float, resize: float = 0.0) -> None:
        if not (rate > 0 and 0 <= startup <= 1 and 0 <= resize <= 1):
            raise ValueError("need rate > 0 and startup, resize in [0, 1], got "
                             f"{rate}, {startup}, {resize}")
        self.rate = float(rate)
        self.startup = float(startup)
        self.resize = float(resize)
        self._last: dict[str, Alloc] = {}

    def _lost(self, job_id: str, alloc: Alloc) -> float:
        last = self._last.get(job_id)
        return self.startup if last is None else self.resize if last != alloc else 0.0

    def apply(self, t: int, plan: SlotPlan, jobs: Mapping[str, Job]) -> SlotReport:
        now = {j: a for j, a in plan.items() if a.n_workers}
        progress = {j: self.rate * a.n_workers * (1.0 - self._lost(j, a)) for j, a in now.items()}
        self._last = now
        return SlotReport(slot=t, progress=progress)


@dataclass(frozen=True, kw_only=True)
class Churn:
    """Per-run churn: suspensions and resizes summed over jobs, and the worst job's."""

    suspensions: int  #: times a job stopped and later ran again
    resizes: int  #: times a running job's worker placement changed between adjacent slots
    max_suspensions: int  #: of the most suspended job
    jobs: int  #: jobs that ran at all


def churn(allocations: Sequence[AllocationRow]) -> Churn:
    """Count suspensions and resizes from ``allocations.csv`` rows. O(rows log rows)."""
    placed: dict[str, dict[int, set[tuple[int, int]]]] = defaultdict(lambda: defaultdict(set))
    for t, j, h, role, n in allocations:
        if role == "worker" and n:
            placed[j][t].add((h, n))
    sus, res, worst = 0, 0, 0
    for slots in placed.values():
        ts = sorted(slots)
        gaps = sum(b > a + 1 for a, b in itertools.pairwise(ts))
        res += sum(b == a + 1 and slots[a] != slots[b] for a, b in itertools.pairwise(ts))
        sus += gaps
        worst = max(worst, gaps)
    return Churn(suspensions=sus, resizes=res, max_suspensions=worst, jobs=len(placed))


def behind_run(specs: Sequence[JobSpec], cluster: Cluster, policy: Policy, horizon: int, *,
               rate: float, startup: float, resize: float = 0.0, seed: int = 0) -> RunResult:
    """Run ``policy`` over ``specs`` with reality behind (:class:`StartupExecutor`), prices
    from hindsight as :func:`psched.core.simulator.simulate` gives them."""
    loop = SchedulerLoop(cluster=cluster, policy=policy, horizon=horizon,
                         arrivals=TraceArrivals(specs), known_jobs=specs, seed=seed,
                         executor=StartupExecutor(rate, startup, resize))
    return loop.run()
