"""GPU nodes as servers: the ``ray start`` example of docs/gpu.md read as Ray would list its
nodes, turned into the cluster model, and a GPU job placed only where its GPUs fit."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from psched.core.model import Pool, Resources
from psched.core.placement import Pools, place
from ray_cluster.runtime.cluster_model import cluster_from_nodes
from ray_cluster.workloads.jobspec import load_jobspec

ROOT = Path(__file__).resolve().parent.parent
GIB = 2**30


def _doc_nodes() -> list[dict[str, Any]]:
    """One ``ray.nodes()`` row per ``ray start`` line of docs/gpu.md (32 CPUs, 256 GiB)."""
    text = (ROOT / "docs" / "gpu.md").read_text().replace("\\\n", " ")
    rows = []
    for i, line in enumerate(re.findall(r"^ray start .*$", text, flags=re.M)):
        argv = shlex.split(line)
        res = json.loads(argv[argv.index("--resources") + 1])
        gpus = float(argv[argv.index("--num-gpus") + 1])
        rows.append({"NodeID": f"{i:02d}" + "ab" * 27, "Alive": True,
                     "Resources": {**res, "CPU": 32.0, "memory": 256.0 * GIB,
                                   **({"GPU": gpus} if gpus else {})}})
    return rows


def test_the_docs_cluster_has_two_8_gpu_worker_servers_and_a_cpu_ps_server() -> None:
    nodes = _doc_nodes()
    assert len(nodes) == 3
    cluster, node_of = cluster_from_nodes(nodes, 600.0)
    by_id = {s.server_id: s for s in cluster.servers}
    assert sorted(by_id) == ["gpu-a", "gpu-b", "ps0"]
    for name in ("gpu-a", "gpu-b"):
        assert by_id[name].pool == Pool.WORKER and by_id[name].capacity.gpu == 8
    assert by_id["ps0"].pool == Pool.PS and by_id["ps0"].capacity.gpu == 0
    assert set(node_of.values()) == {n["NodeID"] for n in nodes}


def test_a_node_without_pool_mark_puts_its_gpus_on_its_worker_side() -> None:
    node = {"NodeID": "cd" * 28, "Alive": True,
            "Resources": {"CPU": 16.0, "GPU": 4.0, "memory": 64.0 * GIB}}
    cluster, _ = cluster_from_nodes([node], 30.0)
    caps = {s.pool: s.capacity for s in cluster.servers}
    assert caps[Pool.WORKER].gpu == 4 and caps[Pool.PS].gpu == 0


@pytest.mark.parametrize("per_worker_gpus", [1, 2, 3])
def test_gpu_workers_are_placed_only_where_their_gpus_fit(per_worker_gpus: int) -> None:
    cluster, _ = cluster_from_nodes(_doc_nodes(), 600.0)
    spec = load_jobspec(ROOT / "examples" / "gpu" / "lm-gpu.toml")
    worker = Resources(**{**spec.worker_demand.to_dict(), "gpu": float(per_worker_gpus)})
    w, p = worker.as_array(), spec.ps_demand.as_array()
    free, pools = np.array(cluster.capacity), Pools.of(cluster)
    fit = 2 * (8 // per_worker_gpus)  # two 8-GPU servers
    got = place(free, pools, worker_demand=w, ps_demand=p, workers=fit, ps=1)
    assert got is not None
    gpu = np.asarray(got.free)[:, 0]
    assert (gpu >= 0).all() and gpu[pools.worker].sum() == 16 - fit * per_worker_gpus
    assert place(free, pools, worker_demand=w, ps_demand=p, workers=fit + 1, ps=1) is None


def test_the_gpu_example_job_asks_one_gpu_per_worker_and_none_per_ps() -> None:
    spec = load_jobspec(ROOT / "examples" / "gpu" / "lm-gpu.toml")
    assert spec.workload == "torch-lm"
    assert spec.worker_demand.gpu == 1 and spec.ps_demand.gpu == 0
    hp = json.loads(spec.hparams)
    torch = pytest.importorskip("torch")
    del torch
    from ray_cluster.workloads.builtin import get_workload

    wl = get_workload(spec.workload, hp)
    assert spec.grad_mb == pytest.approx(wl.n_params * 4 / 1e6, rel=0.01)


@pytest.mark.parametrize(("declared", "ps_gpus"), [({}, 0.0), ({"psched_ps_gpu": 2.0}, 2.0)])
def test_a_ps_server_has_gpu_capacity_only_where_its_node_declares_it(declared, ps_gpus) -> None:
    nodes = [{"NodeID": "ef" * 28, "Alive": True,
              "Resources": {"psched_pool:ps": 1.0, "CPU": 8.0, "GPU": 2.0, **declared}},
             *_doc_nodes()[1:]]
    cluster, _ = cluster_from_nodes(nodes, 600.0)
    ps = [s for s in cluster.servers if s.pool == Pool.PS]
    assert len(ps) == 1 and ps[0].capacity.gpu == ps_gpus
