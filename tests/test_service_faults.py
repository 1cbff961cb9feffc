"""Faults injected into the service on Ray, one at a time (issue 17, defects 2 and 3).

* the service actor killed (Ray restarts it): the process watching it
  (:func:`ray_cluster.service.watch_service`, what ``psched serve`` runs) rides out the
  restart, the restarted actor resumes from its journal, every accepted job completes once;
* a node's raylet killed in the middle of a slot while a job trains there: the loop is not
  wedged (no ``ActorUnschedulableError`` escapes), the loss is journaled (``node_lost``), the
  job restarts elsewhere from its checkpoint and completes, journaled and completed once and
  never struck, and no actor of the service is left alive after it closes.

All on the session's Ray (tests/conftest.py: a ``ray.cluster_utils.Cluster``, head + two
fake-GPU nodes); the node-loss test adds a third node and kills it.
"""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

pytestmark = pytest.mark.ray

ray = pytest.importorskip("ray")

from service_jobs import SLOT_S, job_spec  # noqa: E402

from psched.core.model import Cluster, Pool, Resources, Server  # noqa: E402
from ray_cluster.runtime.executor import (  # noqa: E402
    SERVER_MARK,
)
from ray_cluster.service import (  # noqa: E402
    SERVICE_NAME,
    SERVICE_NAMESPACE,
    SchedulerService,
    ServiceConfig,
    faults,
    service_actor,
    watch_service,
)
from ray_cluster.workloads.jobspec import spec_to_json  # noqa: E402


def _alive_actors(*classes: str) -> set[str]:
    from ray._private import state

    return {a_id for a_id, a in state.actors().items()
            if a.get("State") == "ALIVE" and a.get("ActorClassName", "").split(".")[-1]
            in classes}


def test_the_watcher_rides_out_a_restart_of_the_service_actor(ray_session, tmp_path, tau):
    cluster = Cluster(servers=(
        Server(server_id="m/w", pool=Pool.WORKER,
               capacity=Resources(cpu=2, memory_gb=16, bandwidth_gbps=10)),
        Server(server_id="m/ps", pool=Pool.PS,
               capacity=Resources(cpu=2, memory_gb=16, bandwidth_gbps=10))), slot_seconds=SLOT_S)
    head = ray_session.node_ids["head"]
    specs = [job_spec(f"r{i}", n=1, m=int(2 * SLOT_S / tau), tau_s=tau) for i in range(2)]
    cfg = ServiceConfig(slot_seconds=SLOT_S, horizon=200, history=tuple(specs))
    actor = service_actor().options(
        name=SERVICE_NAME, namespace=SERVICE_NAMESPACE, lifetime="detached",
    ).remote(str(tmp_path), cfg.to_json(), cluster.to_dict(), {"0": head, "1": head})
    outcome: list[str] = []
    waits: list[float] = []

    def sleep(s: float) -> None:
        waits.append(s)
        time.sleep(s)

    try:
        decided = [ray.get(actor.submit.remote(spec_to_json(s))) for s in specs]
        admitted = {d["job_id"] for d in decided if d.get("admitted")}
        assert admitted
        watcher = threading.Thread(target=lambda: outcome.append(
            watch_service(actor, poll_s=0.5, sleep=sleep)), daemon=True)
        watcher.start()
        db = tmp_path / "journal.db"
        for _ in range(120):  # one slot journaled
            with sqlite3.connect(db) as con:
                if con.execute("SELECT COUNT(*) FROM slots").fetchone()[0] >= 1:
                    break
            time.sleep(0.25)
        ray.kill(actor, no_restart=False)  # a crash: Ray restarts the actor
        st = _wait_done(actor, admitted, 240)
        assert st["error"] is None and st["running"]
        assert watcher.is_alive() and not outcome  # still watching the restarted service
        ray.get(actor.stop.remote())  # the loop stops: the watcher's work is done
        watcher.join(timeout=60)
        assert outcome == ["stopped"]
    finally:
        ray.kill(actor, no_restart=True)
    with sqlite3.connect(tmp_path / "journal.db") as con:
        subs = con.execute("SELECT job_id FROM submissions").fetchall()
        arrivals = con.execute("SELECT job_id FROM decisions WHERE kind='arrival'").fetchall()
        done = dict(con.execute("SELECT job_id, COUNT(*) FROM events WHERE kind='complete' "
                                "GROUP BY job_id").fetchall())
    # each job journaled and decided once across the restart
    assert sorted(subs) == sorted(arrivals) == [(s.job_id,) for s in specs]
    assert done == dict.fromkeys(admitted, 1)  # every admitted job completed, once
    assert {j["job_id"] for j in st["jobs"] if j["state"] == "done"} >= admitted


