"""Pre-started Ray worker processes (``ray_cluster.runtime.warmpool``): actors created after a fill
run
in the pooled processes instead of new ones, on CPU and fake-GPU nodes alike."""

from __future__ import annotations

import os

import pytest

GPU_NODE_SERVERS = ("gpu0", "gpu1")  # the fake-GPU nodes of tests/conftest.py
HEAD_SERVER = "head"  # its head node


def _pid_actor():
    import ray

    @ray.remote(num_cpus=0)
    class Pid:
        def pid(self) -> tuple[int, list]:
            return os.getpid(), list(ray.get_gpu_ids())

    return Pid


def _on(node_id: str, **opts):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False), **opts}


@pytest.mark.ray
@pytest.mark.parametrize("server", [HEAD_SERVER, GPU_NODE_SERVERS[0]])
def test_actors_created_after_a_fill_run_in_the_pooled_processes(ray_session, server):
    import ray

    from ray_cluster.runtime.warmpool import WarmProcesses

    node = ray_session.node_ids[server]
    gpus = 0 if server == HEAD_SERVER else 1
    n = 1 if gpus else 3  # actors to create (one fake GPU per GPU node)
    pool = WarmProcesses(n, keep_alive_s=120)
    try:
        have = pool.fill([node])
        assert have[node] >= pool.per_node
        pooled = set(pool.fresh_pids(node, unbound=True))  # Ray's own may be taken too
        actors = [_pid_actor().options(**_on(node, num_gpus=gpus)).remote() for _ in range(n)]
        got = ray.get([a.pid.remote() for a in actors])
        assert {pid for pid, _ in got} <= pooled  # no process was started for them
        assert all(len(ids) == gpus for _, ids in got)  # GPUs still assigned per actor
        assert len(pool.fresh_pids(node, unbound=True)) <= len(pooled) - n  # taken: not fresh
        for a in actors:
            ray.kill(a)
    finally:
        pool.close()


@pytest.mark.ray
def test_a_node_that_is_gone_is_skipped_and_the_pool_keeps_working(ray_session):
    from ray_cluster.runtime.warmpool import WarmProcesses

    head = ray_session.node_ids[HEAD_SERVER]
    pool = WarmProcesses(1, keep_alive_s=60)
    try:
        have = pool.fill(["ab" * 28, head])
        assert list(have) == [head] and have[head] >= 1
    finally:
        pool.close()


@pytest.mark.ray
def test_background_fill_stops_on_close(ray_session):
    from ray_cluster.runtime.warmpool import WarmProcesses

    pool = WarmProcesses(1, keep_alive_s=60)
    pool.fill_later([ray_session.node_ids[HEAD_SERVER]])
    pool.close()  # joins the thread: returns, never hangs
    assert pool._thread is not None and not pool._thread.is_alive()


def test_an_empty_pool_asks_ray_for_nothing():
    from ray_cluster.runtime.warmpool import WarmProcesses

    pool = WarmProcesses(0)
    assert pool.fill(["anything"]) == {}  # without Ray running: no call is made
    assert pool.requested == 0
    with pytest.raises(ValueError, match="per_node"):
        WarmProcesses(-1)


def test_an_unreachable_node_is_skipped_without_disabling_the_pool():
    from ray_cluster.runtime.warmpool import WarmProcesses

    class DeadRaylet:  # a node that died after the pool reached it once
        def GetNodeStats(self, *args, **kwargs):
            raise RuntimeError("StatusCode.UNAVAILABLE")

    pool = WarmProcesses(1)
    pool._stubs["n1"] = DeadRaylet()
    assert pool.fill(["n1"]) == {}  # skipped, no exception reaches the caller
    assert not pool._broken and "n1" not in pool._stubs  # asked afresh next time


def test_requests_while_a_fill_runs_coalesce_into_one_more_fill():
    import threading

    from ray_cluster.runtime.warmpool import WarmProcesses

    pool = WarmProcesses(1)
    started, release, seen = threading.Event(), threading.Event(), []

    def fill(nodes):  # stands in for the raylet calls: records what each fill was for
        seen.append(list(nodes))
        started.set()
        release.wait(10)
        return {}

    pool.fill = fill  # type: ignore[method-assign]
    pool.fill_later(["a"])
    assert started.wait(10)
    for nodes in (["b"], ["c"], ["c", "d"]):  # while the first fill runs
        pool.fill_later(nodes)
    release.set()
    pool.wait()
    assert seen == [["a"], ["c", "d"]]  # one more fill, for the latest request only
    pool.close()
