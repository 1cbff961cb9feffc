"""``oasis-rp`` online (its default) never reads a job before it arrives.

The same trace is run twice, the second time with every job that arrives after slot ``k``
changed (its utility scaled, or the job removed) -- in the arrivals and in the loop's
``known_jobs`` alike, so that a policy reading the trace ahead would see the change. Every
decision made up to slot ``k`` (arrivals and boundaries: admission, hold, promise, schedule)
and every allocation row of slots ``0..k`` must be the same. With
``price_source="hindsight"`` (an oracle that prices from the whole trace) the same check
fails on these traces: the test can tell a policy that reads the future.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from psched.core.arrivals import TraceArrivals
from psched.core.loop import SchedulerLoop
from psched.core.model import JobSpec
from psched.core.records import Admission
from psched.core.utility import Utility
from psched.policies import make_policy
from psched.traces.synth import fig5_instance, oasis_paper_cluster, oasis_paper_jobs

#: how the jobs after slot k are changed
CHANGES: dict[str, Callable[[list[JobSpec]], list[JobSpec]]] = {
    "utility x5": lambda later: [dataclasses.replace(s, utility=dataclasses.replace(
        s.utility, value=5.0 * s.utility.value)) for s in later],
    "removed": lambda later: [],
    "flat": lambda later: [dataclasses.replace(s, utility=Utility(kind="constant",
                                                                   value=s.utility.value))
                           for s in later],
}

History = tuple[list[tuple[object, ...]], list[tuple[int, str, int, str, int]]]


def _run_until(specs: list[JobSpec], cluster: object, horizon: int, k: int,
               **options: object) -> History:
    """Run through slot ``k``; the decisions made (slot <= k) and the allocation rows."""
    decisions: list[tuple[object, ...]] = []

    def keep(a: Admission) -> None:
        decisions.append((a.slot, a.job_id, a.admitted, a.reason, a.promised, a.payoff,
                          sorted(a.schedule.items())))

    loop = SchedulerLoop(cluster=cluster, policy=make_policy("oasis-rp", **options),  # type: ignore[arg-type]
                         horizon=horizon, arrivals=TraceArrivals(specs), known_jobs=specs)
    loop.on_decision.append(keep)
    loop.run(until=k + 1)
    return decisions, list(loop.state.allocations)


def _with_later_changed(specs: list[JobSpec], k: int, change: str) -> list[JobSpec]:
    early = [s for s in specs if s.arrival <= k]
    return early + CHANGES[change]([s for s in specs if s.arrival > k])


def _paper(seed: int) -> tuple[list[JobSpec], object, int]:
    specs, _ = oasis_paper_jobs(150, seed=seed, slots=60)
    return specs, oasis_paper_cluster(seed=seed), 60


def _fig5(seed: int) -> tuple[list[JobSpec], object, int]:
    specs, cluster = fig5_instance(6, seed=seed, priority=(1.0, 100.0))
    return specs, cluster, 10


CASES = [("oasis-paper", _paper, 0, 12), ("oasis-paper", _paper, 1, 25),
         ("fig5", _fig5, 2, 2), ("fig5", _fig5, 4, 3)]


def _ids(case: tuple[str, object, int, int]) -> str:
    return f"{case[0]}-{case[2]}-k{case[3]}"


@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_online_decisions_up_to_slot_k_ignore_every_job_after_it(
        case: tuple[str, Callable[[int], tuple[list[JobSpec], object, int]], int, int],
        change: str) -> None:
    _, make, seed, k = case
    specs, cluster, horizon = make(seed)
    assert any(s.arrival > k for s in specs) and any(s.arrival <= k for s in specs)
    first = _run_until(specs, cluster, horizon, k)
    again = _run_until(_with_later_changed(specs, k, change), cluster, horizon, k)
    assert first[0], "decisions were made up to slot k"
    assert again == first


@pytest.mark.parametrize("case", CASES[:2], ids=_ids)
def test_hindsight_prices_read_the_future_so_the_same_check_fails(
        case: tuple[str, Callable[[int], tuple[list[JobSpec], object, int]], int, int]) -> None:
    _, make, seed, k = case
    specs, cluster, horizon = make(seed)
    first = _run_until(specs, cluster, horizon, k, price_source="hindsight")
    again = _run_until(_with_later_changed(specs, k, "utility x5"), cluster, horizon, k,
                       price_source="hindsight")
    assert again != first
