"""Sweeps: policies x seeds x load factors x cluster sizes, one cell per Ray task.

A cell loads the trace (mapping seed = the cell's seed; every seed of a ``native`` trace runs
the same jobs, mapped once per sweep: :func:`jobs_key`), scales arrival times by ``1 / load``
(load 2 = jobs arrive twice as densely), sizes the cluster as ``scale`` times the default
cluster of the unscaled trace (so every load runs on the same servers), and simulates one
policy. Each finished cell is written at once to ``OUT/cells/<key>.json`` (atomically); a rerun
with the same sweep skips the cells already there (resumable), and ``OUT/results.csv`` plus
``OUT/sweep_utility.png`` are rebuilt from all cells at the end.

Ray: an embedded local Ray by default (started here, stopped at the end), an existing cluster
with ``address``, or the Ray this process is already connected to. The embedded Ray is always
a new one (``address="local"``), never a Ray some other process left running on the machine;
while it starts, the cell estimated longest (:mod:`psched.runs.sweep_order`) runs in a child the
driver forks, which hands the jobs it mapped back to the driver to ship, and the driver maps
the other jobs; the other cells go to Ray longest first.
``parallel=False`` runs the cells one after another in this process (the baseline of the
speed-up figure).
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import pickle
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from psched.core.errors import InputError
from psched.core.model import JobSpec
from psched.runs.local import pinned, start_local_ray
from psched.runs.sweep_cell import SweepCell
from psched.runs.sweep_order import CellCosts, next_cell, seed_order
from psched.runs.sweep_spec import (
    SweepSpec,
    cells_of,
    check_spec,
    jobs_key,
    plot_utility,
    results_csv,
    seeds_share_jobs,
)
from psched.traces.native import atomic_write_text

__all__ = ["load_cell_jobs", "run_cell", "run_sweep"]

log = logging.getLogger(__name__)


def load_cell_jobs(spec: SweepSpec, seed: int) -> list[JobSpec]:
    """The jobs every cell of ``seed`` runs: the trace mapped with that seed, first ``jobs``.

    Raises
    ------
    InputError
        Bad trace, or no jobs.
    """
    from psched.traces.detect import load_any

    paths = spec.trace[0] if len(spec.trace) == 1 else list(spec.trace)
    with _gc_paused():
        base = load_any(paths, spec.fmt, slot_seconds=spec.slot_seconds, seed=seed)
    if spec.jobs is not None:
        base = base[: spec.jobs]
    if not base:
        raise InputError("the trace has no jobs", path=", ".join(spec.trace))
    return base


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, its state restored after.

    Mapping or unpickling a seed's jobs builds ~4 tracked objects per job and no cycles, yet
    each allocation burst triggers collections that traverse every object built so far:
    unpickling 80,000 jobs took 1.5-1.8 CPU s with the collector on and 0.35-0.5 s with it off,
    mapping them 4.7 s against 3.3 s (measured on 2026-12-02). The collector is
    process-wide, so it stays off for other threads of the process meanwhile (seconds)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def run_cell(spec: SweepSpec, cell: SweepCell,
             jobs: Sequence[JobSpec] | None = None) -> dict[str, Any]:
    """Simulate one cell; return its ``results.csv`` row. Pure: the same cell, the same row
    (except ``wall_s`` and ``cpu_s``, the CPU seconds of the thread that ran it). ``jobs``:
    :func:`load_cell_jobs` of the cell's seed, when the caller has it already (a sweep loads
    each seed once; on Ray the jobs travel in the object store, so no node needs the trace
    file). O(one simulation)."""
    from psched.core.horizon import trace_horizon
    from psched.core.model import Cluster, Pool
    from psched.core.simulator import simulate
    from psched.policies import make_policy
    from psched.results.metrics import summarize
    from psched.traces.clusters import default_cluster_for_trace
    from psched.traces.detect import scale_arrivals

    t0, c0 = time.perf_counter(), time.thread_time()
    base = list(jobs) if jobs is not None else load_cell_jobs(spec, cell.seed)
    sized = default_cluster_for_trace(base, slot_seconds=spec.slot_seconds, load=1.0)
    n = max(1, round(len(sized.indices(Pool.WORKER)) * cell.scale))
    workers = [s for s in sized.servers if s.pool is Pool.WORKER][:1] * n
    ps = [s for s in sized.servers if s.pool is Pool.PS][:1] * n
    cluster = Cluster(
        servers=tuple([replace(s, server_id=f"w{i:03d}") for i, s in enumerate(workers)]
                      + [replace(s, server_id=f"p{i:03d}") for i, s in enumerate(ps)]),
        slot_seconds=spec.slot_seconds)
    specs = scale_arrivals(base, 1.0 / cell.load) if cell.load != 1.0 else base
    horizon = trace_horizon(specs, spec.slot_seconds, spec.max_window)
    policy = make_policy(cell.policy, **spec.options_of(cell.policy))
    result = simulate(specs, cluster, policy, horizon, seed=cell.seed,
                      max_window=spec.max_window, check=spec.check,
                      executor=spec.reality.executor())
    s = summarize(result)
    gpu = s["utilization"].get("worker", {}).get("gpu")
    return {"policy": cell.policy, "seed": cell.seed, "load": cell.load, "scale": cell.scale,
            "jobs": len(specs), "horizon": horizon, "worker_servers": n,
            "total_utility": s["total_utility"], "admitted": s["admitted"],
            "rejected": s["rejected"], "completed": s["completed"],
            "unfinished": s["unfinished"], "jct_mean": s["jct_mean"], "gpu_util": gpu,
            **{k: s[k] for k in ("promised", "kept", "restated", "missed", "wasted_ws",
                                 "background_ws")},
            "wall_s": time.perf_counter() - t0, "cpu_s": time.thread_time() - c0}


def run_sweep(spec: SweepSpec, out: str | os.PathLike[str], *, parallel: bool = True,
              address: str | None = None, num_cpus: int | None = None,
              cpus_per_cell: float = 1.0,
              on_cell: Callable[[dict[str, Any]], None] | None = None,
              timings: dict[str, float] | None = None,
              pin_cores: bool = True, ship_jobs: bool | None = None) -> list[dict[str, Any]]:
    """Run every cell of ``spec`` not yet in ``out``; write the table and the plot.

    Parameters
    ----------
    spec : SweepSpec
        The sweep.
    out : path-like
        Results folder: ``sweep.json`` (the spec), ``cells/*.json``, ``results.csv``,
        ``sweep_utility.png``.
    parallel : bool
        Run cells as Ray tasks (default); False: one after another in this process.
    address : str, optional
        An existing Ray cluster (``ray.init(address=...)``); default: the Ray this process
        is connected to, else an embedded local Ray with ``num_cpus`` CPUs.
    cpus_per_cell : float
        Ray CPUs each cell's task asks for (a fraction packs more cells per core).
    on_cell : callable, optional
        Called with each finished cell's row (progress).
    timings : dict, optional
        Filled with wall seconds: ``ray_start_s`` and ``ray_stop_s`` (only when this call
        started Ray or connected to ``address``; while Ray stops, the table and the plot are
        written), ``cells_s`` (what is left of loading the jobs, shipping them and running
        every cell, on Ray or serially).
    pin_cores : bool
        On the embedded Ray this call starts, run each cell pinned to its own core
        (:func:`pinned`); ignored on an existing cluster.
    ship_jobs : bool, optional
        True: the driver maps each seed's jobs (each :func:`jobs_key` once) and ships them
        to the workers through the object store (no node but the driver reads the trace);
        False: each Ray worker maps the seeds it meets from the trace file itself, once per
        worker and key (no pickling, no fetch; every node must read the trace at the same
        path). Default: True on an existing cluster; on the embedded Ray this call starts
        (one machine), the jobs the forked cell mapped and those the driver began mapping
        while Ray started are shipped, the workers map the others.

    Returns
    -------
    list of dict
        Every cell's row (finished before and now), in :func:`cells_of` order.

    Raises
    ------
    InputError
        Bad axes, or ``out`` holding a different sweep.
    """
    check_spec(spec)
    root = Path(out)
    (root / "cells").mkdir(parents=True, exist_ok=True)
    marker = root / "sweep.json"
    record = {"digest": spec.digest(), "spec": asdict(spec)}
    if marker.exists():
        old = json.loads(marker.read_text(encoding="utf-8"))
        if old.get("digest") != record["digest"]:
            raise InputError("this folder holds a different sweep (see its sweep.json); use "
                             "another --out", path=str(marker), field="out")
    else:
        atomic_write_text(marker, json.dumps(record, indent=2) + "\n")
    cells = cells_of(spec)
    todo = [c for c in cells if not (root / "cells" / f"{c.key}.json").exists()]
    log.info("sweep: %d cells, %d already done", len(cells), len(cells) - len(todo))

    def save(row: dict[str, Any]) -> None:
        key = SweepCell(policy=row["policy"], seed=row["seed"], load=row["load"],
                        scale=row["scale"]).key
        atomic_write_text(root / "cells" / f"{key}.json", json.dumps(row) + "\n")
        if on_cell is not None:
            on_cell(row)

    def finish() -> list[dict[str, Any]]:
        rows = [json.loads((root / "cells" / f"{c.key}.json").read_text(encoding="utf-8"))
                for c in cells]
        atomic_write_text(root / "results.csv", results_csv(rows))
        plot_utility(rows, root / "sweep_utility.png")
        return rows

    if todo and parallel:
        return _run_on_ray(spec, todo, save, address, num_cpus, cpus_per_cell, timings,
                           pin_cores, finish, ship_jobs)
    t0 = time.perf_counter()
    loaded: dict[int | None, list[JobSpec]] = {}
    shared = seeds_share_jobs(spec)
    for cell in todo:
        key = jobs_key(spec, cell.seed, shared)
        if key not in loaded:  # each key's jobs are loaded once
            loaded[key] = load_cell_jobs(spec, cell.seed)
        save(run_cell(spec, cell, loaded[key]))
    if timings is not None:
        timings["cells_s"] = time.perf_counter() - t0
    return finish()


def _run_on_ray(spec: SweepSpec, todo: Sequence[SweepCell], save: Callable[[dict[str, Any]],
                None], address: str | None, num_cpus: int | None, cpus_per_cell: float,
                timings: dict[str, float] | None, pin_cores: bool,
                finish: Callable[[], list[dict[str, Any]]],
                ship_jobs: bool | None = None) -> list[dict[str, Any]]:
    """Run ``todo`` as Ray tasks, saving each row as it comes back; return ``finish()``
    (the table and the plot), run in a thread while Ray stops when this call started Ray.

    Shipped (``ship_jobs``, default on an existing cluster), each seed's jobs are mapped once
    (once for all seeds sharing a :func:`jobs_key`), in a thread of this process (in the
    order their first cell starts, :func:`psched.runs.sweep_order.seed_order`), and go through the
    object store: no node but this one reads the trace. Not shipped, each worker maps the
    seeds it meets itself, and this process maps none. When this call starts the embedded
    Ray, ``ray.init`` mostly waits on Ray's own processes, so meanwhile the cell estimated
    longest runs in a child forked from this process (:func:`_start_driver_cell`; its row's
    ``ray_node`` is ``"driver"``), which hands back the jobs it maps for itself, pickled
    (shipped as they are: this process does not map that key), and, by default, a thread of
    this process maps the other keys in that order: those it has begun when Ray is up are
    shipped, the workers map the rest (mapping a seed costs ~8x unpickling it, so a seed
    mapped on a core Ray's start-up leaves idle is cheaper shipped).
    """
    from concurrent.futures import Future, ThreadPoolExecutor

    import ray

    times = timings if timings is not None else {}
    embedded = not ray.is_initialized() and not address
    ship = ship_jobs is not False  # None: ship what is mapped when Ray is up (embedded)
    costs = CellCosts(spec.jobs or 1)
    todo = list(todo)
    shared = seeds_share_jobs(spec)
    with contextlib.ExitStack() as stack:
        local = None
        by_key: dict[int | None, Future[Any]] = {}  # jobs key -> its future jobs
        if embedded and len(todo) > 1:
            # before any thread of ours starts: the driver's cell may run in a forked child,
            # which hands over the jobs it maps for itself
            first = next_cell(todo, costs, {})
            local, handed = _start_driver_cell(stack, spec, first, 0 if pin_cores else None,
                                               hand_jobs=ship)
            if handed is not None:
                by_key[jobs_key(spec, first.seed, shared)] = handed
        loader = stack.enter_context(ThreadPoolExecutor(max_workers=1))
        # each key's jobs mapped once, in the order their first Ray cell would start
        loading: dict[int, Future[Any]] = {}
        for seed in seed_order(todo, costs) if ship else ():
            key = jobs_key(spec, seed, shared)
            if key not in by_key:
                by_key[key] = loader.submit(load_cell_jobs, spec, seed)
            loading[seed] = by_key[key]
        started = not ray.is_initialized()
        finishing: Future[list[dict[str, Any]]] | None = None
        try:
            if started:
                t0 = time.perf_counter()
                if address:
                    ray.init(address=address, log_to_driver=False, configure_logging=False)
                else:
                    start_local_ray(num_cpus)
                times["ray_start_s"] = time.perf_counter() - t0
            if embedded and ship_jobs is None:  # the workers map the seeds not begun yet
                loading = {s: f for s, f in loading.items() if not f.cancel()}
            t0 = time.perf_counter()
            _drain(spec, todo, loading, save, cpus_per_cell, local,
                   pin=embedded and pin_cores, costs=costs)
            times["cells_s"] = time.perf_counter() - t0
            if started:  # write the table and the plot while Ray stops (mostly waiting)
                finishing = stack.enter_context(ThreadPoolExecutor(max_workers=1)).submit(finish)
        finally:
            if started:
                t0 = time.perf_counter()
                ray.shutdown()
                times["ray_stop_s"] = time.perf_counter() - t0
    return finishing.result() if finishing is not None else finish()


def _start_driver_cell(stack: contextlib.ExitStack, spec: SweepSpec, cell: SweepCell,
                       core: int | None, *, hand_jobs: bool = False) -> tuple[Any, Any]:
    """Start the driver's own cell (while Ray starts); return its future row and, with
    ``hand_jobs``, a future of the jobs the child mapped for it, pickled (else None).

    It runs in a child process forked now, before this process starts any thread (the jobs
    loader, Ray's): a thread of this process would share the interpreter lock with mapping
    and shipping every seed's jobs and with ``ray.init``, which made the driver's cell the
    slowest of a sweep (measured on 2026-12-02). The child maps its seed's jobs
    itself and, with ``hand_jobs``, writes them pickled into a pipe before its simulation
    starts; a thread of this process reads them (to the end, always, so the child never
    blocks on a full pipe), so this process ships them to Ray without mapping them again
    (mapping 30,000 of 80,000 jobs: ~3.2 CPU s; pickling them ~0.4). Where ``fork`` is not
    available, a thread of this process, and no jobs handed.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    if "fork" not in multiprocessing.get_all_start_methods():  # pragma: no cover - Windows
        pool = stack.enter_context(ThreadPoolExecutor(max_workers=1))
        return pool.submit(_driver_cell, spec, cell, None, core), None
    procs = stack.enter_context(
        ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork")))
    if not hand_jobs:
        return procs.submit(_driver_cell, spec, cell, None, core), None
    read_fd, write_fd = os.pipe()
    try:
        row = procs.submit(_driver_cell, spec, cell, None, core, write_fd)  # forks now
    finally:
        os.close(write_fd)  # the child holds its own copy; EOF comes when it closes that
    reader = stack.enter_context(ThreadPoolExecutor(max_workers=1))
    return row, reader.submit(_read_all, read_fd)


def _read_all(fd: int) -> bytes:
    """Everything written into pipe ``fd`` until its writer closes it; closes ``fd``."""
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def _driver_cell(spec: SweepSpec, cell: SweepCell, jobs: Any = None,
                 core: int | None = None, jobs_fd: int | None = None) -> dict[str, Any]:
    """The driver's own cell: its row, ``ray_node`` ``"driver"``. ``jobs``: a future of the
    seed's jobs, or None to map them here; ``jobs_fd``: a pipe to write the jobs mapped here
    into, pickled, before the simulation (closed either way)."""
    try:
        base = jobs.result() if jobs is not None else load_cell_jobs(spec, cell.seed)
        if jobs_fd is not None:
            with os.fdopen(jobs_fd, "wb") as fh:
                jobs_fd = None
                fh.write(pickle.dumps(base, protocol=pickle.HIGHEST_PROTOCOL))
    finally:
        if jobs_fd is not None:
            os.close(jobs_fd)
    start = time.time()
    with pinned(core):
        row = run_cell(spec, cell, base)
    row.update(ray_node="driver", start_unix_s=start, end_unix_s=time.time())
    return row


def _drain(spec: SweepSpec, todo: Sequence[SweepCell], loading: dict[int, Any],
           save: Callable[[dict[str, Any]], None], cpus_per_cell: float,
           local: Any, *, pin: bool = False, costs: CellCosts | None = None) -> None:
    """Run ``todo`` on Ray, never more cells at once than the cluster has CPUs for, and save
    rows as they come back (and the driver's own cell, ``local``, once done).

    Cells are handed out one at a time as a place frees, not queued all at once: while the
    driver runs its own cell (embedded Ray: the driver shares the machine), Ray gets one cell
    fewer, so no core ever runs two cells (on 2 cores three cells at once made every cell
    ~1.3x slower). The next cell is the longest by ``costs``' estimate (default: a fresh
    :class:`~psched.runs.sweep_order.CellCosts`), refined as cells finish
    (:func:`psched.runs.sweep_order.next_cell`). ``pin`` (an embedded Ray: one machine): each
    running cell gets its own core index, the driver's cell index 0 (:func:`pinned`).
    A seed in ``loading`` (a future of its jobs, mapped here, or pickled: ``bytes``) goes
    through the object store, once per future (seeds sharing their jobs share the future);
    a worker maps a seed not in it itself.
    """
    import ray

    task = ray.remote(num_cpus=cpus_per_cell, max_retries=0,
                      scheduling_strategy="SPREAD")(_cell_task)
    cpus = float(ray.cluster_resources().get("CPU", 1.0))  # type: ignore[no-untyped-call]
    places = max(1, int(cpus // cpus_per_cell)) if cpus_per_cell > 0 else len(todo)
    refs: dict[Any, Any] = {}  # a future in loading -> the ref of its jobs
    # a worker that maps a seed itself reads the trace by absolute path (its cwd may differ)
    mapping_spec = replace(spec, trace=tuple(str(Path(p).resolve()) for p in spec.trace))
    queue = list(todo)
    costs = costs if costs is not None else CellCosts(spec.jobs or 1)
    pending: dict[Any, SweepCell] = {}
    cores: dict[Any, int] = {}  # running task -> its core index (pin)

    def done(row: dict[str, Any]) -> None:
        costs.observe(SweepCell(policy=row["policy"], seed=row["seed"], load=row["load"],
                                scale=row["scale"]), float(row["wall_s"]))
        save(row)

    freed: int | None = None  # seed of the Ray cell that finished last
    while queue or pending or local is not None:
        while queue and len(pending) + (local is not None) < places:
            cell = next_cell(queue, costs, loading, freed)
            freed = None
            ship = cell.seed in loading
            if ship and loading[cell.seed] not in refs:
                # the ref travels inside a list, so a worker that already holds those jobs
                # does not fetch and unpickle them again
                refs[loading[cell.seed]] = ray.put(loading[cell.seed].result())
            core = None
            if pin:
                busy = set(cores.values()) | ({0} if local is not None else set())
                core = min(set(range(places + 1)) - busy)
            ref = (task.remote(spec, cell, [refs[loading[cell.seed]]], core) if ship
                   else task.remote(mapping_spec, cell, None, core))
            pending[ref] = cell
            if core is not None:
                cores[ref] = core
        if local is not None and local.done():
            done(local.result())
            local = None
            continue
        if not pending:
            local.result()  # only the driver's cell is left: wait for it
            continue
        ready, _ = ray.wait(list(pending), num_returns=1,
                            timeout=None if local is None else 0.2)
        for ref in ready:
            freed = pending.pop(ref).seed
            cores.pop(ref, None)
            done(ray.get(ref))


#: Jobs a Ray worker process already holds, by object id (the last few seeds it ran).
_WORKER_JOBS: dict[str, list[JobSpec]] = {}


def _cell_task(spec: SweepSpec, cell: SweepCell, jobs_ref: list[Any] | None,
               core: int | None = None) -> dict[str, Any]:
    """A cell as a Ray task: its row plus ``ray_node``, the node that ran it, and when the
    simulation started and ended (``start_unix_s``, ``end_unix_s``). ``jobs_ref``:
    a one-element list holding the ObjectRef of the cell's jobs (a list, or pickled:
    ``bytes``; fetched once per worker), or None: the worker maps the seed's jobs from the
    trace itself, once per worker (once for every seed of a native trace, :func:`jobs_key`);
    ``core``: the cell runs pinned to that core index (:func:`pinned`), None: unpinned."""
    import ray

    key = jobs_ref[0].hex() if jobs_ref else f"{spec.digest()}/{jobs_key(spec, cell.seed)}"
    if key not in _WORKER_JOBS:
        while len(_WORKER_JOBS) >= 4:
            _WORKER_JOBS.pop(next(iter(_WORKER_JOBS)))
        if jobs_ref:
            with _gc_paused():  # unpickling 80,000 jobs: 1.5-1.8 CPU s with the GC, 0.4 without
                got = ray.get(jobs_ref[0])
                _WORKER_JOBS[key] = pickle.loads(got) if isinstance(got, bytes) else got
        else:
            _WORKER_JOBS[key] = load_cell_jobs(spec, cell.seed)
    start = time.time()
    with pinned(core):
        row = run_cell(spec, cell, _WORKER_JOBS[key])
    row.update(ray_node=ray.get_runtime_context().get_node_id(), start_unix_s=start,
               end_unix_s=time.time())
    return row


