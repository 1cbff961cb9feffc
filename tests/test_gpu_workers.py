"""Worker actors on the GPUs Ray assigns them, on Ray's fake GPUs (no CUDA needed).

The session's Ray (``tests/conftest.py``) has two one-GPU nodes; the tests that need several
GPUs on one node add a node with four fake GPUs and remove it after. Where CUDA is present
the same tests check the CUDA device; without it a worker given a GPU trains on the CPU
through the same path (:mod:`ray_cluster.ps.devices`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import islice
from typing import Any

import numpy as np
import pytest
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from psched.core.model import Resources
from ray_cluster.ps.actors import PSShard, Worker
from ray_cluster.ps.devices import DeviceInfo, device_index
from ray_cluster.ps.optim import MomentumSGD
from ray_cluster.workloads.builtin import get_workload

torch = pytest.importorskip("torch")

CUDA = torch.cuda.is_available()
TINY_CNN = {"channels": 2, "hidden": 8}
FAR = 60.0  # seconds: a deadline no test reaches; a mini-batch count ends training first


def _on(node_id: str, gpus: float) -> dict[str, Any]:
    return {"num_cpus": 0, "num_gpus": gpus,
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False)}


def _worker(node_id: str, gpus: float, hparams: dict[str, Any] | None = None,
            name: str = "torch-cnn") -> Any:
    wl = get_workload(name, {**(TINY_CNN if name == "torch-cnn" else {}), **(hparams or {})})
    return Worker.options(**_on(node_id, gpus)).remote(wl, 4, 8)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def four_gpu_node(ray_session: Any) -> Iterator[str]:
    """A node with four fake GPUs, removed after the module."""
    node = ray_session.cluster.add_node(num_cpus=0, num_gpus=4, object_store_memory=80 * 2**20,
                                        resources={"gpu4_node": 1})
    ray_session.cluster.wait_for_nodes()
    try:
        yield str(node.node_id)
    finally:
        ray_session.cluster.remove_node(node)


# -- without Ray ---------------------------------------------------------------------------
@pytest.mark.parametrize(("ids", "visible", "index"), [
    (["3"], "3", 0), (["2", "3"], "2,3", 0), (["1"], "0,1", 1), (["2"], None, 2)])
def test_the_cuda_index_is_the_assigned_gpus_place_among_the_visible(ids, visible, index):
    assert device_index(ids, visible) == index


def test_a_process_that_cannot_see_its_assigned_gpu_refuses_to_train():
    with pytest.raises(RuntimeError, match="assigned GPU 1"):
        device_index(["1"], "0,2")


# -- on the session's Ray --------------------------------------------------------------------
@pytest.mark.ray
def test_each_worker_sees_only_the_gpu_ray_assigned_it_and_no_two_share_one(four_gpu_node):
    # two PyTorch workers (their device chosen by torch) and two numpy ones (quicker to start)
    workers = [_worker(four_gpu_node, 1, name=n) for n in ("torch-cnn", "mlp") * 2]
    try:
        got = [DeviceInfo(**{k: v for k, v in d.items() if k != "data"})
               for d in ray.get([w.device.remote() for w in workers], timeout=120)]
        assert sorted(g for d in got for g in d.gpu_ids) == ["0", "1", "2", "3"]
        for d in got:
            assert len(d.gpu_ids) == 1 and d.visible == d.gpu_ids[0]
            assert d.node_id == four_gpu_node
        for d in got[::2]:  # the PyTorch ones
            assert d.device == ("cuda:0" if CUDA else "cpu")
            if not CUDA:
                assert f"GPU {d.gpu_ids[0]} assigned, CUDA not available" in d.name
        assert len({d.pid for d in got}) == 4
        fifth = _worker(four_gpu_node, 1, name="mlp")  # every GPU is taken: it waits for one
        ready, _ = ray.wait([fifth.ping.remote()], timeout=3)
        assert not ready
        ray.kill(workers[2], no_restart=True)
        freed = got[2].gpu_ids
        info = ray.get(fifth.device.remote(), timeout=120)
        assert tuple(info["gpu_ids"]) == freed and info["visible"] == freed[0]
        workers[2] = fifth
    finally:
        for w in workers:
            ray.kill(w, no_restart=True)


@pytest.mark.ray
def test_a_worker_with_two_gpus_trains_on_the_first_and_one_without_sees_none(four_gpu_node):
    pair, none = _worker(four_gpu_node, 2), _worker(four_gpu_node, 0)
    try:
        two, zero = ray.get([pair.device.remote(), none.device.remote()], timeout=120)
        assert len(two["gpu_ids"]) == 2 and two["visible"] == ",".join(two["gpu_ids"])
        assert zero["gpu_ids"] == () and zero["visible"] == "" and zero["device"] == "cpu"
    finally:
        for w in (pair, none):
            ray.kill(w, no_restart=True)


@pytest.mark.ray
def test_a_gpu_worker_honours_device_cpu_and_leaves_a_numpy_workload_as_it_is(
        four_gpu_node):
    asked = _worker(four_gpu_node, 1, {"device": "cpu"})
    numpy_wl = get_workload("mlp", {"hidden": 4})
    plain = Worker.options(**_on(four_gpu_node, 1)).remote(numpy_wl, 2, 8)  # type: ignore[attr-defined]
    try:
        a, p = ray.get([asked.device.remote(), plain.device.remote()], timeout=120)
        assert a["device"] == "cpu" and "device=cpu asked" in a["name"]
        assert p["device"] == "unset" and "without a device field" in p["name"]
        assert len(p["gpu_ids"]) == 1 and p["visible"] == p["gpu_ids"][0]
    finally:
        for w in (asked, plain):
            ray.kill(w, no_restart=True)


def _reference_steps(wl: Any, params: np.ndarray, n: int, seed: tuple[int, ...]) -> np.ndarray:
    """What one worker and one shard do in ``n`` async steps, computed here on the CPU."""
    opt = MomentumSGD(lr=0.05, momentum=0.9)
    state = opt.init(params.size)
    batches = wl.batches(wl.partition(1, 0), 8, np.random.default_rng(list(seed)))
    for batch in islice(batches, n):
        _, grad = wl.gradient(params, batch)
        params, state = opt.update(params, grad, state)
    return params


@pytest.mark.ray
@pytest.mark.parametrize("name", ["torch-cnn", "torch-lm"])
def test_a_worker_on_an_assigned_gpu_takes_the_same_first_steps_as_a_cpu_reference(
        ray_session, name):
    hparams = TINY_CNN if name == "torch-cnn" else {"d_model": 16, "layers": 1, "heads": 2,
                                                    "context": 16, "corpus_mb": 0.5}
    wl = get_workload(name, hparams)
    node = ray_session.node_ids["gpu0"]
    params = wl.init_params(1)
    shard = PSShard.options(num_cpus=0).remote(MomentumSGD(lr=0.05, momentum=0.9))  # type: ignore[attr-defined]
    worker = Worker.options(**_on(node, 1)).remote(wl, 1, 8)  # type: ignore[attr-defined]
    try:
        empty = {"buffer": np.zeros_like(params)}
        ray.get(shard.load.remote(0, params.size, 0, 0, {"rule": "dynamic", "ramp_steps": 8,
                                                            "ramps": []},
                                  {"lo": 0, "hi": params.size, "params": params, **empty}))
        ray.get([worker.set_shards.remote([shard], [(0, params.size)]),
                 worker.set_partitions.remote([0], (7, 1, 0))])
        info = ray.get(worker.device.remote())
        assert info["gpu_ids"] == ("0",) and info["device"] == ("cuda:0" if CUDA else "cpu")
        ray.get(worker.train.remote(time.time() + FAR, 3))
        trained = ray.get(shard.pull.remote())
    finally:
        for a in (worker, shard):
            ray.kill(a, no_restart=True)
    expected = _reference_steps(wl, params, 3, (7, 1, 0))
    # CPU: the same arithmetic (BLAS threads aside); CUDA: float32 kernels of another order
    np.testing.assert_allclose(trained, expected, rtol=1e-3 if CUDA else 1e-5,
                               atol=1e-5 if CUDA else 1e-7)
    assert not np.array_equal(trained, params)


@pytest.mark.ray
def test_a_job_with_gpu_workers_gets_one_gpu_each_its_shard_none_and_logs_devices_per_slot(
        ray_session, tmp_path):
    from ray_cluster.runtime import JobRuntime, RuntimeConfig, TrainingJob
    from ray_cluster.runtime.executor import RayPlacer

    ids = ray_session.node_ids
    node_of = {0: ids["gpu0"], 1: ids["gpu1"], 2: ids["head"]}
    demand = (Resources(gpu=1, cpu=1, memory_gb=1, bandwidth_gbps=1),
              Resources(cpu=1, memory_gb=1, bandwidth_gbps=1))
    job = TrainingJob(job_id="gpu-job", workload=get_workload("torch-cnn", TINY_CNN),
                      n_partitions=2, minibatches=4, epochs=1)
    rt = JobRuntime(job, RuntimeConfig(checkpoint_dir=str(tmp_path), batch_size=8,
                                       evaluate=False),
                    RayPlacer(node_of, {"gpu-job": demand}))
    try:
        rt.resize([0, 1], [2])
        devices = rt.worker_devices()
        shard_gpus = ray.get(rt.shards[0].where.remote())[1]
        rt.run_until(time.time() + FAR, until_batches=2)
        rt.end()
        rt.resize([1], [2])  # the next slot: one worker left
    finally:
        rt.close()
    assert [d["node_id"] for d in devices] == [ids["gpu0"], ids["gpu1"]]
    assert all(d["gpu_ids"] == ("0",) and d["visible"] == "0" for d in devices)
    assert shard_gpus == []
    lines = [what for _, what in rt.events if what.startswith("devices: ")]
    assert len(lines) == 2
    assert lines[0].count("gpu 0 node") == 2 and lines[1].count("gpu 0 node") == 1
    assert f"node {ids['gpu1'][:8]}" in lines[1]
