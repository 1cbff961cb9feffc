"""One-command GPU check: psched's service trains the GPU workloads on this machine's GPUs.

Needs only ``pip install -e '.[torch]'`` (or a PyTorch already present). On a machine with
CUDA it starts an embedded Ray (127.0.0.1, token authentication) with the machine's GPUs;
without CUDA it says so in one line and runs the same path on Ray's fake GPUs, the workers
training on the CPU. Then:

1. **devices and speed**: ``torch-lm`` and ``torch-cnn``, each trained by one worker created
   with a GPU (``num_gpus=1``), then by one worker with none (the same job on the CPU, one
   thread as every CPU worker has), then by two GPU workers at once (the job's tau, as
   ``psched run --profile`` measures it); prints each worker's device and samples per second;
2. **exchange**: one GPU worker, one PS shard, a gradient of the transformer's size that costs
   no compute but crosses the bus (``bench_gpu_lm.DeviceExchange``), against a raw Ray round
   trip of the same bytes, in alternating blocks;
3. **the service**: four jobs (two transformers, two CNNs; worker demand one GPU, PS on the CPU)
   through :func:`ray_cluster.service.run_trace` with OASiS on a model of two GPU-workers at a
   time (so the jobs share the GPUs over time as the plan says, and a job is resized when it
   gets its second worker): prints each job's workers per slot, the device of each of its
   workers per slot (the runtime's log), the completion slot promised at admission (and each
   re-statement, with the slot it was made at) against the real one, and its measured speed
   against its profile.

Sizes: with CUDA the transformer has about 100 MB of parameters (``d_model=512, layers=8,
context=128``) and the CNN 20 MB; without, both are small enough for a 2-core CPU. The run
takes about 3 minutes on 2 cores (fake GPUs).

Usage::

    python benchmarks/gpu_check.py [--slot-seconds 8] [--fake-gpus 2] [--seconds 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_gpu_lm, bench_runtime


import bench_gpu_lm
import ray
from bench_gpu_lm import exchange, gpu_share, runtime_samples_per_s, start_ray

from psched.core.horizon import trace_horizon
from psched.core.model import Cluster, JobSpec, Pool, Resources
from psched.core.utility import Utility
from ray_cluster.runtime import RuntimeConfig
from ray_cluster.runtime.cluster_model import cluster_from_nodes
from ray_cluster.runtime.executor import RayExecutor
from ray_cluster.service import ServiceConfig, run_trace
from ray_cluster.workloads.builtin import get_workload

__all__ = ["RecordingExecutor", "main", "ratio"]

#: Hyper-parameters per workload, on CUDA and on the CPU.
SIZES: dict[bool, dict[str, dict[str, Any]]] = {
    True: {"torch-lm": {"d_model": 512, "layers": 8, "heads": 8, "context": 128},
           "torch-cnn": {"channels": 128, "hidden": 1024}},
    False: {"torch-lm": {"d_model": 64, "layers": 2, "heads": 4, "context": 32},
            "torch-cnn": {"channels": 8, "hidden": 64}},
}
#: Mini-batch size (windows or images) of every job, on CUDA and on the CPU: one runtime
#: configuration serves all the service's jobs.
BATCH = {True: 64, False: 16}
#: Mini-batch size of the CPU worker's row: on a CUDA machine the GPU-sized models take seconds
#: per mini-batch on one CPU thread, so it measures samples per second on smaller batches.
CPU_BATCH = {True: 4, False: 16}
#: The service's jobs: id, workload, arrival slot, N, work in worker-slots, utility
#: (value, target slots). Simulated with OASiS, lm-a runs 1 then 2 workers and cnn-b waits
#: for slots while the transformers hold both GPU-workers.
JOBS = [("lm-a", "torch-lm", 0, 2, 5, 10.0, 4.0), ("cnn-b", "torch-cnn", 0, 1, 2, 8.0, 3.0),
        ("lm-c", "torch-lm", 1, 2, 3, 12.0, 3.0), ("cnn-d", "torch-cnn", 2, 1, 2, 6.0, 4.0)]
UNITS = 2  #: GPU-workers the model offers at a time


class RecordingExecutor(RayExecutor):
    """The service's executor, keeping each job's runtime log when the job is released."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.logs: dict[str, list[tuple[float, str]]] = {}

    def release(self, job_id: str) -> None:
        rt = self.runtimes.get(job_id)
        if rt is not None:
            self.logs[job_id] = list(rt.events)
        super().release(job_id)


