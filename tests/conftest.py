"""Shared fixtures. Ray: one local cluster per test session, never one per test.

The session's Ray is a ``ray.cluster_utils.Cluster`` on 127.0.0.1: a head node (2 CPUs, no
GPU) and two fake-GPU nodes (``num_gpus=1`` each). Tests that do not care where actors run use
it as one Ray; the placement tests map psched servers onto its nodes. It starts lazily, when the
first test marked ``ray`` asks for it (they run after all others), and shuts down at the end
of the session. A test not marked ``ray`` fails if it leaves a Ray started in the test process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

#: Journals opened by this session (here and in its Ray's processes, started after this line)
#: commit without a disk sync per commit (ray_cluster.service.journal.SYNC_ENV): the tests kill
#: processes, never the machine, and a sync costs milliseconds, thousands of times.
os.environ.setdefault("PSCHED_JOURNAL_SYNC", "NORMAL")

#: Fake-GPU nodes of the session cluster and the psched server ids they stand for.
GPU_NODE_SERVERS: tuple[str, ...] = ("gpu0", "gpu1")
#: The psched server id the head node stands for.
HEAD_SERVER = "head"


@dataclass(frozen=True, kw_only=True)
class RaySession:
    """The session's Ray cluster."""

    cluster: Any  #: the ``ray.cluster_utils.Cluster``
    node_ids: dict[str, str]  #: psched server id -> Ray node id
    servers: tuple[Any, ...]  #: the psched servers the nodes stand for (worker ones first)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``ray`` run after all others, in their collected order: the session's Ray
    cluster starts with the first of them, so its idle processes never share the two cores
    with the rest of the suite."""
    del config
    items.sort(key=lambda item: item.get_closest_marker("ray") is not None)


@pytest.fixture(autouse=True)
def _no_ray_in_a_test_not_marked_ray(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test not marked ``ray`` leaves no Ray started in the test process: one it started
    (``ray.init``, or a Ray call that starts one on its own) would be the Ray the session's
    cluster finds already connected when the tests marked ``ray`` run after it."""
    yield
    if request.node.get_closest_marker("ray") is not None or "ray" not in sys.modules:
        return
    import ray

    if ray.is_initialized() and "ray_session" not in request.fixturenames:
        ray.shutdown()
        pytest.fail("a test not marked ray started Ray in the test process; mark it ray "
                    "(and use the ray_session fixture) or keep it off Ray")


@pytest.fixture(scope="session")
def ray_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RaySession]:
    """One local Ray cluster (head + two fake-GPU nodes) for the whole test session."""
    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # everything on 127.0.0.1
    import ray
    from ray.cluster_utils import Cluster

    from psched.core.model import Pool, Resources, Server
    from ray_cluster.runtime.executor import server_node_resources

    gpu_servers = [Server(server_id=s, pool=Pool.WORKER,
                          capacity=Resources(gpu=1, cpu=4, memory_gb=16, bandwidth_gbps=10))
                   for s in GPU_NODE_SERVERS]
    head = Server(server_id=HEAD_SERVER, pool=Pool.PS,
                  capacity=Resources(cpu=8, memory_gb=32, bandwidth_gbps=10))
    cluster = Cluster(
        initialize_head=True,
        connect=True,
        head_node_args={
            "num_cpus": 2,
            "num_gpus": 0,
            "object_store_memory": 300 * 2**20,
            "include_dashboard": False,
            "resources": server_node_resources(head),
            "_system_config": {"health_check_period_ms": 1000,
                               "health_check_failure_threshold": 5},
        },
    )
    nodes = {HEAD_SERVER: cluster.head_node.node_id}
    for server in gpu_servers:
        node = cluster.add_node(num_cpus=0, num_gpus=1, object_store_memory=100 * 2**20,
                                resources=server_node_resources(server))
        nodes[server.server_id] = node.node_id
    cluster.wait_for_nodes()
    try:
        yield RaySession(cluster=cluster, node_ids=nodes, servers=(*gpu_servers, head))
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture(scope="module")
def tau(ray_session: RaySession) -> float:
    """Seconds per mini-batch of ``service_jobs.job_spec``'s workload here, measured once per
    module."""
    from service_jobs import measured_tau

    return measured_tau()
