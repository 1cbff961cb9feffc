"""Fault injection: the scenarios of the fault suite (``tests/test_faults.py``) and of its
benchmark (``benchmarks/bench_faults.py``), each run on a Ray the caller provides.

Every scenario injects one fault into real training and returns a :class:`FaultOutcome`:
accepted jobs lost or journaled twice, admitted jobs completed, training progress lost (in
mini-batches and seconds) and the time from the fault until training or the service was back.
The runtime scenarios drive one :class:`~ray_cluster.runtime.JobRuntime` through one slot;
the service scenarios read the journal (:mod:`ray_cluster.service.journal`) after the run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ray

from psched.core.model import Cluster, JobSpec, Pool, Resources, Server
from psched.core.utility import Utility
from ray_cluster.runtime import JobRuntime, RuntimeConfig, TrainingJob
from ray_cluster.workloads.builtin import get_workload

__all__ = [
    "FaultOutcome",
    "journal_outcome",
    "kill_service_actor_process",
    "shard_kills",
    "small_spec",
    "submit_burst",
    "worker_kill",
]

FAR_S = 120.0  #: a deadline no runtime scenario reaches: the sample budget ends training


@dataclasses.dataclass(frozen=True, kw_only=True)
class FaultOutcome:
    """What one injected fault cost."""

    fault: str  #: what was injected
    accepted: int  #: jobs the service acknowledged (or the runtime scenario's one job)
    lost: int  #: acknowledged jobs missing from the journal
    duplicated: int  #: jobs journaled (submitted or decided on arrival) more than once
    admitted: int  #: admitted jobs
    completed: int  #: admitted jobs that completed, each exactly once
    lost_batches: int = 0  #: mini-batches known applied and then rolled back
    lost_s: float = 0.0  #: most training time lost to one fault: fault time - last checkpoint
    interval_s: float | None = None  #: the checkpoint interval in force
    resume_s: list[float] = dataclasses.field(default_factory=list)  #: fault -> training again
    strikes: int = 0  #: strikes counted against the jobs (infrastructure faults: 0)
    notes: str = ""  #: anything else worth a line


def small_spec(job_id: str, *, minibatches: int, tau_s: float, value: float = 10.0,
               partitions: int = 1, cpu: float = 1.0) -> JobSpec:
    """A small softmax job on the digits data (the fault suite's workload)."""
    demand = Resources(cpu=cpu, memory_gb=1, bandwidth_gbps=1)
    return JobSpec(job_id=job_id, arrival=0, epochs=1, max_workers=partitions,
                   minibatches=minibatches, tau_s=tau_s, grad_mb=0.003,
                   tau_includes_comm=True, worker_demand=demand, ps_demand=demand,
                   utility=Utility(kind="sigmoid", value=value, decay=0.3, target=8),
                   workload="softmax", hparams='{"dataset": "digits"}')


# -- one job's runtime ------------------------------------------------------------------------
def _drive(rt: JobRuntime, inject: Callable[[JobRuntime], None]) -> None:
    """One slot of ``rt`` (until its budget), calling ``inject`` between finished tasks."""
    rt.begin(time.time() + FAR_S)
    while rt.pending() or rt.deferred_until is not None:
        if rt.pending():
            ready, _ = ray.wait(rt.pending(), num_returns=1, timeout=0.05)
            for ref in ready:
                rt.handle(ref)
        else:
            time.sleep(0.01)
        rt.poll()
        inject(rt)


def _runtime(job_id: str, workdir: Path, *, workers: int, minibatches: int,
             every_s: float) -> JobRuntime:
    job = TrainingJob(job_id=job_id, workload=get_workload("softmax"), n_partitions=workers,
                      minibatches=minibatches, epochs=1)
    cfg = RuntimeConfig(mode="async", lr=0.05, checkpoint_dir=str(workdir),
                        checkpoint_every_s=every_s)
    return JobRuntime(job, cfg)


def worker_kill(workdir: Path, *, minibatches: int = 300, every_s: float = 0.5) -> FaultOutcome:
    """Kill one worker actor mid-slot (after the first interval's checkpoint)."""
    rt = _runtime("wkill", workdir, workers=2, minibatches=minibatches, every_s=every_s)
    state: dict[str, Any] = {}

    def inject(r: JobRuntime) -> None:
        if "at" not in state and r.version >= 1:
            state["actor"], state["at"], state["from"] = r.workers[0], time.time(), r.batches
            ray.kill(r.workers[0], no_restart=True)
        elif ("at" in state and "back" not in state and r.batches > state["from"]
              and any("worker 0 lost" in e for _, e in r.events)):
            state["back"] = time.time() - state["at"]

    try:
        rt.resize([None, None], [None])
        _drive(rt, inject)
        rt.end()
        done = rt.done and rt.fatal is None
        return FaultOutcome(fault="worker kill", accepted=1, lost=0, duplicated=0, admitted=1,
                            completed=int(done), lost_batches=0, lost_s=0.0,
                            interval_s=every_s, resume_s=[state.get("back", float("nan"))],
                            strikes=rt._strikes,
                            notes=f"rollbacks {len(rt.rollbacks)}")
    finally:
        rt.close()


def shard_kills(workdir: Path, *, kills: int = 3, minibatches: int = 600,
                every_s: float = 0.5) -> FaultOutcome:
    """Kill a PS shard ``kills`` times in one slot, each once training has resumed and a
    new checkpoint is committed. Each rollback must land on the latest committed checkpoint."""
    rt = _runtime("skill", workdir, workers=2, minibatches=minibatches, every_s=every_s)
    marks: list[dict[str, Any]] = []

    def inject(r: JobRuntime) -> None:
        if (marks and "back" not in marks[-1] and len(r.rollbacks) == len(marks)
                and r.batches > r.rollbacks[-1][1]):
            marks[-1]["back"] = time.time() - marks[-1]["at"]
        ready = not marks or ("back" in marks[-1] and r.version > marks[-1]["version"])
        if len(marks) < kills and ready and r.version >= 1 and len(r.rollbacks) == len(marks):
            latest = r.store.latest()
            now = time.time()
            marks.append({"at": now, "version": r.version, "since_ckpt": now - r._last_ckpt,
                          "ckpt_batches": latest.batches if latest else 0})
            ray.kill(r.shards[-1], no_restart=True)

    try:
        rt.resize([None, None], [None, None])
        _drive(rt, inject)
        rt.end()
        lost = sum(max(0, live - back) for live, back in rt.rollbacks)
        on_latest = all(back == m["ckpt_batches"] for (_, back), m in zip(rt.rollbacks, marks,
                                                                            strict=False))
        return FaultOutcome(
            fault=f"PS-shard kill x{kills} in one slot", accepted=1, lost=0, duplicated=0,
            admitted=1, completed=int(rt.done and rt.fatal is None), lost_batches=lost,
            lost_s=max((m["since_ckpt"] for m in marks), default=0.0), interval_s=every_s,
            resume_s=[m.get("back", float("nan")) for m in marks], strikes=rt._strikes,
            notes=f"rollbacks {len(rt.rollbacks)}, each to the latest checkpoint: {on_latest}")
    finally:
        rt.close()


# -- the service: journal, actor process -------------------------------------------------------
def journal_outcome(db: Path, acknowledged: Sequence[str], fault: str, **extra: Any
                    ) -> FaultOutcome:
    """Lost, duplicated, admitted and completed jobs as the journal ``db`` records them."""
    with sqlite3.connect(db) as con:
        subs = [j for (j,) in con.execute("SELECT job_id FROM submissions")]
        arrivals = [j for (j,) in con.execute(
            "SELECT job_id FROM decisions WHERE kind = 'arrival'")]
        admitted = {j for (j,) in con.execute(
            "SELECT DISTINCT job_id FROM decisions WHERE kind = 'arrival' AND admitted = 1")}
        done = dict(con.execute("SELECT job_id, COUNT(*) FROM events WHERE kind = 'complete' "
                                "GROUP BY job_id").fetchall())
    dup = (len(subs) - len(set(subs))) + (len(arrivals) - len(set(arrivals)))
    return FaultOutcome(fault=fault, accepted=len(acknowledged),
                        lost=len(set(acknowledged) - set(subs)), duplicated=dup,
                        admitted=len(admitted),
                        completed=sum(1 for j in admitted if done.get(j) == 1), **extra)


def _actor_processes(root_pid: int, name: str) -> list[Any]:
    import psutil

    try:
        kids = psutil.Process(root_pid).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for p in kids:
        try:
            if name in " ".join(p.cmdline()) or p.name().startswith(name[:15]):
                out.append(p)
        except psutil.Error:
            continue
    return out


def kill_service_actor_process(root_pid: int) -> int:
    """``kill -9`` the ``ray::ServiceActor`` process under ``root_pid`` (a raylet or a
    ``psched serve``); returns its pid. Only processes under that root are ever touched."""
    procs = _actor_processes(root_pid, "ray::ServiceActor")
    if len(procs) != 1:
        raise RuntimeError(f"expected one ServiceActor under pid {root_pid}, found "
                           f"{[p.pid for p in procs]}")
    os.kill(procs[0].pid, signal.SIGKILL)
    return int(procs[0].pid)


def submit_burst(actor_of: Callable[[], Any], specs: Sequence[JobSpec],
                 kill_at: Sequence[int], kill: Callable[[], None],
                 timeout_s: float = 300.0) -> tuple[list[str], list[float]]:
    """Submit ``specs`` one after another as fast as the service answers, calling ``kill``
    before submissions number ``kill_at``; a submission that fails is retried until the
    service answers (``submitted before`` means the first try was journaled). Returns the
    acknowledged job ids and, per kill, the seconds until the service answered again."""
    from ray_cluster.workloads.jobspec import spec_to_json

    acked: list[str] = []
    resume: list[float] = []
    end = time.time() + timeout_s
    for i, spec in enumerate(specs):
        killed_at = None
        if i in kill_at:
            kill()
            killed_at = time.time()
        while True:
            if time.time() > end:
                raise TimeoutError(f"the service did not answer within {timeout_s} s")
            try:
                out = ray.get(actor_of().submit.remote(spec_to_json(spec)), timeout=60)
            except (ray.exceptions.RayError, ValueError):
                time.sleep(0.2)
                continue
            if "error" in out and "submitted before" not in out["error"]:
                raise RuntimeError(out["error"])
            acked.append(spec.job_id)
            if killed_at is not None:
                resume.append(time.time() - killed_at)
            break
    return acked, resume


def wait_jobs_over(status: Callable[[], dict[str, Any]], timeout_s: float) -> dict[str, Any]:
    """Poll ``status`` until every job is over (a status that raises: the service restarts)."""
    end = time.time() + timeout_s
    st: dict[str, Any] = {}
    while time.time() < end:
        try:
            st = status()
        except (ray.exceptions.RayError, ValueError, subprocess.SubprocessError):
            time.sleep(0.5)
            continue
        if st.get("jobs") and all(j["state"] not in ("running", "waiting", "queued")
                                  for j in st["jobs"]):
            return st
        time.sleep(0.5)
    raise TimeoutError(f"jobs not over after {timeout_s} s: {st}")


def first_slot_after(db: Path, t: float) -> float | None:
    """Start time of the first journaled slot that started after wall time ``t``."""
    with sqlite3.connect(db) as con:
        row = con.execute("SELECT MIN(started) FROM slots WHERE started > ?", (t,)).fetchone()
    return None if row is None or row[0] is None else float(row[0])


def slots_journaled(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db) as con:
            return int(con.execute("SELECT COUNT(*) FROM slots").fetchone()[0])
    except sqlite3.Error:
        return 0


# -- psched serve as an operator runs it ----------------------------------------------------
def operator_env() -> dict[str, str]:
    """A fresh shell's environment: no ``RAY_*`` variable."""
    return {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}


def psched(*args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run ``psched ARGS`` as an operator would, from a fresh environment."""
    return subprocess.run([sys.executable, "-m", "psched", *args], capture_output=True,
                          text=True, timeout=timeout_s, env=operator_env(), check=False)


@contextmanager
def serving(workdir: Path, *args: str, timeout_s: float = 180.0) -> Iterator[subprocess.Popen[str]]:
    """``psched serve --dir workdir ARGS`` in the background (its own embedded Ray), until
    it has written its address; stopped with ``psched stop`` (and SIGKILL as a last resort)."""
    proc = start_serve(workdir, *args, timeout_s=timeout_s)
    try:
        yield proc
    finally:
        psched("stop", "--dir", str(workdir), "--timeout", "120", timeout_s=180)
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def start_serve(workdir: Path, *args: str, timeout_s: float = 180.0) -> subprocess.Popen[str]:
    addr = workdir / "address"
    addr.unlink(missing_ok=True)
    log = open(workdir.parent / f"{workdir.name}.serve.log", "a")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "psched", "serve", "--dir", str(workdir),
                             *args], stdout=log, stderr=subprocess.STDOUT, text=True,
                            env=operator_env(), start_new_session=True)
    end = time.time() + timeout_s
    while not addr.exists():
        if proc.poll() is not None or time.time() > end:
            proc.kill()
            text = (workdir.parent / f"{workdir.name}.serve.log").read_text()
            raise RuntimeError(f"psched serve did not start (rc {proc.poll()}): {text[-2000:]}")
        time.sleep(0.3)
    for _ in range(200):  # the actor answers
        if psched("status", "--dir", str(workdir), "--json").returncode == 0:
            break
        time.sleep(0.5)
    return proc


def cli_status(workdir: Path) -> dict[str, Any]:
    out = psched("status", "--dir", str(workdir), "--json", timeout_s=60)
    if out.returncode != 0:
        raise subprocess.SubprocessError(out.stderr.strip()[-300:])
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def one_server_cluster(slot_s: float, cpu: float = 3.0) -> Cluster:
    """One machine as a worker and a PS server (``cpu`` each)."""
    cap = Resources(cpu=cpu, memory_gb=16, bandwidth_gbps=10)
    return Cluster(servers=(Server(server_id="m/w", pool=Pool.WORKER, capacity=cap),
                            Server(server_id="m/ps", pool=Pool.PS, capacity=cap)),
                   slot_seconds=slot_s)
