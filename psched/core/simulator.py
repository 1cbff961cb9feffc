"""The trace-driven simulator: :func:`simulate` runs one policy over a trace on the one
scheduling loop (:class:`~psched.core.loop.SchedulerLoop`) with simulated time and progress."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator, Sequence

from psched.core.arrivals import TraceArrivals
from psched.core.executor import Executor
from psched.core.loop import SchedulerLoop
from psched.core.model import Cluster, JobSpec
from psched.core.policy import Policy
from psched.core.records import RunResult

__all__ = ["simulate"]


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
    executor: Executor | None = None,
) -> RunResult:
    """Replay ``specs`` through ``policy`` on the simulated executor for ``horizon`` slots.

    ``executor``: how progress is made (default the model,
    :class:`~psched.core.executor.SimulatedExecutor`; a
    :class:`~psched.core.reality.RealityExecutor` for a reality off the model).

    The objects alive when the run starts (the trace's jobs, the cluster: long-lived, never
    garbage during the run) are moved out of the cyclic collector's reach for the run
    (``gc.freeze``, undone at the end; skipped if the caller froze objects itself): a full
    collection then rescans only what the run allocated, instead of pausing one decision for
    tens of milliseconds per 100k trace objects."""
    with _frozen_heap():
        return _simulate(specs, cluster, policy, horizon, hindsight=hindsight, history=history,
                         max_window=max_window, seed=seed, check=check, on_slot=on_slot,
                         executor=executor)


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """``gc.freeze()`` for the block, unless something is frozen already."""
    mine = gc.get_freeze_count() == 0
    if mine:
        gc.freeze()
    try:
        yield
    finally:
        if mine:
            gc.unfreeze()


def _simulate(specs: Sequence[JobSpec], cluster: Cluster, policy: Policy, horizon: int, *,
              hindsight: bool, history: Sequence[JobSpec], max_window: int | None, seed: int,
              check: bool, on_slot: Callable[[int], None] | None,
              executor: Executor | None) -> RunResult:
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
        executor=executor,
    )
    return loop.run(on_slot=on_slot)
