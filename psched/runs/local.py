"""The machine a sweep runs on: the embedded local Ray it starts (:func:`start_local_ray`) and its
cells pinned to one core each (:func:`pinned`)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

__all__ = ["pinned", "start_local_ray"]


def start_local_ray(num_cpus: int | None = None) -> float:
    """Start the embedded local Ray a sweep runs on, lean; return the seconds it took.

    Always a new Ray (``address="local"``), never one another process left running. No
    dashboard, no usage-stats reporting, no driver log forwarding, Ray's own log lines below
    warnings off the terminal, a 200 MB object store; token authentication stays as Ray's
    default (on in Ray 2.60; ``psched sweep`` gives it a private token first). Ray starts
    its workers at niceness 15, which starves them on a machine shared with other work (5x
    slower cells, BENCHMARKS.md section 12), so they start at 0. O(Ray start-up): about 8 s
    on 2 cores.
    """
    import ray

    t0 = time.perf_counter()
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_worker_niceness", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1,
             include_dashboard=False, object_store_memory=200 * 2**20, log_to_driver=False,
             configure_logging=False)
    return time.perf_counter() - t0


@contextlib.contextmanager
def pinned(core: int | None) -> Iterator[None]:
    """Run the block on one CPU: the ``core``-th (modulo) of those this thread may use, its
    affinity restored after; ``None``: unchanged. A sweep on an embedded Ray owns the
    machine and runs at most one cell per CPU, each given its own ``core`` index, so two
    cells never share a core and the kernel does not move them between cores mid-cell (on
    this 2-core machine unpinned pairs of cells ran up to 1.5x slower than pinned pairs,
    BENCHMARKS.md section 12). Where affinity cannot be set, unchanged."""
    if core is None or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    cpus = sorted(before)
    try:
        os.sched_setaffinity(0, {cpus[core % len(cpus)]})
    except OSError:
        yield
        return
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
