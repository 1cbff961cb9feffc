"""The transformer workload on GPU workers: samples per second on one worker against four, and
the gradient exchange at its gradient size, printed as markdown.

Every worker is created with ``num_gpus=1`` (:class:`~ray_cluster.runtime.executor.RayPlacer`;
a share of one where there are fewer GPUs than workers) and trains on the GPU Ray assigned it;
without CUDA, Ray is started with ``--fake-gpus`` fake GPUs and the same workers train on the
CPU through the same path (:mod:`ray_cluster.ps.devices`). Two measurements, each with a
baseline from the same run:

1. **Samples per second** of ``torch-lm`` (the hyper-parameters below) trained by the runtime,
   asynchronous, one PS shard, with 1 and with 4 workers, after a warm-up of two mini-batches
   per worker; the baseline is the same model and optimizer in a loop in this process (no
   Ray, no parameter server) on this process's device, with one CPU thread as a worker has.
2. **Gradient exchange** at the model's gradient size: one GPU worker, one shard, a gradient
   that costs no compute but crosses the bus as a real one does (parameters host -> device,
   gradient device -> host, :class:`~ray_cluster.workloads.torch_flat.FlatParams`), so a step
   is two transfers, the push, the momentum update and the pull; throughput ``2 x size / step
   time``. The baseline is a raw Ray round trip of the same bytes between two actors
   (``bench_runtime.RawCaller``), the two timed in alternating blocks.

Usage::

    python benchmarks/bench_gpu_lm.py [--d-model 256] [--layers 4] [--context 64] [--batch 8]
        [--seconds 20] [--workers 1 4] [--fake-gpus 4] [--blocks 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from itertools import islice
from typing import Any, ClassVar

import numpy as np

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import ray
from free_gradient import FreeGradient

from psched.core.model import Resources
from ray_cluster.ps.optim import MomentumSGD
from ray_cluster.runtime import JobRuntime, RuntimeConfig, TrainingJob
from ray_cluster.runtime.executor import RayPlacer
from ray_cluster.workloads.builtin import Batch, get_workload

__all__ = ["DeviceExchange", "exchange", "gpu_share", "local_samples_per_s",
           "runtime_samples_per_s", "start_ray"]

FAR = 600.0
CPU_PS = Resources(cpu=1, memory_gb=1, bandwidth_gbps=1)  #: one shard's demand: no GPU


def start_ray(fake_gpus: int, token_dir: str) -> tuple[int, bool]:
    """An embedded Ray on 127.0.0.1 with token authentication and the machine's GPUs, or
    ``fake_gpus`` fake ones without CUDA; returns (GPUs, CUDA present)."""
    import torch

    from psched.cli.connect import ensure_token, use_token

    cuda = torch.cuda.is_available()
    gpus = torch.cuda.device_count() if cuda else fake_gpus
    use_token(ensure_token(token_dir))
    ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False,
             num_cpus=os.cpu_count() or 1, num_gpus=gpus,
             object_store_memory=(4000 if cuda else 1200) * 2**20,
             log_to_driver=False)
    return gpus, cuda


@dataclass(frozen=True, kw_only=True)
class DeviceExchange(FreeGradient):
    """``n_params`` parameters whose gradient costs no compute but crosses the device's bus as
    a real one does (the flat vector up, a gradient of the same size down)."""

    name: ClassVar[str] = "device-exchange"
    device: str = "auto"  #: set by the worker to the device Ray assigned it

    def gradient(self, params: np.ndarray, batch: Batch) -> tuple[float, np.ndarray]:
        from ray_cluster.workloads.torch_flat import flat_params, torch_device

        fp = flat_params(("exchange", self.n_params), [(self.n_params,)],
                         torch_device(self.device))
        fp.load(params)
        fp.zero_grad()
        fp.grad.fill_(1e-3)
        return 0.0, fp.grad_numpy()


def gpu_share(gpus: int, workers: int) -> float:
    """GPUs per worker so that ``workers`` fit on ``gpus``: one each, or a share of them."""
    return min(1.0, gpus / workers)


def _runtime(job_id: str, workload: Any, workers: int, batch: int, ckpt: str,
             gpu: float = 1.0) -> JobRuntime:
    job = TrainingJob(job_id=job_id, workload=workload, n_partitions=max(4, workers),
                      minibatches=10**8, epochs=1)
    demand = (Resources(gpu=gpu, cpu=1, memory_gb=1, bandwidth_gbps=1), CPU_PS)
    return JobRuntime(job, RuntimeConfig(checkpoint_dir=ckpt, evaluate=False, batch_size=batch,
                                         lr=0.01),
                      RayPlacer(None, {job_id: demand}))


def runtime_samples_per_s(workload: Any, workers: int, batch: int, seconds: float, ckpt: str,
                          gpu: float = 1.0) -> dict[str, Any]:
    """Samples per second of ``workers`` async workers (``gpu`` GPUs each; 0: CPU workers),
    one shard; also the workers' devices and the step time of one worker."""
    rt = _runtime(f"lm{workers}{'g' if gpu else 'c'}", workload, workers, batch, ckpt, gpu)
    try:
        rt.resize([None] * workers, [None])
        rt.run_until(time.time() + FAR, until_batches=2 * workers)  # warm-up
        rt.record()
        b0, t0 = rt.batches, time.perf_counter()
        rt.run_until(time.time() + seconds)
        wall, batches = time.perf_counter() - t0, rt.batches - b0
        devices = rt.worker_devices()
        step_s = rt.stats.seconds / max(1, rt.stats.batches)
    finally:
        rt.close()
    return {"workers": workers, "samples_per_s": batches * batch / wall, "batches": batches,
            "step_s": step_s, "devices": devices}