def _wait_done(actor, jobs: set[str], timeout_s: float) -> dict:
    """The service's status once every job in ``jobs`` is done (its restarts ridden out)."""
    end = time.time() + timeout_s
    st: dict = {}
    while time.time() < end:
        try:
            st = ray.get(actor.status.remote(), timeout=30)
        except ray.exceptions.RayError:  # restarting
            time.sleep(0.5)
            continue
        if {j["job_id"] for j in st["jobs"] if j["state"] == "done"} >= jobs:
            return st
        time.sleep(0.5)
    raise AssertionError(f"jobs not done after {timeout_s} s: {st}")


def test_the_watcher_says_gone_when_the_service_was_stopped_for_good(ray_session, tmp_path):
    cluster = Cluster(servers=(
        Server(server_id="m/w", pool=Pool.WORKER, capacity=Resources(cpu=1, memory_gb=4)),
        Server(server_id="m/ps", pool=Pool.PS, capacity=Resources(cpu=1, memory_gb=4))),
        slot_seconds=SLOT_S)
    cfg = ServiceConfig(slot_seconds=SLOT_S, horizon=500, prices=(10.0, 1.0, 10.0, 1.0))
    actor = service_actor().options(
        name=SERVICE_NAME, namespace=SERVICE_NAMESPACE, lifetime="detached",
    ).remote(str(tmp_path), cfg.to_json(), cluster.to_dict(), None)
    assert ray.get(actor.ping.remote())
    ray.kill(actor, no_restart=True)
    assert watch_service(actor, poll_s=0.2, give_up_s=30) == "gone"


@pytest.mark.faults
def test_a_node_killed_mid_slot_does_not_wedge_the_loop(ray_session, tmp_path, tau):
    """The raylet of the node a job trains on dies in the middle of a slot."""
    extra = ray_session.cluster.add_node(num_cpus=0, num_gpus=1,
                                         object_store_memory=100 * 2**20,
                                         resources={SERVER_MARK + "gpu2": 1.0})
    ray_session.cluster.wait_for_nodes()
    nodes = dict(ray_session.node_ids, gpu2=extra.node_id)
    gpu = Resources(gpu=1, cpu=4, memory_gb=16, bandwidth_gbps=10)
    servers = (Server(server_id="gpu2", pool=Pool.WORKER, capacity=gpu),
               Server(server_id="gpu0", pool=Pool.WORKER, capacity=gpu),
               Server(server_id="head", pool=Pool.PS,
                      capacity=Resources(cpu=8, memory_gb=32, bandwidth_gbps=10)))
    cluster = Cluster(servers=servers, slot_seconds=SLOT_S)
    node_of = {i: nodes[s.server_id] for i, s in enumerate(servers)}
    spec = job_spec("moving", n=1, m=int(4 * SLOT_S / tau), tau_s=tau, gpu=1)
    cfg = ServiceConfig(slot_seconds=SLOT_S, horizon=80, history=(spec,),
                        runtime={"start_timeout_s": 20.0})
    before = _alive_actors("Worker", "PSShard")
    svc = SchedulerService(tmp_path, config=cfg, cluster=cluster, node_of=node_of)
    killed = False
    try:
        assert svc.submit(spec)["admitted"]
        svc.start()
        deadline = time.time() + 120
        while time.time() < deadline and not killed:  # kill once it trains on gpu2
            rt = svc.executor.runtimes.get("moving")  # type: ignore[attr-defined]
            if rt is not None and rt.running and rt.worker_servers == [0]:
                time.sleep(SLOT_S / 4)  # mid-slot
                ray_session.cluster.remove_node(extra, allow_graceful=False)
                killed = True
            time.sleep(0.05)
        assert killed, "the job never trained on the node to kill"
        deadline = time.time() + 150
        runtimes = {}  # every runtime the job had: a lost node may replace it
        while time.time() < deadline and svc.loop.state.records["moving"].completion is None:
            assert svc.error is None, svc.error
            if (rt := svc.executor.runtimes.get("moving")) is not None:  # type: ignore[attr-defined]
                runtimes[id(rt)] = rt
            time.sleep(0.5)
        strikes = [why for rt in runtimes.values() for why, _ in rt.backoffs
                   if why.startswith("strike")]
        assert runtimes and not strikes, strikes  # a lost node is never the job's fault
        st = svc.status()
        assert svc.error is None and st["phase"] != "stopped"
        assert svc.loop.state.records["moving"].completion is not None  # moved, completed
        assert node_of[0] != extra.node_id  # server gpu2 now stands on a live node
        assert any(kind == "node_lost" for _, _, kind, _ in svc.journal.events())
    finally:
        svc.close()
        if not killed:
            ray_session.cluster.remove_node(extra)
    for _ in range(40):  # ray.kill is asynchronous
        if not _alive_actors("Worker", "PSShard") - before:
            break
        time.sleep(0.25)
    assert not _alive_actors("Worker", "PSShard") - before  # no orphan left
    out = faults.journal_outcome(tmp_path / "journal.db", ["moving"], "node loss")
    assert out.lost == 0 and out.duplicated == 0, out  # journaled once, decided once
    assert out.admitted == out.completed == 1, out
