"""Reality behind the plan, in simulation: the churn it causes.

:func:`churn` counts, from a run's allocations, how often each job was suspended (stopped
before it finished, to run again) and resized; :func:`behind_run` runs a policy over a
:class:`~psched.core.reality.Reality` (the scheduler loop, as the live service runs it, on a
:class:`~psched.core.reality.RealityExecutor`: each resume or resize costs start-up).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from psched.core.arrivals import TraceArrivals
from psched.core.loop import SchedulerLoop
from psched.core.model import Cluster, JobSpec
from psched.core.policy import Policy
from psched.core.reality import Reality
from psched.core.records import AllocationRow, RunResult

__all__ = ["Churn", "behind_run", "churn"]


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
               reality: Reality, seed: int = 0) -> RunResult:
    """Run ``policy`` over ``specs`` under ``reality`` (:meth:`Reality.executor`), prices
    from hindsight as :func:`psched.core.simulator.simulate` gives them."""
    loop = SchedulerLoop(cluster=cluster, policy=policy, horizon=horizon,
                         arrivals=TraceArrivals(specs), known_jobs=specs, seed=seed,
                         executor=reality.executor())
    return loop.run()
