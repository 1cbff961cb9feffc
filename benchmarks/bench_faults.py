"""Fault-injection benchmark: each fault of the suite once, with what it cost (BENCHMARKS.md §9).

    python benchmarks/bench_faults.py [--out benchmarks/results/faults.md] [--only NAME ...]

Runs the scenarios of :mod:`ray_cluster.service.faults` (the same ones ``tests/test_faults.py``
asserts on) on a local Ray started here (a ``ray.cluster_utils.Cluster`` on 127.0.0.1 with
token authentication on; a second node joins for the node-loss row), and ``psched serve`` as a
subprocess for the driver row. Prints a Markdown table: fault, jobs accepted / lost /
duplicated, admitted / completed, training progress lost, time to resume, strikes.

Time to resume: runtime rows, from the kill until the job has applied a new mini-batch; service
rows, from the kill until the next slot starts (or, for the burst, until the service answers
again). Progress lost (an upper bound, the most over the row's faults): the seconds from the
last committed checkpoint (runtime rows) or journaled slot end (service rows) to the fault.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SLOT_S = 1.5
TAU_S = 0.004


def _last_slot_end(db: Path) -> float:
    with sqlite3.connect(db) as con:
        row = con.execute("SELECT MAX(ended) FROM slots").fetchone()
    return float(row[0] or 0.0)


def _actor(work: Path, cfg, head: str):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from ray_cluster.service import SERVICE_NAME, SERVICE_NAMESPACE, faults, service_actor

    cluster = faults.one_server_cluster(cfg.slot_seconds)
    return service_actor().options(
        name=SERVICE_NAME, namespace=SERVICE_NAMESPACE, lifetime="detached",
        scheduling_strategy=NodeAffinitySchedulingStrategy(head, soft=False),
    ).remote(str(work), cfg.to_json(), cluster.to_dict(), {"0": head, "1": head})


def _named():
    import ray

    from ray_cluster.service import SERVICE_NAME, SERVICE_NAMESPACE

    return ray.get_actor(SERVICE_NAME, namespace=SERVICE_NAMESPACE)


def _stop_named() -> None:
    import contextlib

    import ray

    with contextlib.suppress(ray.exceptions.RayError, ValueError):
        ray.get(_named().stop.remote(), timeout=120)
    with contextlib.suppress(ray.exceptions.RayError, ValueError):
        ray.kill(_named(), no_restart=True)
    time.sleep(1.0)


def service_actor_kill(work: Path, cluster, head: str, raylet_pid: int):
    import ray

    from ray_cluster.service import ServiceConfig, faults
    from ray_cluster.workloads.jobspec import spec_to_json

    specs = [faults.small_spec(f"a{i}", minibatches=600, tau_s=TAU_S) for i in range(3)]
    cfg = ServiceConfig(slot_seconds=SLOT_S, horizon=80, history=tuple(specs),
                        runtime={"checkpoint_every_s": 0.5})
    actor = _actor(work, cfg, head)
    db = work / "journal.db"
    try:
        acked = [s.job_id for s in specs
                 if "error" not in ray.get(actor.submit.remote(spec_to_json(s)))]
        while faults.slots_journaled(db) < 2:
            time.sleep(0.1)
        time.sleep(SLOT_S / 2)  # mid-slot
        at = time.time()
        lost = at - _last_slot_end(db)
        faults.kill_service_actor_process(raylet_pid)
        faults.wait_jobs_over(lambda: ray.get(_named().status.remote(), timeout=30), 300)
    finally:
        _stop_named()
    nxt = faults.first_slot_after(db, at)
    return faults.journal_outcome(db, acked, "service actor kill -9", lost_s=lost,
                                  interval_s=SLOT_S,
                                  resume_s=[nxt - at if nxt else math.nan])


def writer_burst(work: Path, cluster, head: str, raylet_pid: int):
    import ray

    from ray_cluster.service import ServiceConfig, faults

    specs = [faults.small_spec(f"b{i:03d}", minibatches=200, tau_s=TAU_S,
                               value=40.0 if i % 50 == 7 else 0.05) for i in range(200)]
    cfg = ServiceConfig(slot_seconds=SLOT_S, horizon=80, prices=(2.0, 0.5, 2.0, 0.5))
    _actor(work, cfg, head)
    db = work / "journal.db"
    try:
        acked, resume = faults.submit_burst(
            _named, specs, kill_at=(60, 140),
            kill=lambda: faults.kill_service_actor_process(raylet_pid))
        faults.wait_jobs_over(lambda: ray.get(_named().status.remote(), timeout=30), 300)
    finally:
        _stop_named()
    return faults.journal_outcome(db, acked, "journal writer kill -9 x2, 200-job burst",
                                  resume_s=resume)


def node_loss(work: Path, cluster, head: str, raylet_pid: int):
    import ray

    from psched.core.model import Cluster, Pool, Resources, Server
    from ray_cluster.service import SchedulerService, ServiceConfig, faults

    extra = cluster.add_node(num_cpus=2, object_store_memory=100 * 2**20)
    cluster.wait_for_nodes()
    cap = Resources(cpu=3, memory_gb=16, bandwidth_gbps=10)
    model = Cluster(servers=(Server(server_id="n2/w", pool=Pool.WORKER, capacity=cap),
                             Server(server_id="head/w", pool=Pool.WORKER, capacity=cap),
                             Server(server_id="head/ps", pool=Pool.PS, capacity=cap)),
                    slot_seconds=SLOT_S)
    specs = [faults.small_spec(f"n{i}", minibatches=900, tau_s=TAU_S) for i in range(2)]
    cfg = ServiceConfig(slot_seconds=SLOT_S, horizon=80, history=tuple(specs),
                        runtime={"start_timeout_s": 20.0, "checkpoint_every_s": 0.5})
    svc = SchedulerService(work, config=cfg, cluster=model,
                           node_of={0: extra.node_id, 1: head, 2: head})
    at, notes = math.nan, ""
    try:
        acked = [s.job_id for s in specs if svc.submit(s).get("decided")]
        svc.start()
        end = time.time() + 60
        while math.isnan(at) and time.time() < end:
            plan = dict(svc._slot_plan) if svc._phase[0] == "run" else {}
            if any(h == 0 for a in plan.values() for h, _ in a.workers):
                time.sleep(SLOT_S / 3)
                at = time.time()
                cluster.remove_node(extra, allow_graceful=False)
            time.sleep(0.05)
        try:
            faults.wait_jobs_over(svc.status, 240)
        except TimeoutError as err:
            notes = f"not over: {str(err)[:80]}"
        events = [k for _, _, k, _ in svc.journal.events()]
        notes = notes or f"node_lost journaled: {'node_lost' in events}"
    finally:
        svc.close()
        if math.isnan(at):
            cluster.remove_node(extra)
    db = work / "journal.db"
    nxt = faults.first_slot_after(db, at) if not math.isnan(at) else None
    del ray
    return faults.journal_outcome(db, acked, "node loss mid-slot (2-node Cluster)",
                                  resume_s=[nxt - at if nxt else math.nan], notes=notes)


def driver_kill(work: Path, *_: object):
    from ray_cluster.service import faults

    work.mkdir(parents=True, exist_ok=True)
    files = []
    for job_id in ("d0", "d1"):
        f = work.parent / f"{job_id}.toml"
        f.write_text((Path(__file__).parent.parent / "examples/jobs/digits-a.toml").read_text()
                     .replace('id = "digits-a"', f'id = "{job_id}"')
                     .replace("minibatches = 120", "minibatches = 700")
                     .replace("tau_s = 0.01", f"tau_s = {TAU_S}"))
        files.append(str(f))
    args = ("--slot-seconds", str(SLOT_S), "--worker-cpus", "1", "--history", files[0],
            "--checkpoint-every", "0.5", "--policy", "oasis")
    proc = faults.start_serve(work, *args)
    db = work / "journal.db"
    try:
        faults.psched("submit", "--dir", str(work), *files)
        while faults.slots_journaled(db) < 2:
            time.sleep(0.1)
        time.sleep(SLOT_S / 2)  # mid-slot
        at = time.time()
        lost = at - _last_slot_end(db)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        proc = faults.start_serve(work, *args)
        faults.wait_jobs_over(lambda: faults.cli_status(work), 300)
    finally:
        faults.psched("stop", "--dir", str(work), timeout_s=300)
        if proc.poll() is None:
            proc.kill()
    nxt = faults.first_slot_after(db, at)
    return faults.journal_outcome(db, ["d0", "d1"], "driver (psched serve) kill -9 + restart",
                                  lost_s=lost, interval_s=SLOT_S,
                                  resume_s=[nxt - at if nxt else math.nan])


def journal_damage(work: Path, *_: object):
    from ray_cluster.service import faults
    from ray_cluster.service.journal import Journal

    j = Journal(work / "journal.db")
    j.set_meta({"config": {"policy": "fifo"}})
    j.close()
    (work / "ckpt" / "x").mkdir(parents=True)
    refused = []
    for damage in (b"", os.urandom(8192)):
        (work / "journal.db").write_bytes(damage)
        t0 = time.time()
        out = faults.psched("serve", "--dir", str(work), "--policy", "fifo")
        refused.append((out.returncode, len(out.stderr.strip().splitlines()), time.time() - t0))
    return faults.FaultOutcome(
        fault="empty / garbage journal with checkpoints", accepted=0, lost=0, duplicated=0,
        admitted=0, completed=0,
        notes="; ".join(f"rc {rc}, {n} line(s), {s:.1f} s" for rc, n, s in refused)
        + " (serve refuses; --fresh sets both aside)")


def runtime_rows(work: Path, *_: object):
    from ray_cluster.service import faults

    (work / "w").mkdir(parents=True)
    (work / "s").mkdir(parents=True)
    return [faults.worker_kill(work / "w"), faults.shard_kills(work / "s", kills=3)]


SCENARIOS: dict[str, Callable[..., object]] = {
    "runtime": runtime_rows, "actor": service_actor_kill, "burst": writer_burst,
    "node": node_loss, "driver": driver_kill, "journal": journal_damage,
}


def _fmt(o) -> str:
    res = [r for r in o.resume_s if not math.isnan(r)]
    resume = ", ".join(f"{r:.2f}" for r in res) if res else "–"
    lost = f"≤ {o.lost_s:.2f} s" if o.lost_s else "0"
    interval = f"{o.interval_s:g} s" if o.interval_s else "–"
    return (f"| {o.fault} | {o.accepted} | {o.lost} | {o.duplicated} | {o.completed}/"
            f"{o.admitted} | {lost} | {interval} | {resume} | {o.strikes} | {o.notes} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="also write the table here")
    ap.add_argument("--only", nargs="*", choices=sorted(SCENARIOS), help="run only these")
    args = ap.parse_args()
    from psched.cli.connect import ensure_token, use_token

    tmp = Path(tempfile.mkdtemp(prefix="psched-faults-"))
    use_token(ensure_token(tmp / "token"))
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    import ray
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, connect=True, head_node_args={
        "num_cpus": 2, "object_store_memory": 300 * 2**20, "include_dashboard": False,
        "_system_config": {"health_check_period_ms": 1000,
                           "health_check_failure_threshold": 5}})
    head = cluster.head_node.node_id
    raylet = int(cluster.head_node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0]
                 .process.pid)
    rows = []
    t_all = time.time()
    try:
        for name, fn in SCENARIOS.items():
            if args.only and name not in args.only:
                continue
            work = tmp / name
            work.mkdir()
            t0 = time.time()
            try:
                out = fn(work, cluster, head, raylet)
            except Exception as err:  # a row that failed is reported, not hidden
                print(f"{name}: FAILED: {type(err).__name__}: {err}", file=sys.stderr)
                continue
            for o in out if isinstance(out, list) else [out]:
                rows.append(_fmt(o))
                print(rows[-1], file=sys.stderr, flush=True)
            print(f"{name}: {time.time() - t0:.0f} s", file=sys.stderr)
    finally:
        ray.shutdown()
        cluster.shutdown()
    head_row = ("| fault | accepted | lost | duplicated | completed/admitted | progress lost "
                "| checkpoint interval | time to resume (s) | strikes | notes |\n"
                "|---|---|---|---|---|---|---|---|---|---|")
    table = "\n".join([head_row, *rows])
    load = os.getloadavg()
    footer = (f"\n\n{len(rows)} rows in {time.time() - t_all:.0f} s; load average "
              f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}; slot {SLOT_S} s")
    print(table + footer)
    if args.out:
        Path(args.out).write_text(table + footer + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