def _speeds(cuda: bool, gpus: int, seconds: float, work: str) -> dict[str, dict[str, Any]]:
    """Per workload: one GPU worker, one CPU worker, and :data:`UNITS` GPU workers at once
    (whose wall time per mini-batch and worker is the job's tau, contention included, as
    ``psched run --profile`` measures it)."""
    out = {}
    batch = BATCH[cuda]
    for name, hp in SIZES[cuda].items():
        wl = get_workload(name, hp)
        gpu = runtime_samples_per_s(wl, 1, batch, seconds, work, gpu=1.0)
        cpu = runtime_samples_per_s(wl, 1, CPU_BATCH[cuda], seconds, work, gpu=0.0)
        both = runtime_samples_per_s(wl, UNITS, batch, seconds, work,
                                     gpu=gpu_share(gpus, UNITS))
        tau = UNITS * batch / both["samples_per_s"]
        out[name] = {"mb": wl.n_params * 4 / 1e6, "gpu": gpu, "cpu": cpu, "units": both,
                     "tau_s": tau}
        print(f"{name} ({wl.n_params * 4 / 1e6:.1f} MB, batch {batch}): GPU worker "
              f"[{_device(gpu['devices'][0])}] {gpu['samples_per_s']:.0f} samples/s; CPU worker "
              f"[{_device(cpu['devices'][0])}] {cpu['samples_per_s']:.0f} samples/s at batch "
              f"{CPU_BATCH[cuda]} "
              f"({ratio(gpu, cpu) if cuda else 'both on the CPU here'}); {UNITS} GPU workers "
              f"{both['samples_per_s']:.0f} samples/s (tau {1e3 * tau:.1f} ms)", flush=True)
    return out


def ratio(gpu: dict[str, Any], cpu: dict[str, Any]) -> str:
    """``GPU xN``: samples per second on the GPU worker over the CPU worker's."""
    return f"GPU x{gpu['samples_per_s'] / cpu['samples_per_s']:.1f}"


def _device(d: dict[str, Any]) -> str:
    mem = f" {d['memory_gb']:.0f} GB" if d.get("memory_gb") else ""
    gpus = f", Ray GPU {','.join(d['gpu_ids'])}" if d.get("gpu_ids") else ""
    return f"{d['device']} {d['name']}{mem}{gpus}"


def _specs(cuda: bool, gpus: int, speeds: dict[str, dict[str, Any]],
           slot_s: float) -> list[JobSpec]:
    per_worker = gpu_share(gpus, UNITS)  # on one GPU: two workers share it
    out = []
    for job_id, name, arrival, n, work, value, target in JOBS:
        hp = SIZES[cuda][name]
        tau = speeds[name]["tau_s"]
        out.append(JobSpec(
            job_id=job_id, arrival=arrival, epochs=1, max_workers=n,
            minibatches=math.ceil(work * slot_s / (n * tau)), tau_s=tau,
            grad_mb=round(speeds[name]["mb"], 3), tau_includes_comm=True,
            worker_demand=Resources(gpu=per_worker, cpu=0.5, memory_gb=1, bandwidth_gbps=1),
            ps_demand=Resources(cpu=0.5, memory_gb=1, bandwidth_gbps=2),
            utility=Utility(kind="sigmoid", value=value, decay=0.5, target=target),
            workload=name, hparams=json.dumps(hp)))
    return out