def local_samples_per_s(workload: Any, batch: int, seconds: float) -> float:
    """The baseline: the same model and optimizer in a loop here (no Ray, no shard), with one
    CPU thread as a worker actor has (Ray sets ``OMP_NUM_THREADS=1`` for an actor without
    CPUs)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _local_loop(workload, batch, seconds)
    finally:
        torch.set_num_threads(threads)


def _local_loop(workload: Any, batch: int, seconds: float) -> float:
    params = workload.init_params(0)
    opt = MomentumSGD(lr=0.01, momentum=0.9)
    state = opt.init(params.size)
    stream = workload.batches(workload.partition(1, 0), batch, np.random.default_rng(0))
    for b in islice(stream, 2):  # warm-up
        workload.gradient(params, b)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        _, grad = workload.gradient(params, next(stream))
        params, state = opt.update(params, grad, state)
        n += 1
    return n * batch / (time.perf_counter() - t0)


def exchange(n_params: int, blocks: int, steps: int, ckpt: str) -> dict[str, Any]:
    """Raw Ray round trips against GPU-worker steps of :class:`DeviceExchange`, alternating
    blocks; medians of the block means (seconds) and throughputs (MB/s, both ways)."""
    from bench_runtime import Echo, RawCaller

    echo = Echo.remote(n_params)
    caller = RawCaller.remote(echo, n_params)
    rt = _runtime("xchg", DeviceExchange(n_params=n_params), 1, 1, ckpt)
    raw: list[float] = []
    step: list[float] = []
    try:
        ray.get(caller.run.remote(3))
        rt.resize([None], [None])
        rt.run_until(time.time() + FAR, until_batches=3)
        for _ in range(blocks):
            raw.append(ray.get(caller.run.remote(steps)))
            rt.record()
            rt.run_until(time.time() + FAR, until_batches=rt.batches + steps)
            step.append(rt.stats.seconds / rt.stats.batches)
        devices = rt.worker_devices()
    finally:
        rt.close()
        ray.kill(caller)
        ray.kill(echo)
    mb = n_params * 4 / 1e6
    raw_s, step_s = statistics.median(raw), statistics.median(step)
    return {"mb": mb, "raw_s": raw_s, "step_s": step_s, "raw_mbps": 2 * mb / raw_s,
            "xchg_mbps": 2 * mb / step_s, "fraction": raw_s / step_s, "devices": devices}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8, help="windows per mini-batch")
    ap.add_argument("--seconds", type=float, default=20.0, help="timed training per row")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--fake-gpus", type=int, default=4, help="GPUs Ray fakes without CUDA")
    ap.add_argument("--blocks", type=int, default=3, help="exchange: alternating blocks")
    args = ap.parse_args()
    hp = {"d_model": args.d_model, "layers": args.layers, "heads": args.heads,
          "context": args.context}
    with tempfile.TemporaryDirectory(prefix="psched-bench-gpu-") as work:
        gpus, cuda = start_ray(args.fake_gpus, work)
        wl = get_workload("torch-lm", hp)
        mb = wl.n_params * 4 / 1e6
        print(f"torch-lm {hp}: {wl.n_params:,} parameters ({mb:.1f} MB); "
              f"{gpus} {'CUDA' if cuda else 'fake'} GPUs, {os.cpu_count()} CPUs")
        base = local_samples_per_s(wl, args.batch, args.seconds)
        rows = [runtime_samples_per_s(wl, k, args.batch, args.seconds, work,
                                      gpu=gpu_share(gpus, k)) for k in args.workers]
        xchg = exchange(wl.n_params, args.blocks, max(5, int(400 / mb)), work)
        ray.shutdown()
    print("\n| workers | samples/s | x one worker | step (one worker's) | devices |")
    print("|---|---|---|---|---|")
    print(f"| this process, no Ray (baseline) | {base:.1f} | | | "
          f"{'cuda:0' if cuda else 'cpu'} |")
    for r in rows:
        dev = "; ".join(f"{d['device']} gpu {','.join(d['gpu_ids'])}" for d in r["devices"])
        print(f"| {r['workers']} | {r['samples_per_s']:.1f} | "
              f"{r['samples_per_s'] / rows[0]['samples_per_s']:.2f} | "
              f"{r['step_s'] * 1e3:.0f} ms | {dev} |")
    print(f"\nexchange at {xchg['mb']:.1f} MB: raw round trip {xchg['raw_s'] * 1e3:.1f} ms "
          f"({xchg['raw_mbps']:.0f} MB/s), GPU-worker step {xchg['step_s'] * 1e3:.1f} ms "
          f"({xchg['xchg_mbps']:.0f} MB/s), {100 * xchg['fraction']:.0f}% of raw; worker on "
          f"{xchg['devices'][0]['device']} gpu {','.join(xchg['devices'][0]['gpu_ids'])}")


if __name__ == "__main__":
    main()
