"""The scheduler service on Ray: CLI end to end, placement on nodes, a lost node, a node
that joins, and what ``psched run`` writes.

All on the session's Ray (tests/conftest.py) with one-to-two-second slots and tiny models. The
service actor's restart is in tests/test_service_faults.py and tests/test_faults.py, the
embedded Ray's loopback-only sockets in the fresh-shell test of tests/test_faults.py.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sqlite3
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray

ray = pytest.importorskip("ray")

from service_jobs import SLOT_S, job_spec, job_toml  # noqa: E402

from psched.cli.main import main  # noqa: E402
from psched.core.model import Cluster, Pool, Resources, Server  # noqa: E402
from ray_cluster.runtime.executor import (  # noqa: E402
    SERVER_MARK,
)
from ray_cluster.service import (  # noqa: E402
    SERVICE_NAME,
    SERVICE_NAMESPACE,
    SchedulerService,
    ServiceConfig,
)

ROOT = Path(__file__).parent.parent


def _stop(actor) -> None:
    ray.get(actor.stop.remote())
    ray.kill(actor, no_restart=True)
    for _ in range(50):
        try:
            ray.get_actor(SERVICE_NAME, namespace=SERVICE_NAMESPACE)
        except ValueError:
            return
        time.sleep(0.2)


def _wait_over(actor, timeout: float) -> dict:
    end = time.time() + timeout
    while time.time() < end:
        try:
            st = ray.get(actor.status.remote(), timeout=30)
        except ray.exceptions.RayError:  # restarting
            time.sleep(0.5)
            continue
        if st["jobs"] and all(j["state"] not in ("running", "waiting", "queued")
                              for j in st["jobs"]):
            return st
        time.sleep(0.5)
    raise AssertionError(f"jobs not over after {timeout} s: {st}")


def _losses(db: Path, job_id: str) -> list[float]:
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT info FROM progress WHERE job_id = ? ORDER BY t",
                           (job_id,)).fetchall()
    return [float(m.group(1)) for (info,) in rows if (m := re.search(r"eval=([0-9.]+)", info))]


def test_cli_jobs_are_decided_run_as_planned_and_complete(ray_session, tmp_path, tau, capsys):
    """serve / submit / status / logs / cancel on the session Ray, three jobs, the default
    policy (oasis-rp: a job may be held at its arrival and admitted at a boundary)."""
    work = tmp_path / "svc"
    # Slack for busy cores: real training here runs 2-5x slower than the module's probe when
    # several workers share the two cores, and a job behind a tight plan is re-planned or
    # dropped. A given-tau job declares 3x the probe's tau and a third of the mini-batches:
    # the same work in slots as planned, a third of the real training.
    slack = 3
    files = []
    for i, (n, m, value, given) in enumerate([(4, 350, 10, True), (2, 500, 6, True),
                                              (1, 150, 4, False)]):
        f = tmp_path / f"job{i}.toml"
        f.write_text(job_toml(job_id=f"job{i}", partitions=n,
                              minibatches=m // slack if given else m,
                              tau_s=slack * tau if given else None, value=value, target=6))
        files.append(str(f))
    hist = tmp_path / "hist.toml"
    hist.write_text(job_toml(job_id="h", partitions=2, minibatches=600 // slack,
                             tau_s=slack * tau, value=10, target=6))
    addr = ray_session.cluster.address
    assert main(["serve", "--address", addr, "--dir", str(work), "--slot-seconds", str(SLOT_S),
                 "--history", str(hist), "--worker-cpus", "2", "--policy", "oasis"]) == 0
    actor = ray.get_actor(SERVICE_NAME, namespace=SERVICE_NAMESPACE)
    try:
        assert main(["submit", "--address", addr, *files]) == 0
        out = capsys.readouterr().out
        assert out.count("arrival slot") == 3
        assert main(["submit", "--address", addr, files[0]]) == 2  # never admitted twice
        assert "submitted before" in capsys.readouterr().err
        st = _wait_over(actor, 300)
        assert main(["status", "--address", addr]) == 0
        table = capsys.readouterr().out
        assert all(f"job{i}" in table for i in range(3))
        assert main(["logs", "--address", addr, "job0"]) == 0
        logged = capsys.readouterr().out  # its decisions: held at arrival, then decided
        assert re.search(r"^slot \d+: (arrival|hold): ", logged, re.M), logged
        if any(j["job_id"] == "job0" and j["admitted"] for j in st["jobs"]):
            assert re.search(r"(arrival|deferred): admitted", logged), logged
        assert main(["cancel", "--address", addr, "job0"]) == 2  # over: nothing to cancel
    finally:
        _stop(actor)
    states = {j["job_id"]: j for j in st["jobs"]}
    admitted = [j for j in states.values() if j["admitted"]]
    assert admitted, "the policy admitted nothing"
    db = work / "journal.db"
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT t, plan FROM slots ORDER BY t").fetchall()
    assert [t for t, _ in rows] == list(range(len(rows)))
    plans = [json.loads(p) for _, p in rows]
    for j in admitted:
        assert j["state"] == "done" and j["done"] >= j["work"] - 1e-6, (j, states)
        losses = _losses(db, j["job_id"])
        assert losses, j["job_id"]  # it trained; over several slots, its loss fell
        assert len(losses) == 1 or losses[-1] < losses[0], (j["job_id"], losses)
    # every slot ran what the job's latest decision by then (its arrival, or a re-plan at a
    # boundary, journaled) planned for that slot, servers and counts, or what it ran in the
    # slot before (below), and nothing else, up to
    # the slot the job completed in: a job trains until each slot's end, so one that runs
    # faster than the speed it was planned at (a declared tau, or a probe on busy cores)
    # completes before its plan ends and its later slots are not run (journaled as its
    # ``complete`` event); how many workers a plan gives depends on the measured speed, so a
    # change of size is not asserted here (a resize at a boundary: tests/test_ray_runtime.py,
    # tests/test_ray_oasis_rp_ahead.py)
    with sqlite3.connect(db) as con:
        decided = con.execute("SELECT job_id, slot, schedule FROM decisions "
                              "WHERE admitted = 1 ORDER BY seq").fetchall()
        completed = dict(con.execute("SELECT job_id, slot FROM events "
                                     "WHERE kind = 'complete'").fetchall())
    assert completed.keys() == {j["job_id"] for j in admitted}
    for t, plan in enumerate(plans):
        latest: dict[str, dict] = {}
        for job_id, slot, schedule in decided:
            if slot <= t:
                latest[job_id] = json.loads(schedule)
        want = {j: sched[str(t)] for j, sched in latest.items()
                if str(t) in sched and completed[j] >= t}
        # or, once a start-up cost is measured, where the job ran in the slot before: a move,
        # pause or resize that does not pay for its start-up is not made (stay_put), and a
        # job planned onto servers such a job kept runs its planned counts elsewhere
        before = plans[t - 1] if t else {}
        assert plan.keys() >= want.keys(), (t, plan, want, completed)
        assert all(a == want.get(j) or (j in before and a == before[j])
                   or (j in want and _counts(a) == _counts(want[j]))
                   for j, a in plan.items()), (t, plan, want, before, completed)
    assert any(plans), "nothing ran"


def _counts(alloc: list) -> tuple[int, int]:
    """(workers, PS) of a journaled allocation ``[[[server, n], ...], [[server, n], ...]]``."""
    return sum(n for _, n in alloc[0]), sum(n for _, n in alloc[1])


def test_actors_follow_the_plan_and_a_lost_node_moves_the_job(ray_session, tmp_path, tau):
    """Head + three fake-GPU nodes; the node running the job is removed mid-run."""
    extra = ray_session.cluster.add_node(num_cpus=0, num_gpus=1,
                                         object_store_memory=100 * 2**20,
                                         resources={SERVER_MARK + "gpu2": 1.0})
    ray_session.cluster.wait_for_nodes()
    nodes = dict(ray_session.node_ids, gpu2=extra.node_id)
    gpu = Resources(gpu=1, cpu=4, memory_gb=16, bandwidth_gbps=10)
    servers = (Server(server_id="gpu2", pool=Pool.WORKER, capacity=gpu),
               Server(server_id="gpu0", pool=Pool.WORKER, capacity=gpu),
               Server(server_id="gpu1", pool=Pool.WORKER, capacity=gpu),
               Server(server_id="head", pool=Pool.PS,
                      capacity=Resources(cpu=8, memory_gb=32, bandwidth_gbps=10)))
    cluster = Cluster(servers=servers, slot_seconds=SLOT_S)
    node_of = {i: nodes[s.server_id] for i, s in enumerate(servers)}
    spec = job_spec("moving", n=1, m=int(5 * SLOT_S / tau), tau_s=tau, gpu=1)
    cfg = ServiceConfig(slot_seconds=SLOT_S, horizon=60, history=(spec,),
                        runtime={"start_timeout_s": 30.0})
    svc = SchedulerService(tmp_path, config=cfg, cluster=cluster, node_of=node_of)
    removed = False
    try:
        assert svc.submit(spec)["admitted"]
        for _ in range(40):
            svc.run_for(1)
            rec = svc.loop.state.records["moving"]
            if rec.completion is not None:
                break
            rt = svc.executor.runtimes.get("moving")
            if rt is None or not rt.workers:
                continue
            where = {n for n, _ in ray.get([w.where.remote() for w in rt.workers])}
            planned = {node_of[h] for h, _ in svc._slot_plan["moving"].workers}
            assert where == planned  # actors on the nodes their plan names
            if not removed and where == {extra.node_id}:
                ray_session.cluster.remove_node(extra)
                removed = True
                for _ in range(60):
                    if not any(n["Alive"] for n in ray.nodes() if n["NodeID"] == extra.node_id):
                        break
                    time.sleep(0.5)
        rec = svc.loop.state.records["moving"]
        assert removed, "the job never ran on the node to remove"
        assert rec.completion is not None  # it moved and completed
        assert node_of[0] != extra.node_id  # server gpu2 now stands on a live node
        assert any(kind == "node_lost" for _, _, kind, _ in svc.journal.events())
    finally:
        svc.close()
        if not removed:
            ray_session.cluster.remove_node(extra)


def test_a_node_that_joins_mid_run_becomes_a_server_and_takes_new_jobs(ray_session, tmp_path,
                                                                         tau):
    """Both GPU servers are busy with one job; a third GPU node joins; the next job is
    planned onto it at once, runs there and completes."""
    gpu = Resources(gpu=1, cpu=4, memory_gb=16, bandwidth_gbps=10)
    servers = (Server(server_id="gpu0", pool=Pool.WORKER, capacity=gpu),
               Server(server_id="gpu1", pool=Pool.WORKER, capacity=gpu),
               Server(server_id="head", pool=Pool.PS,
                      capacity=Resources(cpu=8, memory_gb=32, bandwidth_gbps=10)))
    cluster = Cluster(servers=servers, slot_seconds=SLOT_S)
    node_of = {i: ray_session.node_ids[s.server_id] for i, s in enumerate(servers)}
    big = job_spec("big", n=2, m=int(6 * SLOT_S / tau), tau_s=tau, gpu=1)
    late = job_spec("late", n=1, m=int(2 * SLOT_S / tau), tau_s=tau, gpu=1)
    cfg = ServiceConfig(slot_seconds=SLOT_S, horizon=60, history=(big, late),
                        runtime={"start_timeout_s": 30.0})
    svc = SchedulerService(tmp_path, config=cfg, cluster=cluster, node_of=node_of)
    extra = None
    try:
        assert svc.submit(big)["admitted"]
        svc.run_for(1)
        extra = ray_session.cluster.add_node(
            num_cpus=0, num_gpus=1, object_store_memory=100 * 2**20,
            resources={SERVER_MARK + "gpu3": 1.0, "psched_pool:worker": 1.0,
                       "psched_worker_cpu": 4.0, "psched_worker_memory_gb": 16.0})
        ray_session.cluster.wait_for_nodes()
        svc.run_for(1)  # the slot boundary notices the node
        assert [s.server_id for s in svc.cluster.servers][3:] == ["gpu3"]
        assert node_of[3] == extra.node_id
        assert svc.submit(late)["admitted"]
        first = min(svc.schedules["late"])
        assert svc.schedules["late"][first].workers == ((3, 1),)  # at once, on the new node
        assert first < svc.planned_end["big"]  # it does not wait for the busy servers
        first_seen: set[str] = set()  # the nodes of late's first slot with workers
        for _ in range(30):
            svc.run_for(1)
            rt = svc.executor.runtimes.get("late")
            if not first_seen and rt is not None and rt.workers:
                first_seen = {n for n, _ in ray.get([w.where.remote() for w in rt.workers])}
            if svc.loop.state.records["late"].completion is not None:
                break  # what the new node was for; big goes on on the old ones
        # it starts on the new node; a job that falls behind (a loaded machine) may later be
        # re-planned onto servers that big's plan frees, so only its first slot is asserted
        assert first_seen == {extra.node_id}
        assert svc.loop.state.records["late"].completion is not None
        assert any(kind == "cluster_grown" for _, _, kind, _ in svc.journal.events())
    finally:
        svc.close()
        if extra is not None:
            ray_session.cluster.remove_node(extra)


def test_run_writes_the_simulate_files_from_what_really_ran(ray_session, tmp_path, tau, capsys):
    from psched.traces.native import write_trace

    trace = tmp_path / "t.csv"
    write_trace(trace, [dataclasses.replace(job_spec("r0", n=1, m=int(1.5 * SLOT_S / tau),
                                                  tau_s=tau), arrival=0),
                        dataclasses.replace(job_spec("r1", n=1, m=int(1.5 * SLOT_S / tau),
                                                  tau_s=tau), arrival=1)])
    out = tmp_path / "out"
    assert main(["run", str(trace), "--address", ray_session.cluster.address, "--out", str(out),
                 "--slot-seconds", str(SLOT_S), "--worker-cpus", "2", "--horizon", "8",
                 "--policy", "oasis", "--profile"]) == 0
    shown = capsys.readouterr()
    assert shown.err.count("tau of softmax") == 1  # both jobs share one profile
    # progress per slot, then one line per job, then where it wrote
    assert re.search(r"^slot \d+ ended: (\d+|no) job\(s\) in play$", shown.err, re.M), shown.err
    assert shown.err.rstrip().endswith(f"wrote {out}")
    assert re.findall(r"^(r\d): ", shown.out, re.M) == ["r0", "r1"]
    for f in ("summary.json", "cluster.json", "oasis/jobs.csv", "oasis/allocations.csv"):
        assert (out / f).exists(), f
    summary = json.loads((out / "summary.json").read_text())
    assert summary["params"]["executor"] == "ray"
    import csv

    rows = list(csv.DictReader((out / "oasis" / "jobs.csv").open()))
    assert {r["job_id"] for r in rows} == {"r0", "r1"}
    for r in rows:  # completed, or still running when the run ended: never dropped
        if r["admitted"] == "1":
            assert r["completion"] != "" or r["reason"] == ""
            assert (r["completion"] != "") == (float(r["utility"]) > 0)
    assert summary["params"]["horizon"] == 8
    allocs = list(csv.DictReader((out / "oasis" / "allocations.csv").open()))
    assert allocs and all(int(a["count"]) > 0 for a in allocs)