def _service(specs: list[JobSpec], gpus: int, slot_s: float, batch: int,
             work: str) -> tuple[Any, RecordingExecutor]:
    cluster, node_of = cluster_from_nodes(ray.nodes(), slot_s)  # type: ignore[no-untyped-call]
    units = float(min(gpus, UNITS))
    servers = tuple(dataclasses.replace(s, capacity=dataclasses.replace(s.capacity, gpu=units))
                    if s.pool == Pool.WORKER else s for s in cluster.servers)
    cluster = Cluster(servers=servers, slot_seconds=slot_s)
    runtime = {"batch_size": batch, "lr": 0.01}
    cfg = ServiceConfig(policy="oasis", slot_seconds=slot_s, history=tuple(specs),
                        horizon=trace_horizon(specs, slot_s), runtime=runtime,
                        warm_processes=2)
    ex = RecordingExecutor(cluster, RuntimeConfig(checkpoint_dir=str(Path(work) / "ckpt"),
                                                  **runtime),
                           slot_seconds=slot_s, node_of=node_of, warm_processes=2)
    return run_trace(specs, Path(work) / "svc", config=cfg, cluster=cluster, node_of=node_of,
                     executor=ex), ex


def _report(result: Any, ex: RecordingExecutor) -> None:
    counts: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for slot, job_id, _, role, count in result.allocations:
        if role == "worker":
            counts[job_id][slot] += count
    print("\n| job | workers per slot | resized | promised slot (re-stated at) | real slot "
          "| speed |")
    print("|---|---|---|---|---|---|")
    for job_id, rec in result.records.items():
        per = counts.get(job_id, {})
        sizes = [per[t] for t in sorted(per)]
        resized = len(set(sizes)) > 1
        later = "".join(f" -> {new} ({at})" for at, _, new in rec.restated)
        print(f"| {job_id} | {' '.join(f'{t}:{per[t]}' for t in sorted(per)) or '-'} | "
              f"{'yes' if resized else 'no'} | {rec.first_promise}{later} | {rec.completion} "
              f"| {rec.speed:.2f} |")
    print("\nEach job's workers' devices, per slot it ran (the runtime's log):")
    for job_id, events in ex.logs.items():
        for _, what in events:
            if what.startswith(("devices: ", "data: ")):
                print(f"  {job_id}: {what}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slot-seconds", type=float, default=8.0)
    ap.add_argument("--fake-gpus", type=int, default=2, help="GPUs Ray fakes without CUDA")
    ap.add_argument("--seconds", type=float, default=4.0, help="timed training per speed row")
    args = ap.parse_args()
    import torch

    t0 = time.time()
    if not torch.cuda.is_available():
        print(f"no CUDA on this machine: the same path runs on {args.fake_gpus} Ray fake GPUs, "
              "the workers training on the CPU")
    ray.cloudpickle.register_pickle_by_value(bench_gpu_lm)  # workers import no benchmarks
    with tempfile.TemporaryDirectory(prefix="psched-gpu-check-") as work:
        gpus, cuda = start_ray(args.fake_gpus, work)
        print(f"Ray: {gpus} {'CUDA' if cuda else 'fake'} GPUs, {os.cpu_count()} CPUs; "
              f"torch {torch.__version__}", flush=True)
        speeds = _speeds(cuda, gpus, args.seconds, work)
        lm = get_workload("torch-lm", SIZES[cuda]["torch-lm"])
        x = exchange(lm.n_params, 3, max(5, int(400 / (lm.n_params * 4 / 1e6))), work)
        print(f"exchange at the transformer's {x['mb']:.1f} MB: GPU-worker step "
              f"{x['step_s'] * 1e3:.1f} ms = {x['xchg_mbps']:.0f} MB/s, raw Ray round trip "
              f"{x['raw_s'] * 1e3:.1f} ms = {x['raw_mbps']:.0f} MB/s "
              f"({100 * x['fraction']:.0f}% of raw) [{_device(x['devices'][0])}]", flush=True)
        specs = _specs(cuda, gpus, speeds, args.slot_seconds)
        try:
            result, ex = _service(specs, gpus, args.slot_seconds, BATCH[cuda], work)
        except RuntimeError as err:  # the service stopped: say so in one line
            print(f"gpu_check: {err}", file=sys.stderr)
            sys.exit(1)
        finally:
            ray.shutdown()
        _report(result, ex)
    done = sum(r.completion is not None for r in result.records.values())
    print(f"\n{done} of {len(result.records)} jobs completed; {time.time() - t0:.0f} s in all")
    sys.exit(0 if done == len(result.records) else 1)


if __name__ == "__main__":
    main()
