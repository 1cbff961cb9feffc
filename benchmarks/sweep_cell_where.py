"""Where one sweep cell runs slower: the same cell's CPU and wall seconds, interleaved, in
this process, in a thread of it while it maps and ships other seeds (the sweep's driver cell
before session 8), in a child forked while it does so (the driver cell now), in a plain
subprocess, and in a Ray worker; then what mapping and unpickling a seed's jobs cost with
Python's cyclic garbage collector on and off.

    python benchmarks/sweep_cell_where.py --philly 80000 --jobs 10000 --policy srtf --reps 3

Each line: mode, the cell's thread CPU s, its process's CPU s, wall s, voluntary context
switches of the cell's thread (waits: for the interpreter lock in a thread of a busy
process), OS threads and Python threads of the process, ``OMP_NUM_THREADS``. Every cell is
pinned to the last core. The machine is shared: compare modes within one run.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import os
import pickle
import resource
import tempfile
import threading
import time
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

from psched.sweep import SweepCell, SweepSpec, load_cell_jobs, run_cell, start_local_ray


def probe(spec: SweepSpec, cell: SweepCell, jobs: Any) -> dict[str, Any]:
    """Run ``cell`` on ``jobs`` pinned to the last core; its CPU, wall and waits."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {max(before)})
    r0 = resource.getrusage(resource.RUSAGE_THREAD)
    p0, t0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
    row = run_cell(spec, cell, jobs)
    p1, t1, w1 = time.process_time(), time.thread_time(), time.perf_counter()
    r1 = resource.getrusage(resource.RUSAGE_THREAD)
    os.sched_setaffinity(0, before)
    return {"thread_cpu_s": round(t1 - t0, 2), "process_cpu_s": round(p1 - p0, 2),
            "wall_s": round(w1 - w0, 2), "waits": r1.ru_nvcsw - r0.ru_nvcsw,
            "os_threads": len(os.listdir("/proc/self/task")),
            "py_threads": threading.active_count(), "omp": os.environ.get("OMP_NUM_THREADS"),
            "utility": row["total_utility"]}


def _beside_loading(spec: SweepSpec, cell: SweepCell, jobs: Any, pool: Executor) -> dict:
    """The cell in ``pool`` while this thread maps and ships two other seeds."""
    import ray

    with pool:
        fut = pool.submit(probe, spec, cell, jobs)
        for seed in (1, 2):
            ray.put(load_cell_jobs(spec, seed))
        return fut.result()


def _costs(spec: SweepSpec) -> None:
    """Mapping and unpickling a seed's jobs, the collector on and off (CPU s)."""
    blob = pickle.dumps(load_cell_jobs(spec, 0), protocol=5)
    for on in (True, False, True, False):
        (gc.enable if on else gc.disable)()
        t = time.process_time()
        jobs = pickle.loads(blob)
        unpickle = time.process_time() - t
        t = time.process_time()
        from psched.traces.detect import load_any

        load_any(spec.trace[0], spec.fmt, slot_seconds=spec.slot_seconds, seed=1)
        mapping = time.process_time() - t
        gc.enable()
        del jobs
        print(json.dumps({"gc": on, "unpickle_cpu_s": round(unpickle, 2),
                          "map_cpu_s": round(mapping, 2), "MB": len(blob) // 2**20}),
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--philly", type=int, default=80000)
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--policy", default="srtf")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--modes", default="driver,thread+loading,fork+loading,subprocess,ray")
    args = ap.parse_args()
    trace = os.path.join(tempfile.gettempdir(), f"psched_philly_{args.philly}_s0.csv")
    if not os.path.exists(trace):
        from psched.runner import synth_trace

        synth_trace(scenario="philly", jobs=args.philly, seed=0, slots=1, slot_seconds=3600.0,
                    options={}, out=trace)
    spec = SweepSpec(trace=(trace,), jobs=args.jobs, policies=(args.policy,), seeds=(0,))
    cell = SweepCell(policy=args.policy, seed=0, load=1.0, scale=1.0)
    _costs(SweepSpec(trace=(trace,)))
    jobs = load_cell_jobs(spec, 0)
    fork = multiprocessing.get_context("fork")
    sub = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    sub.submit(probe, spec, cell, jobs).result()  # its imports and first cell
    import ray

    start_local_ray(2)
    ref = ray.put(jobs)
    task = ray.remote(num_cpus=1)(lambda s, c, r: probe(s, c, ray.get(r[0])))
    ray.get(task.remote(spec, cell, [ref]))  # a warm worker
    probe(spec, cell, jobs)  # and a warm driver
    for rep in range(args.reps):
        for mode in args.modes.split(","):
            if mode == "driver":
                out = probe(spec, cell, jobs)
            elif mode == "thread+loading":
                out = _beside_loading(spec, cell, jobs, ThreadPoolExecutor(1))
            elif mode == "fork+loading":
                out = _beside_loading(spec, cell, jobs, ProcessPoolExecutor(1, mp_context=fork))
            elif mode == "subprocess":
                out = sub.submit(probe, spec, cell, jobs).result()
            else:
                out = ray.get(task.remote(spec, cell, [ref]))
            print(json.dumps({"rep": rep, "mode": mode, "load1": round(os.getloadavg()[0], 1),
                              **out}), flush=True)
    sub.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
